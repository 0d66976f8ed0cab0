#!/usr/bin/env bash
# bench/otel-count.sh OUTDIR BIN:VARIANT... : instructions per lock cycle, counted by valgrind's
# callgrind (not timed, so the machine's load does not move them). Each BIN is a test binary of
# ./bench (`go test -c -o X.test ./bench`) with BenchmarkOTelAllocs (Lock + Unlock in one goroutine
# on five in-memory masters); VARIANT is its sub-benchmark (none, noop, metrics, sdk). Every run
# counts the whole process twice, at N1 and N2 cycles (-test.benchtime N1x, N2x); the difference over
# N2-N1 is one cycle's instructions with start-up and set-up cancelled out. RUNS pairs per
# BIN:VARIANT (default 3), taken in turn so that a drift hits all alike. GOMAXPROCS=1 (default):
# valgrind runs one thread at a time anyway, and idle Ps would add scheduler spinning that depends
# on timing, not on the code; GODEBUG=asyncpreemptoff=1 because callgrind 3.19 asserts on Go's
# preemption signal. Writes OUTDIR/<bin>-<variant>.txt (one "ir_per_cycle" line per pair) and
# OUTDIR/summary.txt (median, min, max). BENCH (default 'OTelAllocs/%s$', %s = VARIANT) picks another
# sub-benchmark, e.g. BENCH='OTel/%s/uncontended/c=256$' with REDLOCK_BENCH_NODES naming five
# redis-server processes run outside valgrind (only the client is counted; valgrind runs its 256
# goroutines one at a time, so contention shows as no instructions at all).
set -euo pipefail
out=$1; shift
N1=${N1:-1000} N2=${N2:-5000} RUNS=${RUNS:-3}
mkdir -p "$out"
irs() { # bin variant n -> total Ir of the process
  local f; f=$(mktemp)
  GOMAXPROCS=${GOMAXPROCS:-1} GODEBUG=asyncpreemptoff=1 valgrind --tool=callgrind --cache-sim=no \
    --callgrind-out-file=/dev/null "$(realpath "$1")" -test.run '^$' -test.bench "$(printf "${BENCH:-OTelAllocs/%s\$}" "$2")" \
    -test.benchtime "${3}x" >"$f" 2>&1 || { cat "$f" >&2; rm -f "$f"; return 1; }
  grep -q '^PASS' "$f" || { cat "$f" >&2; rm -f "$f"; return 1; }
  # The benchmark's own line (ops/batch, batches/cycle with the metrics SDK; writes/cycle on Redis)
  # says what batch sizes the count was taken at.
  grep '^Benchmark' "$f" | sed 's/[[:space:]]\+/ /g' >>"$out/bench-lines.txt"
  sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$f"; rm -f "$f"
}
for r in $(seq 1 "$RUNS"); do
  for spec in "$@"; do
    bin=${spec%%:*} v=${spec##*:}
    a=$(irs "$bin" "$v" "$N1"); b=$(irs "$bin" "$v" "$N2")
    ob=$(tail -1 "$out/bench-lines.txt" | sed -n 's#.* \([0-9.]*\) ops/batch.*#\1#p')
    echo "run=$r n1=$N1 ir1=$a n2=$N2 ir2=$b ir_per_cycle=$(( (b - a) / (N2 - N1) ))${ob:+ ops_per_batch=$ob}" >>"$out/$(basename "$bin" .test)-$v.txt"
  done
done
for spec in "$@"; do
  bin=${spec%%:*} v=${spec##*:} f=$out/$(basename "$bin" .test)-$v.txt
  sed -n 's/.*ir_per_cycle=//p' "$f" | sort -n | awk -v n="$(basename "$bin" .test)/$v" \
    '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%-28s median %8d  min %8d  max %8d  spread %+.2f%%/%+.2f%%  n=%d\n", n, m, a[1], a[NR], (a[1]-m)*100/m, (a[NR]-m)*100/m, NR}'
done | tee "$out/summary.txt"
