#!/usr/bin/env bash
# multi.sh OUTDIR ROUNDS FILTER BIN...: the test binaries (go test -c ./bench at
# each commit, named COMMIT.test) run in turn, ROUNDS times, the order rotated
# each round; OUTDIR/COMMIT.txt per binary, for benchstat. BenchmarkMemory only
# (no redis-server needed).
set -euo pipefail
out=$1 rounds=$2 filter=$3; shift 3
mkdir -p "$out"
bins=("$@"); n=${#bins[@]}
echo "date: $(date -u +%FT%TZ) load: $(cut -d' ' -f1-3 /proc/loadavg)" > "$out/machine.txt"
for r in $(seq 0 $((rounds-1))); do
  for k in $(seq 0 $((n-1))); do
    b=${bins[$(( (k+r) % n ))]}
    name=$(basename "$b" .test)
    "$b" -test.run '^$' -test.bench "$filter" -test.benchmem -test.benchtime ${BENCHTIME:-2s} >> "$out/$name.txt" 2>&1
  done
  echo "round $r end $(date -u +%T) load: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/machine.txt"
done
