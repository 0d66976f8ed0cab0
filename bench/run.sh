#!/usr/bin/env bash
# bench/run.sh: the engine against redsync against the redis-benchmark
# ceiling, on the same five redis-server processes, in one run.
#
# It starts five redis-server processes on free loopback ports (no
# persistence), then, COUNT times in turn so that noise on a shared machine
# hits all alike:
#   - the engine's benchmarks   (package ./bench, BenchmarkRedis)
#   - redsync's benchmarks      (module ./bench/redsync, BenchmarkRedis)
#   - optionally redsync again with bigger go-redis pools (REDSYNC_POOL_SIZE)
# then the redis-benchmark ceiling (-P 64, all five servers at once) and the
# engine on the embedded in-memory masters (BenchmarkMemory). It stops the
# servers by pid (also on Ctrl-C or an error) and feeds the outputs to
# benchstat.
#
# Usage: bench/run.sh            (from anywhere; writes bench/out/<time>/)
# Environment:
#   COUNT=5          runs of each benchmark (benchstat wants 5 or more)
#   BENCHTIME=1s     go test -benchtime
#   FILTER=.         go test -bench regexp for the sub-benchmarks, e.g. 'Redis/uncontended/c=256$'
#   POOL_SIZES=64    also run redsync with these go-redis pool sizes ("" for none)
#   MEMORY=1         also run BenchmarkMemory (0 to skip)
#   CEILING=1        also run redis-benchmark (0 to skip)
#   OUT=dir          where the outputs go
# Needs: go, redis-server, redis-cli, redis-benchmark; benchstat is run with
# `go run` at a pinned version (the module proxy the first time).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

COUNT=${COUNT:-5}
BENCHTIME=${BENCHTIME:-1s}
FILTER=${FILTER:-.}
POOL_SIZES=${POOL_SIZES-64}
MEMORY=${MEMORY:-1}
CEILING=${CEILING:-1}
OUT=${OUT:-bench/out/$(date +%Y%m%d-%H%M%S)}
BENCHSTAT=${BENCHSTAT:-golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da}
# The nested module must be built on its own, never through a go.work.
export GOWORK=off

for tool in go redis-server redis-cli redis-benchmark; do
	command -v "$tool" >/dev/null || { echo "run.sh: $tool not found (redis-server, redis-cli and redis-benchmark come with Debian's redis-server and redis-tools packages)" >&2; exit 2; }
done
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

tmp=$(mktemp -d)
pids=()
stop_servers() {
	for pid in "${pids[@]}"; do
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	pids=()
	rm -rf "$tmp"
}
trap stop_servers EXIT
trap 'exit 130' INT TERM

# start_server starts one redis-server on a free loopback port and prints
# the port. A port that looked free can be taken before redis binds it, so
# it checks that the server answering is ours (by pid) and tries again if
# not.
start_server() {
	local attempt port pid i
	for attempt in $(seq 1 20); do
		port=$((20000 + RANDOM % 40000))
		if redis-cli -p "$port" ping >/dev/null 2>&1; then
			continue # someone is there
		fi
		redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
			--protected-mode no --daemonize no --dir "$tmp" \
			--logfile "$tmp/redis-$port.log" &
		pid=$!
		for i in $(seq 1 500); do
			if ! kill -0 "$pid" 2>/dev/null; then
				break # exited: port in use
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
	echo "run.sh: could not start redis-server on a free port" >&2
	return 1
}

go build -o "$tmp/account" ./bench/cmd/account
ports=()
for i in 1 2 3 4 5; do
	start_server
	ports+=("$started_port")
done
nodes=$(printf '127.0.0.1:%s,' "${ports[@]}")
nodes=${nodes%,}
export REDLOCK_BENCH_NODES=$nodes
echo "masters: $nodes (pids ${pids[*]})"

