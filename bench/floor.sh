#!/usr/bin/env bash
# bench/floor.sh [REF] [ROUNDS]: the floor of the design card (BenchmarkFloor, package bench/floor:
# the engine's message pattern on protoactor-go with no lock work) beside the engine's
# BenchmarkMemory and BenchmarkRedis, at 1 and 256 lockers, of git REF (default ba207ff, main
# before issue 13) and of this tree, interleaved ROUNDS times (default 8) on the same five
# redis-server processes (bench/interleave.sh). old.txt holds REF's engine rows; new.txt this
# tree's engine rows and the floor's. benchstat compares the engine rows; the floor's stand alone.
#
# Environment: OUT=dir (default bench/out/floor-<time>), BENCHTIME=1s, VARIANTS (regexp of
# floor variants, default the cheapest of each kind; '.' for all of them), LOCKERS (regexp,
# default '1|256'), TRANSPORTS (regexp, default 'none|memory|redis').
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
ref=${1:-ba207ff}
rounds=${2:-8}
OUT=${OUT:-bench/out/floor-$(date +%Y%m%d-%H%M%S)}
VARIANTS=${VARIANTS:-'worker|worker-inlinecoord|selfflush-inlinecoord|perop-inlinecoord'}
LOCKERS=${LOCKERS:-'1|256'}
TRANSPORTS=${TRANSPORTS:-'none|memory|redis'}
BENCHSTAT=${BENCHSTAT:-golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da}
export GOWORK=off
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT
git archive "$ref" | tar -x -C "$src"
(cd "$src" && go test -c -o "$OUT/old.test" ./bench)
go test -c -o "$OUT/new.test" ./bench
filter="^Benchmark(Memory|Redis)\$/uncontended/c=($LOCKERS)\$|^BenchmarkFloor\$/($TRANSPORTS)/($VARIANTS)\$/uncontended/c=($LOCKERS)\$"
{
	echo "old: $ref ($(git rev-parse --short "$ref"))"
	echo "new: $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (dirty tree)')"
	echo "filter: $filter rounds: $rounds"
	echo "start: $(date -u +%FT%TZ) load: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$OUT/machine.txt"
rm -f "$OUT/old.txt" "$OUT/new.txt"
BENCHTIME=${BENCHTIME:-1s} bench/interleave.sh "$OUT/old.test" "$OUT/new.test" "$rounds" "$OUT" "$filter"
echo "end: $(date -u +%FT%TZ) load: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/machine.txt"
go run "$BENCHSTAT" "$OUT/old.txt" "$OUT/new.txt" | tee "$OUT/benchstat.txt"
python3 bench/floor_ratios.py "$OUT" | tee "$OUT/ratios.txt"
echo "outputs in $OUT"
