#!/usr/bin/env bash
# bench/compare.sh REF [FILTER] [ROUNDS]: this tree's engine against git REF's,
# interleaved, in one command.
#
# It builds ./bench's test binary at REF (from `git archive`, in a temporary
# directory) and in this tree, runs them in turn ROUNDS times against the same
# five redis-server processes (bench/interleave.sh), and prints benchstat's
# comparison (old = REF, new = this tree). Outputs go to OUT.
#
#   bench/compare.sh main 'Redis/uncontended/c=256$' 8     # client CPU per cycle vs main
#   bench/compare.sh main 'Memory/uncontended/c=256$' 8    # embedded masters vs main
#
# Environment: OUT=dir (default bench/out/compare-<time>), BENCHTIME=2s.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
ref=${1:?usage: bench/compare.sh REF [FILTER] [ROUNDS]}
filter=${2:-'Redis/uncontended/c=256$'}
rounds=${3:-8}
OUT=${OUT:-bench/out/compare-$(date +%Y%m%d-%H%M%S)}
BENCHSTAT=${BENCHSTAT:-golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da}
export GOWORK=off
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT
git archive "$ref" | tar -x -C "$src"
(cd "$src" && go test -c -o "$OUT/old.test" ./bench)
go test -c -o "$OUT/new.test" ./bench
go build -o "$src/xcore" ./bench/cmd/xcore
{
	echo "old: $ref ($(git rev-parse --short "$ref"))"
	echo "new: $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (dirty tree)')"
	echo "filter: $filter rounds: $rounds"
	echo "date: $(date -u +%FT%TZ) load: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$OUT/machine.txt"
rm -f "$OUT/old.txt" "$OUT/new.txt" "$OUT/xcore.txt"
XCORE="$src/xcore" BENCHTIME=${BENCHTIME:-2s} bench/interleave.sh "$OUT/old.test" "$OUT/new.test" "$rounds" "$OUT" "$filter"
go run "$BENCHSTAT" "$OUT/old.txt" "$OUT/new.txt" | tee "$OUT/benchstat.txt"
python3 bench/placement.py "$OUT/old.txt" "$OUT/new.txt" --xcore "$OUT/xcore.txt" | tee "$OUT/placement.txt"
echo "outputs in $OUT"
