#!/usr/bin/env bash
# bench/otel-count-redis.sh OUTDIR BIN:VARIANT... : bench/otel-count.sh on Redis, the representative
# case of issue 12's 10 % bound: BenchmarkOTel's uncontended/c=C (C=256 by default: 256 lockers on
# fresh keys, as in BENCHMARKS.md's rows), the client counted under callgrind and five redis-server
# processes outside it (started here on free ports, stopped by pid). REDLOCK_BENCH_SLOW raises the
# master timeout and TTL so that the slowed cycles do not fail. Each BIN is `go test -c -o X.test
# ./bench`; VARIANT none, noop, metrics or sdk. RUNS (default 7), N1, N2 as in otel-count.sh.
#
# Batch sizes: the metrics variants report ops/batch (from the SDK's batch-size histogram) on every
# run, kept in OUTDIR/<bin>-<variant>.txt and OUTDIR/bench-lines.txt. Under valgrind the client runs
# ~50 times slower while the servers do not; with one batch in flight per master (the default) the
# ops that queue while a batch is out all leave in the next one, so batches stay as large as in a
# native run (about 100 ops at c=256, BENCHMARKS.md). DELAY=D puts bench/cmd/delayproxy (one-way
# delay D, its own process, not counted) in front of the servers, for larger batches still.
#
# HOOKS=1 adds one profiled pair per BIN:VARIANT (callgrind output files in OUTDIR/prof) and, for
# each variant after the first, bench/otel_hooks.py against the first: the telemetry functions'
# instructions per cycle, which do not move with scheduling as the whole-process count does.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$1; shift
mkdir -p "$out"
out=$(cd "$out" && pwd)
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT
addrs=()
for i in 1 2 3 4 5; do
	port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
	redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$tmp" --daemonize no >/dev/null &
	pids+=($!); addrs+=("127.0.0.1:$port")
done
for a in "${addrs[@]}"; do
	for _ in $(seq 50); do redis-cli -h 127.0.0.1 -p "${a##*:}" ping >/dev/null 2>&1 && break; sleep 0.1; done
done
nodes=$(IFS=,; echo "${addrs[*]}")
if [ -n "${DELAY:-}" ]; then
	(cd "$root" && go build -o "$tmp/delayproxy" ./bench/cmd/delayproxy)
	"$tmp/delayproxy" -delay "$DELAY" "${addrs[@]}" >"$tmp/proxy.addr" &
	pids+=($!)
	for _ in $(seq 50); do [ -s "$tmp/proxy.addr" ] && break; sleep 0.1; done
	nodes=$(cat "$tmp/proxy.addr")
fi
export BENCH="OTel/%s/uncontended/c=${C:-256}\$" REDLOCK_BENCH_SLOW=1 REDLOCK_BENCH_NODES=$nodes
specs=()
for s in "$@"; do specs+=("$(realpath "${s%%:*}"):${s##*:}"); done
(cd "$out" && RUNS=${RUNS:-7} "$root/bench/otel-count.sh" . "${specs[@]}")
if [ "${HOOKS:-}" = 1 ]; then
	mkdir -p "$out/prof"
	N1=${N1:-1000} N2=${N2:-5000}
	for s in "${specs[@]}"; do
		bin=${s%%:*} v=${s##*:}
		for n in "$N1" "$N2"; do
			GOMAXPROCS=${GOMAXPROCS:-1} GODEBUG=asyncpreemptoff=1 valgrind --tool=callgrind --cache-sim=no \
				--callgrind-out-file="$out/prof/$(basename "$bin" .test)-$v-$n.out" "$bin" -test.run '^$' \
				-test.bench "$(printf "$BENCH" "$v")" -test.benchtime "${n}x" >/dev/null 2>&1
		done
	done
	first=${specs[0]} fb=$(basename "${first%%:*}" .test) fv=${first##*:}
	for s in "${specs[@]:1}"; do
		b=$(basename "${s%%:*}" .test) v=${s##*:}
		echo "== $b/$v against $fb/$fv (one profiled pair each)"
		python3 "$root/bench/otel_hooks.py" "$out/prof/$fb-$fv-$N1.out" "$out/prof/$fb-$fv-$N2.out" \
			"$out/prof/$b-$v-$N1.out" "$out/prof/$b-$v-$N2.out" $((N2 - N1))
	done | tee "$out/hooks.txt"
fi
