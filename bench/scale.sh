#!/usr/bin/env bash
# bench/scale.sh: how cost grows, engine against redsync, as tables.
#
# It builds the engine's benchmark binary (./bench), redsync's (./bench/redsync)
# and bench/cmd/delayproxy, starts nine redis-server processes on free loopback
# ports (no persistence; stopped by pid on exit, also on Ctrl-C or an error),
# and runs, each section in turn, engine then redsync, COUNT times:
#
#   masters     N = 1, 3, 5, 7, 9 masters, uncontended, 256 lockers
#   rtt         five masters behind delay proxies (another process) adding a
#               round-trip time of 0.5, 1 and 5 ms; uncontended, 1 and 256 lockers
#   held        10k, 100k and 1M locks held at once with auto-extension (engine
#               only; BenchmarkHeld): heap per held lock, CPU per extension
#   costs       the machine's unit costs: a system call, a write(2), a loopback
#               round trip, a goroutine hand-off (BenchmarkCost*), CPU and wall
#   contention  1, 16, 256, 1024, 4096 lockers on one key (BenchmarkContention):
#               throughput, p99, fairness (spread of grants per locker); redsync
#               up to REDSYNC_MAX_CONTENTION lockers (its lockers spin on retries)
#
# and writes the raw outputs and tables.md (bench/scale_tables.py) to OUT.
# About 8 minutes on a 2-core machine with the defaults.
#
# Usage: bench/scale.sh
# Environment:
#   SECTIONS="costs masters rtt held contention"   which sections to run
#   COUNT=1            runs of each benchmark (tables show medians)
#   BENCHTIME=2s       go test -benchtime of the masters and rtt sections
#   HELD=10000,100000,1000000                 locks held at once
#   CONTENTION_CYCLES=16384                   cycles per contention benchmark (engine)
#   REDSYNC_CONTENTION_CYCLES=2048            the same for redsync (it manages
#                                             about 100 cycles/s at 256 lockers)
#   REDSYNC_MAX_CONTENTION=256
#   RTTS="0.5 1 5"     round-trip times in ms for the rtt section
#   OUT=dir            where outputs go (default bench/out/scale-<time>)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

SECTIONS=${SECTIONS:-costs masters rtt held contention}
COUNT=${COUNT:-1}
BENCHTIME=${BENCHTIME:-2s}
HELD=${HELD:-10000,100000,1000000}
CONTENTION_CYCLES=${CONTENTION_CYCLES:-16384}
REDSYNC_CONTENTION_CYCLES=${REDSYNC_CONTENTION_CYCLES:-2048}
REDSYNC_MAX_CONTENTION=${REDSYNC_MAX_CONTENTION:-256}
RTTS=${RTTS:-0.5 1 5}
OUT=${OUT:-bench/out/scale-$(date +%Y%m%d-%H%M%S)}
export GOWORK=off

for tool in go redis-server redis-cli python3; do
	command -v "$tool" >/dev/null || { echo "scale.sh: $tool not found" >&2; exit 2; }
