#!/usr/bin/env bash
# bench/servercounts.sh [BIN...]: what the five redis-servers do per lock cycle
# under the engine at 256 lockers and under the redis-benchmark -P 64 ceiling:
# reads and reply writes per cycle (the servers' event-loop turns that carry
# commands), client commands per read, and microseconds of command time per
# cycle, from each server's INFO stats and commandstats (reset before each
# run). Counts, not timings: they hold on a loaded machine.
#
# BIN: test binaries of ./bench (go test -c), run in turn (default: this
# tree's). N=100000 cycles each (the engine's -benchtime and the ceiling's
# requests per server); ROUNDS=1.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
N=${N:-100000}
ROUNDS=${ROUNDS:-1}
export GOWORK=off
tmp=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill -9 $p 2>/dev/null || true; done; rm -rf "$tmp"' EXIT
bins=("$@")
if [ ${#bins[@]} -eq 0 ]; then
	go test -c -o "$tmp/bench.test" ./bench
	bins=("$tmp/bench.test")
fi
ports=()
for i in 1 2 3 4 5; do
	port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
	redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$tmp" --daemonize no >/dev/null &
	pids+=($!)
	ports+=("$port")
done
sleep 1
nodes=$(printf '127.0.0.1:%s,' "${ports[@]}")
export REDLOCK_BENCH_NODES=${nodes%,}
release='if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end'
sha=""
for p in "${ports[@]}"; do sha=$(redis-cli -p "$p" script load "$release"); done
reset() { for p in "${ports[@]}"; do redis-cli -p "$p" config resetstat >/dev/null; done; }
# counts NAME CYCLES: sums the five servers' counters since the reset.
counts() {
	for p in "${ports[@]}"; do redis-cli -p "$p" info stats; redis-cli -p "$p" info commandstats; done | tr -d '\r' |
		awk -F'[:,=]' -v name="$1" -v n="$2" '
			/^total_reads_processed/ {r += $2}
			/^total_writes_processed/ {w += $2}
			/^cmdstat_(set|evalsha):/ {c += $3; us += $5}
			/^cmdstat_del:/ {del += $3}
			END {printf "%-28s reads/cycle %.4f  writes/cycle %.4f  commands/read %.1f  command-us/cycle %.2f  deletes/release %.3f\n",
				name, r / n, w / n, c / r, us / n, del / (n * 5)}'
}
echo "date: $(date -u +%FT%TZ) commit: $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (dirty tree)') load: $(cut -d' ' -f1-3 /proc/loadavg) N: $N"
for r in $(seq 1 "$ROUNDS"); do
	for b in "${bins[@]}"; do
		reset
		"$b" -test.run '^$' -test.bench '^BenchmarkRedis$/^uncontended$/^c=256$' -test.benchtime "${N}x" >/dev/null
		counts "engine $(basename "$b")" "$N"
	done
	reset
	for cmd in "SET rb:__rand_int__ v NX PX 10000" "EVALSHA $sha 1 rb:__rand_int__ v"; do
		rb=()
		for p in "${ports[@]}"; do
			redis-benchmark -h 127.0.0.1 -p "$p" -P 64 -c 50 -n "$N" -r 100000000 -q $cmd >/dev/null &
			rb+=($!)
		done
		wait "${rb[@]}" # not the servers
	done
	counts "ceiling (redis-benchmark)" "$N"
done