{
	echo "date: $(date -u +%FT%TZ)"
	echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (dirty tree)')"
	echo "go: $(go version)"
	echo "redis: $(redis-server --version)"
	echo "cpus: $(nproc)"
	echo "masters: $nodes"
	echo "COUNT=$COUNT BENCHTIME=$BENCHTIME FILTER=$FILTER POOL_SIZES=$POOL_SIZES"
	echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$OUT/machine.txt"
top -bn1 2>/dev/null | head -20 >"$OUT/top-before.txt" || true

gotest() { go test -run '^$' -bench "BenchmarkRedis/$FILTER" -benchmem -benchtime "$BENCHTIME" -count 1 -timeout 30m "$@"; }

: >"$OUT/engine.txt"
: >"$OUT/redsync.txt"
for ps in $POOL_SIZES; do : >"$OUT/redsync-pool$ps.txt"; done
for run in $(seq 1 "$COUNT"); do
	echo "== run $run of $COUNT: engine"
	gotest ./bench | tee -a "$OUT/engine.txt"
	echo "== run $run of $COUNT: redsync (go-redis default pools)"
	(cd bench/redsync && gotest .) | tee -a "$OUT/redsync.txt"
	for ps in $POOL_SIZES; do
		echo "== run $run of $COUNT: redsync (go-redis pools of $ps)"
		(cd bench/redsync && REDSYNC_POOL_SIZE=$ps gotest .) | tee -a "$OUT/redsync-pool$ps.txt"
	done
done

if [ "$CEILING" = 1 ]; then
	# The lock's own commands, on all five servers at once, pipelined 64
	# deep: a cycle is one SET NX PX and one release EVALSHA per master.
	release='if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end'
	sha=""
	for p in "${ports[@]}"; do sha=$(redis-cli -p "$p" script load "$release"); done
	ceiling() { # name, args...
		local name=$1
		shift
		local bpids=() p
		for p in "${ports[@]}"; do
			redis-benchmark -h 127.0.0.1 -p "$p" -P 64 -c 50 -n 1000000 -r 100000000 --csv "$@" >"$tmp/rb-$name-$p.csv" &
			bpids+=("$!")
		done
		for p in "${bpids[@]}"; do wait "$p"; done
		# Sum the servers' requests per second (they ran at the same time).
		cat "$tmp"/rb-"$name"-*.csv | awk -F'"' -v name="$name" '$2 != "test" { sum += $4; n++ } END { printf "%s %.0f %.0f %d\n", name, sum, sum / n, n }'
	}
	: >"$OUT/ceiling.txt"
	for run in 1 2 3; do
		echo "== redis-benchmark run $run of 3"
		{
			ceiling set-t -t set
			ceiling setnx SET 'rb:__rand_int__' v NX PX 10000
			ceiling evalsha EVALSHA "$sha" 1 'rb:__rand_int__' v
		} | tee -a "$OUT/ceiling.txt"
	done
	# The whole machine's time during one ceiling cycle run (bench/cmd/account):
	# SET NX PX then EVALSHA on all five servers, 1,000,000 requests each per
	# server, so 1,000,000 lock cycles. The engine's benchmarks report the
	# same terms (srv-us, others-us, idle-us, ... per cycle).
	echo "== redis-benchmark under bench/cmd/account"
	export RB_PORTS="${ports[*]}" RB_SHA=$sha
	"$tmp/account" -name ceiling -nodes "$nodes" -cycles 1000000 -- bash -c '
		for cmd in "SET rb:__rand_int__ v NX PX 10000" "EVALSHA $RB_SHA 1 rb:__rand_int__ v"; do
			for p in $RB_PORTS; do redis-benchmark -h 127.0.0.1 -p $p -P 64 -c 50 -n 1000000 -r 100000000 -q $cmd >/dev/null & done
			wait
		done' | tee "$OUT/ceiling-account.txt"
fi

if [ "$MEMORY" = 1 ]; then
	echo "== engine on embedded in-memory masters"
	go test -run '^$' -bench "BenchmarkMemory/$FILTER" -benchmem -benchtime "$BENCHTIME" -count "$COUNT" -timeout 30m ./bench | tee "$OUT/memory.txt"
fi

{
	echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
} >>"$OUT/machine.txt"
top -bn1 2>/dev/null | head -20 >"$OUT/top-after.txt" || true

stop_servers
trap - EXIT

# The two modules' packages differ; -ignore pkg lets benchstat put their
# identically named benchmarks side by side.
cols=(engine="$OUT/engine.txt" redsync="$OUT/redsync.txt")
for ps in $POOL_SIZES; do cols+=(redsync-pool"$ps"="$OUT/redsync-pool$ps.txt"); done
go run "$BENCHSTAT" -ignore pkg "${cols[@]}" | tee "$OUT/benchstat.txt"
# The engine over redsync, round by round, split by where the two cores sat
# (bench.CoreRoundTrip): "A" is redsync, "B" the engine.
python3 bench/placement.py "$OUT/redsync.txt" "$OUT/engine.txt" | tee "$OUT/placement.txt" || true
if [ "$MEMORY" = 1 ]; then
	go run "$BENCHSTAT" "$OUT/memory.txt" | tee "$OUT/benchstat-memory.txt"
fi
if [ "$CEILING" = 1 ]; then
	# Medians over the three redis-benchmark runs, and the cycles/s they allow.
	median() { awk -v k="$1" '$1 == k { print $2 }' "$OUT/ceiling.txt" | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
	set_t=$(median set-t)
	setnx=$(median setnx)
	evalsha=$(median evalsha)
	{
		echo "redis-benchmark -P 64 -c 50, five servers at once, median of 3 runs (requests/s summed over the servers):"
		printf '  -t set:              %9.0f\n' "$set_t"
		printf '  SET k v NX PX 10000: %9.0f\n' "$setnx"
		printf '  EVALSHA release:     %9.0f\n' "$evalsha"
		# Per master a cycle is one SET and one EVALSHA; with five masters
		# each serving its share, the ceiling is 1/(5/setnx + 5/evalsha).
		awk -v s="$setnx" -v e="$evalsha" 'BEGIN { printf "  lock-cycle ceiling:  %9.0f cycles/s\n", 1 / (5 / s + 5 / e) }'
		sed 's/^/  /' "$OUT/ceiling-account.txt"
	} | tee "$OUT/ceiling-summary.txt"
fi
echo "outputs in $OUT"