done
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
tmp=$(mktemp -d)
pids=()
proxy=""
cleanup() {
	[ -n "$proxy" ] && { kill "$proxy" 2>/dev/null || true; wait "$proxy" 2>/dev/null || true; }
	for pid in "${pids[@]}"; do
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "== building"
go test -c -o "$tmp/engine.test" ./bench
(cd bench/redsync && go test -c -o "$tmp/redsync.test" .)
go build -o "$tmp/delayproxy" ./bench/cmd/delayproxy

# start_server starts one redis-server on a free loopback port and sets
# started_port; it checks by pid that the server answering is ours.
start_server() {
	local attempt port pid i
	for attempt in $(seq 1 20); do
		port=$((20000 + RANDOM % 40000))
		if redis-cli -p "$port" ping >/dev/null 2>&1; then
			continue
		fi
		redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
			--protected-mode no --daemonize no --dir "$tmp" \
			--logfile "$tmp/redis-$port.log" &
		pid=$!
		for i in $(seq 1 500); do
			if ! kill -0 "$pid" 2>/dev/null; then
				break
			fi
			if redis-cli -p "$port" info server 2>/dev/null | grep -q "^process_id:$pid"; then
				pids+=("$pid")
				started_port=$port
				return 0
			fi
			sleep 0.01
		done
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	echo "scale.sh: could not start redis-server on a free port" >&2
	return 1
}

addrs=()
for i in $(seq 1 9); do
	start_server
	addrs+=("127.0.0.1:$started_port")
done
first() { local IFS=,; echo "${addrs[*]:0:$1}"; }
echo "masters: ${addrs[*]}"
{
	echo "date: $(date -u +%FT%TZ)"
	echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (dirty tree)')"
	echo "go: $(go version)"
	echo "redis: $(redis-server --version)"
	echo "cpus: $(nproc)"
	echo "SECTIONS=$SECTIONS COUNT=$COUNT BENCHTIME=$BENCHTIME HELD=$HELD CONTENTION_CYCLES=$CONTENTION_CYCLES REDSYNC_CONTENTION_CYCLES=$REDSYNC_CONTENTION_CYCLES REDSYNC_MAX_CONTENTION=$REDSYNC_MAX_CONTENTION RTTS=$RTTS"
	echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$OUT/machine.txt"

# bench CLIENT FILE FILTER [args...]: one run of a client's benchmarks,
# appended to FILE.
bench() {
	local client=$1 file=$2 filter=$3
	shift 3
	"$tmp/$client.test" -test.run '^$' -test.bench "$filter" -test.benchmem -test.timeout 30m "$@" | tee -a "$file"
}

for section in $SECTIONS; do
	case $section in
	costs)
		for run in $(seq 1 "$COUNT"); do
			echo "== costs run $run"
			bench engine "$OUT/costs.txt" 'BenchmarkCost'
		done
		;;
	masters)
		for n in 1 3 5 7 9; do
			for run in $(seq 1 "$COUNT"); do
				for client in engine redsync; do
					echo "== masters=$n run $run: $client"
					REDLOCK_BENCH_NODES=$(first "$n") bench "$client" "$OUT/masters-$n-$client.txt" 'BenchmarkRedis/uncontended/c=256$' -test.benchtime "$BENCHTIME"
				done
			done
		done
		;;
	rtt)
		for rtt in $RTTS; do
			half=$(python3 -c "print(int($rtt * 500))")us
			"$tmp/delayproxy" -delay "$half" "${addrs[@]:0:5}" >"$tmp/proxy.txt" &
			proxy=$!
			for i in $(seq 1 500); do
				[ -s "$tmp/proxy.txt" ] && break
				sleep 0.01
			done
			proxied=$(head -1 "$tmp/proxy.txt")
			for run in $(seq 1 "$COUNT"); do
				for client in engine redsync; do
					echo "== rtt=${rtt}ms run $run: $client"
					REDLOCK_BENCH_NODES=$proxied bench "$client" "$OUT/rtt-$rtt-$client.txt" 'BenchmarkRedis/uncontended/c=(1|256)$' -test.benchtime "$BENCHTIME"
				done
			done
			kill "$proxy"
			wait "$proxy" 2>/dev/null || true
			proxy=""
		done
		;;
	held)
		for run in $(seq 1 "$COUNT"); do
			echo "== held $HELD run $run: engine"
			REDLOCK_BENCH_NODES=$(first 5) REDLOCK_BENCH_HELD=$HELD bench engine "$OUT/held-engine.txt" 'BenchmarkHeld' -test.benchtime 1x
		done
		;;
	contention)
		for run in $(seq 1 "$COUNT"); do
			echo "== contention run $run: engine"
			REDLOCK_BENCH_NODES=$(first 5) bench engine "$OUT/contention-engine.txt" 'BenchmarkContention' -test.benchtime "${CONTENTION_CYCLES}x"
			echo "== contention run $run: redsync (up to $REDSYNC_MAX_CONTENTION lockers)"
			REDLOCK_BENCH_NODES=$(first 5) REDLOCK_BENCH_MAX_CONTENTION=$REDSYNC_MAX_CONTENTION \
				bench redsync "$OUT/contention-redsync.txt" 'BenchmarkContention' -test.benchtime "${REDSYNC_CONTENTION_CYCLES}x"
		done
		;;
	*)
		echo "scale.sh: unknown section $section" >&2
		exit 2
		;;
	esac
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/machine.txt"
python3 bench/scale_tables.py "$OUT" | tee "$OUT/tables.md"
echo "outputs in $OUT"
