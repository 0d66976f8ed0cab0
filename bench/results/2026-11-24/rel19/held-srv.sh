#!/usr/bin/env bash
# held-srv.sh OLD.test NEW.test [ROUNDS]: the five redis-servers' CPU over one
# BenchmarkHeld run (REDLOCK_BENCH_HELD locks, default 100000, held with
# auto-extension), for two builds of ./bench in turn on the same five servers.
# The take, the window's extensions and the releases at Close are all in it;
# the extension's share is what differs between builds that change only how
# Extends are sent. Prints the servers' CPU (s, INFO used_cpu_user+sys) and
# the EVALSHA calls and DEL/PEXPIRE calls from INFO commandstats per run.
set -euo pipefail
old=$1 new=$2 rounds=${3:-3}
export REDLOCK_BENCH_HELD=${REDLOCK_BENCH_HELD:-100000}
tmp=$(mktemp -d); pids=(); ports=()
trap 'for p in "${pids[@]}"; do kill -9 $p 2>/dev/null || true; done; rm -rf "$tmp"' EXIT
for i in 1 2 3 4 5; do
	port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
	redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$tmp" --daemonize no >/dev/null &
	pids+=($!); ports+=("$port")
done
sleep 1
nodes=$(printf '127.0.0.1:%s,' "${ports[@]}")
export REDLOCK_BENCH_NODES=${nodes%,}
cpu() { for p in "${ports[@]}"; do redis-cli -p "$p" info cpu; done | tr -d '\r' | awk -F: '/^used_cpu_(user|sys):/ {s += $2} END {printf "%.3f\n", s}'; }
stats() { for p in "${ports[@]}"; do redis-cli -p "$p" info commandstats; done | tr -d '\r' |
	awk -F'[:,=]' '/^cmdstat_evalsha:/ {e += $3} /^cmdstat_pexpire:/ {x += $3} /^cmdstat_set:/ {s += $3} END {printf "set %d evalsha %d pexpire %d", s, e, x}'; }
echo "date: $(date -u +%FT%TZ) load: $(cut -d' ' -f1-3 /proc/loadavg) locks: $REDLOCK_BENCH_HELD"
for r in $(seq 1 "$rounds"); do
	for b in old new; do
		bin=$old; [ $b = new ] && bin=$new
		for p in "${ports[@]}"; do redis-cli -p "$p" config resetstat >/dev/null; done
		c0=$(cpu)
		line=$("$bin" -test.run '^$' -test.bench '^BenchmarkHeld$' -test.benchtime 1x | grep '^BenchmarkHeld/' || true)
		c1=$(cpu)
		echo "$b servers-cpu-s $(awk -v a="$c0" -v b="$c1" 'BEGIN {printf "%.3f", b - a}') $(stats) load $(cut -d' ' -f1 /proc/loadavg)"
		echo "  $line"
	done
done
