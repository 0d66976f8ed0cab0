#!/usr/bin/env bash
# bench/heldload.sh: BenchmarkHeld under a set CPU load (BENCHMARKS.md,
# "Held locks under load"). For each number of hogs in HOGS and each test
# binary in BINS (alternated: one run of each, in order) it measures the CPU
# a two-thread process gets beside that many `while :; do :; done` shells
# (bench/cmd/cpushare; the hogs stopped by pid after), then runs
# BenchmarkHeld once with REDLOCK_BENCH_HELD_HOGS, which starts as many hogs
# once the locks are taken and stops them before releasing. The benchmark
# starts its own five redis-server processes.
#
# Usage: BINS="old=/tmp/old.test new=/tmp/new.test" HOGS="0 8 16" HELD=100000 bench/heldload.sh
# Build each binary with `go test -c -o X.test ./bench` in its tree.
# Environment:
#   BINS      name=path of a bench test binary, space-separated (required)
#   HOGS      numbers of CPU hogs, space-separated (default "0 8 16")
#   HELD      locks held (default 100000)
#   ROUNDS    times each (hogs, binary) pair runs (default 1)
#   METRICS   non-empty: REDLOCK_BENCH_HELD_METRICS=1 (batch round trips and
#             extension outcomes; costs some CPU)
#   OUT       directory for the outputs (default bench/out/heldload-<time>)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
: "${BINS:?set BINS=\"name=path ...\"}"
HOGS=${HOGS:-0 8 16}
HELD=${HELD:-100000}
ROUNDS=${ROUNDS:-1}
OUT=${OUT:-bench/out/heldload-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
GOWORK=off go build -o "$OUT/cpushare" ./bench/cmd/cpushare
hogs=()
stop_hogs() {
	for p in "${hogs[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${hogs[@]}"; do wait "$p" 2>/dev/null || true; done
	hogs=()
}
trap stop_hogs EXIT
trap 'stop_hogs; exit 1' INT TERM
for h in $HOGS; do
	for ((r = 0; r < ROUNDS; r++)); do
		for nb in $BINS; do
			name=${nb%%=*}
			bin=${nb#*=}
			f="$OUT/held-$name-hogs$h-r$r.txt"
			# The CPU a two-thread process gets beside h hogs, measured now
			# (the machine's other load moves it), then the run, whose hogs
			# the benchmark itself starts once the locks are taken.
			for ((i = 0; i < h; i++)); do
				sh -c 'while :; do :; done' &
				hogs+=($!)
			done
			sleep 1
			share=$("$OUT/cpushare" -d 3s)
			stop_hogs
			echo "# $name hogs=$h held=$HELD start $(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg); cpushare beside the hogs: $share" >"$f"
			(cd bench && env REDLOCK_BENCH_HELD=$HELD REDLOCK_BENCH_HELD_HOGS=$h ${METRICS:+REDLOCK_BENCH_HELD_METRICS=1} \
				"$bin" -test.run '^$' -test.bench BenchmarkHeld -test.benchtime 1x -test.timeout 30m) >>"$f" 2>&1 || true
			echo "# end $(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg)" >>"$f"
			echo "== $f"
			grep -E '^Benchmark|^# |lost locks|timer lateness|over the run' "$f" || true
		done
	done
done
