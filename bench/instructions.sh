#!/usr/bin/env bash
# bench/instructions.sh REF...: instructions per lock cycle of each git REF's engine and of this
# tree's, counted by valgrind's callgrind on the memory masters at 256 lockers (BenchmarkMemory,
# uncontended): (Ir at N2 cycles - Ir at N1) / (N2 - N1), which cancels the start-up and the
# warm-up. A count, not a time: the same on a quiet machine and on a noisy one.
#
# What it does not see: cache misses and the hand-offs between cores (valgrind runs one thread at a
# time, so batches also form differently than on two cores). It shows work a change adds or removes
# (allocation, collection, clock reads, bookkeeping), not what the cores' placement costs; a change
# that moves work between cores needs the timed compares (bench/compare.sh).
#
# Nor does it see clock reads: under valgrind the Go runtime finds no vDSO and reads each clock by a
# system call (a program calling time.Now 1,000 times made 2,022 clock_gettime calls under
# valgrind --trace-syscalls=yes), which callgrind does not count. A change that saves clock reads
# needs the timed compares too (BENCHMARKS.md, "Eighteenth session").
#
# Nor does it weigh batches as two cores do: at one P the engine made 2.09 batches a lock cycle at
# 256 lockers where two Ps made 0.51-0.56, and ba207ff 1.17-1.26 against 0.60-0.64
# (BENCHMARKS.md, "Fourteenth session"). A change that alters batching is counted at one P's
# batching, not at two Ps'.
#
# It runs the benchmark at one P (-test.cpu 1): with two, the Go runtime's idle threads spin looking
# for work, and under valgrind the instructions they burn varied by 2x between identical runs.
# The cores' probe (bench.CoreRoundTrip) spins until its time budget runs out under valgrind, so it
# is turned off (REDLOCK_BENCH_XCORE=off). A REF whose benchtest has the probe but not that switch
# gets this tree's bench/benchtest; one older than the probe needs nothing.
#
# Environment: FILTER (default the benchmark above), N1 and N2 (10000 and 40000), REPS (3), CPU (1),
# OUT (default bench/out/instructions-<time>).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
[ $# -ge 1 ] || { echo "usage: bench/instructions.sh REF..." >&2; exit 2; }
command -v valgrind >/dev/null || { echo "valgrind not found (apt-get install valgrind)" >&2; exit 1; }
filter=${FILTER:-'^BenchmarkMemory$/^uncontended$/^c=256$'}
n1=${N1:-10000} n2=${N2:-40000} reps=${REPS:-3} cpu=${CPU:-1}
OUT=${OUT:-bench/out/instructions-$(date +%Y%m%d-%H%M%S)}
export GOWORK=off REDLOCK_BENCH_XCORE=off
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT
names=()
for ref in "$@"; do
	name=$(git rev-parse --short "$ref")
	mkdir -p "$src/$name"
	git archive "$ref" | tar -x -C "$src/$name"
	bt=$src/$name/bench/benchtest/benchtest.go
	if grep -q CoreRoundTrip "$bt" && ! grep -q XcoreEnv "$bt"; then
		cp bench/benchtest/benchtest.go "$bt"
		echo "$name: this tree's bench/benchtest (its own has the probe without the switch)"
	fi
	(cd "$src/$name" && go test -c -o "$OUT/$name.test" ./bench)
	names+=("$name")
done
go test -c -o "$OUT/tree.test" ./bench
names+=(tree)
{
	echo "refs: $* ($(IFS=' '; echo "${names[*]}")); tree: $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (dirty tree)')"
	echo "filter: $filter N1=$n1 N2=$n2 reps=$reps cpu=$cpu date: $(date -u +%FT%TZ) load: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$OUT/machine.txt"
: >"$OUT/counts.txt"
for rep in $(seq 1 "$reps"); do
	for name in "${names[@]}"; do
		for n in $n1 $n2; do
			ir=$(GODEBUG=asyncpreemptoff=1 valgrind --tool=callgrind --callgrind-out-file=/dev/null \
				"$OUT/$name.test" -test.run '^$' -test.bench "$filter" -test.benchtime "${n}x" -test.cpu "$cpu" 2>&1 |
				awk '/Collected/ {print $4}')
			echo "$rep $name $n $ir" | tee -a "$OUT/counts.txt"
		done
	done
done
python3 - "$OUT/counts.txt" "$n1" "$n2" <<'EOF' | tee "$OUT/instructions.txt"
import sys, statistics
path, n1, n2 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
runs = {}
for line in open(path):
    rep, name, n, ir = line.split()
    runs.setdefault(name, {}).setdefault(rep, {})[int(n)] = int(ir)
per = {name: [(r[n2] - r[n1]) / (n2 - n1) for r in reps.values() if n1 in r and n2 in r]
       for name, reps in runs.items()}
base = statistics.median(per["tree"])
print("instructions per cycle (median of reps; each rep's value), and this tree over each")
for name, v in per.items():
    m = statistics.median(v)
    print("%-10s %8.0f  (%s)  tree/this %.3f" % (name, m, " ".join("%.0f" % x for x in v), base / m))
EOF
echo "outputs in $OUT"
