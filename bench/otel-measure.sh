#!/usr/bin/env bash
# bench/otel-measure.sh [BASE] : what OpenTelemetry costs a lock cycle (issue 12, BENCHMARKS.md
# "Telemetry"), in one command, against BASE (default: the first parent of the merge of the 'otel'
# branch, i.e. the engine without telemetry). Run it from a clean tree on a quiet machine.
#
#  1. Instructions per cycle (bench/otel-count.sh: valgrind's callgrind, one goroutine, Lock + Unlock
#     on five in-memory masters, RUNS pairs of runs each): base, and this tree with none, noop,
#     metrics, sdk. Not timed, so not moved by load: this is the figure for the 2% bound of none
#     and noop.
#     Then the same on Redis at 256 lockers (count-redis/; RN1, RN2 cycles, default 1000 and 5000).
#  2. cpu-us/cycle on Redis at 1 and 256 lockers (BenchmarkOTel), base and this tree in turn,
#     ROUNDS rounds (bench/interleave.sh), then one benchstat table per variant against the base
#     (the variant's lines renamed to OTel/none/..., the base's only variant).
#
# Outputs: OUT (default bench/results/<date>/otel-measure): machine.txt, count/summary.txt,
# old.txt, new.txt, v-<variant>.txt, benchstat.txt. Environment: ROUNDS (6), BENCHTIME (2s),
# RUNS, N1, N2 (bench/otel-count.sh), SKIP_COUNT=1 or SKIP_CPU=1 to do one half only.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
# (The oldest such merge: later merges of the branch bring telemetry in on both sides.)
first=$(git log --merges --format=%H --grep="^Merge branch 'otel'" | tail -1)
base=${1:-$(git rev-parse --short "$first^1")}
OUT=${OUT:-bench/results/$(date -u +%F)/otel-measure}
ROUNDS=${ROUNDS:-6}
BENCHSTAT=${BENCHSTAT:-golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da}
export GOWORK=off
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT
git archive "$base" | tar -x -C "$src"
# The base has no telemetry: its BenchmarkOTel and BenchmarkOTelAllocs are this tree's, reduced to
# the "none" variant (no option), so that the same sub-benchmark names compare.
cat >"$src/bench/otel_test.go" <<'GO'
package bench_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/bench"
	"github.com/quorumlock/redlock/bench/benchtest"
	"github.com/quorumlock/redlock/engine"
)

func BenchmarkOTel(b *testing.B) {
	nodes := benchtest.RedisNodes(b)
	b.Run("none", func(b *testing.B) {
		opts := []api.Option{api.WithoutRestartQuarantine()}
		if os.Getenv("REDLOCK_BENCH_SLOW") != "" {
			opts = append(opts, api.WithMasterTimeout(time.Minute), api.WithTTL(10*time.Minute))
		}
		e, err := engine.New(nodes, opts...)
		if err != nil {
			b.Fatal(err)
		}
		defer e.Close()
		client := bench.Engine(e)
		prefix := bench.RunPrefix("otel-none")
		if err := bench.WaitReady(context.Background(), client, prefix, 10*time.Second, nil); err != nil {
			b.Fatal(err)
		}
		for _, c := range []int{1, 256} {
			w := bench.Uncontended(c, prefix+"u"+strconv.Itoa(c)+":")
			b.Run(w.Name(), func(b *testing.B) { benchtest.RunWorkload(b, client, w) })
		}
	})
}

func BenchmarkOTelAllocs(b *testing.B) {
	b.Run("none", func(b *testing.B) {
		e, err := engine.NewMemory(5)
		if err != nil {
			b.Fatal(err)
		}
		defer e.Close()
		ctx := context.Background()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			l, err := e.Lock(ctx, "k")
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Unlock(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}
GO
(cd "$src" && go test -c -o "$OUT/base.test" ./bench)
go test -c -o "$OUT/new.test" ./bench
{
	echo "base: $(git rev-parse --short "$base")"
	echo "new: $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (dirty tree)')"
	echo "date: $(date -u +%FT%TZ) load: $(cut -d' ' -f1-3 /proc/loadavg) cpus: $(nproc)"
	go version; valgrind --version
} >"$OUT/machine.txt"
if [ "${SKIP_COUNT:-}" != 1 ]; then
	rm -rf "$OUT/count"
	(cd "$OUT" && "$root/bench/otel-count.sh" count base.test:none new.test:none new.test:noop new.test:metrics new.test:sdk)
	# The same on Redis at 256 lockers, the client counted and five redis-server processes outside
	# valgrind (stopped by pid). Valgrind runs the lockers one at a time, so batches are smaller
	# than in a timed run and per-batch costs weigh more; REDLOCK_BENCH_SLOW keeps the slowed
	# cycles from timing out.
	rdir=$(mktemp -d); rpids=(); raddrs=()
	for i in 1 2 3 4 5; do
		port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
		redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$rdir" --daemonize no >/dev/null &
		rpids+=($!); raddrs+=("127.0.0.1:$port")
	done
	sleep 1
	rm -rf "$OUT/count-redis"
	(cd "$OUT" && BENCH='OTel/%s/uncontended/c=256$' REDLOCK_BENCH_SLOW=1 N1=${RN1:-1000} N2=${RN2:-5000} \
		REDLOCK_BENCH_NODES=$(IFS=,; echo "${raddrs[*]}") \
		"$root/bench/otel-count.sh" count-redis base.test:none new.test:none new.test:noop new.test:metrics) || true
	for p in "${rpids[@]}"; do kill "$p" 2>/dev/null || true; done
	rm -rf "$rdir"
fi
if [ "${SKIP_CPU:-}" != 1 ]; then
	rm -f "$OUT/old.txt" "$OUT/new.txt"
	BENCHTIME=${BENCHTIME:-2s} bench/interleave.sh "$OUT/base.test" "$OUT/new.test" "$ROUNDS" "$OUT" 'OTel/'
	args=("base=$OUT/old.txt")
	for v in none noop metrics sdk; do
		grep -Ev '^BenchmarkOTel(Allocs)?/' "$OUT/new.txt" >"$OUT/v-$v.txt" || true
		grep -E "^BenchmarkOTel(Allocs)?/$v[/-]" "$OUT/new.txt" | sed -E "s#^BenchmarkOTel(Allocs)?/$v([/-])#BenchmarkOTel\1/none\2#" >>"$OUT/v-$v.txt"
		args+=("$v=$OUT/v-$v.txt")
	done
	go run "$BENCHSTAT" "${args[@]}" | tee "$OUT/benchstat.txt"
fi
echo "outputs in $OUT"
