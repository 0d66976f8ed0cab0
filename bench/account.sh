#!/usr/bin/env bash
# bench/account.sh [ROUNDS]: where the whole machine's time goes per lock
# cycle, for the engine at 256 lockers and for the redis-benchmark -P 64
# ceiling, in turn on the same five redis-server processes (so that load from
# others hits both alike).
#
# Each round runs BenchmarkRedis/uncontended/c=256 (whose machine metrics are
# bench.Account's terms) and then the ceiling under bench/cmd/account: SET NX
# PX and then EVALSHA of the release script on all five servers at once,
# N requests each per server, so N lock cycles. It prints both as
# microseconds per cycle:
#   client   the engine's process, or the five redis-benchmark processes
#   servers  the five redis-server processes
#   others   every other process and kernel thread (other users' load)
#   idle     cores with nothing to run; steal: the hypervisor's
#   softirq  interrupt work, already inside the terms above
#   total    cores x wall time per cycle
# When idle is near zero in both, the machine is saturated in both, and the
# throughput ratio is the ratio of the totals: ceiling/engine cycles per
# second = (client + servers + others) of the engine over the ceiling's.
#
# Environment: N=300000 (ceiling cycles per round), BENCHTIME=2s (the
# engine's -benchtime), OUT=dir (default bench/out/account-<time>).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
rounds=${1:-3}
N=${N:-300000}
OUT=${OUT:-bench/out/account-$(date +%Y%m%d-%H%M%S)}
export GOWORK=off
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
tmp=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill -9 $p 2>/dev/null || true; done; rm -rf "$tmp"' EXIT
go test -c -o "$tmp/bench.test" ./bench
go build -o "$tmp/account" ./bench/cmd/account
ports=()
for i in 1 2 3 4 5; do
	port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
	redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$tmp" --daemonize no >/dev/null &
	pids+=($!)
	ports+=("$port")
done
sleep 1
nodes=$(printf '127.0.0.1:%s,' "${ports[@]}")
nodes=${nodes%,}
release='if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end'
sha=""
for p in "${ports[@]}"; do sha=$(redis-cli -p "$p" script load "$release"); done
{
	echo "date: $(date -u +%FT%TZ) commit: $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (dirty tree)')"
	echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) rounds: $rounds N: $N"
} | tee "$OUT/machine.txt"
export RB_PORTS="${ports[*]}" RB_SHA=$sha RB_N=$N
: >"$OUT/engine.txt"
: >"$OUT/ceiling.txt"
for r in $(seq 1 "$rounds"); do
	REDLOCK_BENCH_NODES=$nodes "$tmp/bench.test" -test.run '^$' -test.bench '^BenchmarkRedis$/^uncontended$/^c=256$' \
		-test.benchmem -test.benchtime "${BENCHTIME:-2s}" | grep '^Benchmark' | tee -a "$OUT/engine.txt"
	"$tmp/account" -json -name ceiling -nodes "$nodes" -cycles "$N" -- bash -c '
		for cmd in "SET rb:__rand_int__ v NX PX 10000" "EVALSHA $RB_SHA 1 rb:__rand_int__ v"; do
			for p in $RB_PORTS; do redis-benchmark -h 127.0.0.1 -p $p -P 64 -c 50 -n $RB_N -r 100000000 -q $cmd >/dev/null & done
			wait
		done' | tee -a "$OUT/ceiling.txt"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/machine.txt"
# Medians of each term, side by side.
python3 - "$OUT/engine.txt" "$OUT/ceiling.txt" <<'PY' | tee "$OUT/summary.txt"
import json, re, statistics, sys
eng = {}
for line in open(sys.argv[1]):
    f = line.split()
    for v, unit in zip(f[2::2], f[3::2]):
        eng.setdefault(unit, []).append(float(v))
ceil = [json.loads(l) for l in open(sys.argv[2]) if l.startswith("{")]
med = lambda xs: statistics.median(xs) if xs else float("nan")
e = {k: med(eng.get(u, [])) for k, u in [("rate", "cycles/s"), ("client", "cpu-us/cycle"), ("servers", "srv-us/cycle"),
     ("others", "others-us/cycle"), ("idle", "idle-us/cycle"), ("steal", "steal-us/cycle"), ("softirq", "softirq-us/cycle"), ("total", "total-us/cycle")]}
c = {k: med([x[j] for x in ceil]) for k, j in [("client", "client_us"), ("servers", "servers_us"), ("others", "others_us"),
     ("idle", "idle_us"), ("steal", "steal_us"), ("softirq", "softirq_us"), ("total", "total_us")]}
c["rate"] = med([x["cycles"] / x["wall_s"] for x in ceil])
print(f"medians of {len(eng.get('cycles/s', []))} engine runs and {len(ceil)} ceiling runs, microseconds per lock cycle")
print(f"{'':10} {'cycles/s':>9} {'client':>7} {'servers':>7} {'others':>7} {'idle':>6} {'steal':>6} {'total':>7} {'(softirq)':>9}")
for name, d in (("engine", e), ("ceiling", c)):
    print(f"{name:10} {d['rate']:9.0f} {d['client']:7.2f} {d['servers']:7.2f} {d['others']:7.2f} {d['idle']:6.2f} {d['steal']:6.2f} {d['total']:7.2f} {d['softirq']:9.2f}")
busy = lambda d: d["client"] + d["servers"] + d["others"]
own = lambda d: d["client"] + d["servers"]
print(f"engine/ceiling cycles/s measured {e['rate'] / c['rate']:.2f}")
print(f"  predicted from busy time per cycle, (client+servers+others) of the ceiling over the engine's: {busy(c) / busy(e):.2f}")
print(f"  on a machine with no others (client+servers only): {own(c) / own(e):.2f}; with an engine client that cost nothing: {own(c) / e['servers']:.2f}")
print(f"  for 1.0x the engine's client may cost at most {own(c) - e['servers']:.2f} us/cycle (it costs {e['client']:.2f})")
PY
echo "outputs in $OUT"
