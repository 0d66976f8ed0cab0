#!/usr/bin/env bash
# bench/interleave.sh OLD.test NEW.test ROUNDS OUTDIR [FILTER]: two builds of ./bench (made with
# `go test -c -o X.test ./bench` at two commits) run in turn, ROUNDS times, against the same five
# redis-server processes on free loopback ports (stopped by pid on exit), so that noise on a shared
# machine hits both alike. Outputs OUTDIR/old.txt and OUTDIR/new.txt for benchstat. BENCHTIME
# (default 2s) is each run's -test.benchtime. With XCORE set to a build of ./bench/cmd/xcore, each
# run is bracketed by two readings of the cores' placement, appended to OUTDIR/xcore.txt as
# "old|new BEFORE AFTER" (nanoseconds; bench/placement.py reads them).
set -euo pipefail
old=$1 new=$2 rounds=$3 out=$4 filter=${5:-'Redis/uncontended/c=256$'}
mkdir -p "$out"; tmp=$(mktemp -d); pids=(); addrs=()
trap 'for p in "${pids[@]}"; do kill -9 $p 2>/dev/null||true; done; rm -rf $tmp' EXIT
for i in 1 2 3 4 5; do
  port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
  redis-server --port $port --bind 127.0.0.1 --save '' --appendonly no --dir $tmp --daemonize no >/dev/null &
  pids+=($!); addrs+=(127.0.0.1:$port)
done
sleep 1
export REDLOCK_BENCH_NODES=$(IFS=,; echo "${addrs[*]}")
for r in $(seq 1 $rounds); do
  for b in old new; do
    bin=$old; [ $b = new ] && bin=$new
    if [ -n "${XCORE:-}" ]; then x0=$($XCORE | cut -d' ' -f2 || echo -); fi
    $bin -test.run '^$' -test.bench "$filter" -test.benchmem -test.benchtime ${BENCHTIME:-2s} >> $out/$b.txt 2>&1
    if [ -n "${XCORE:-}" ]; then echo "$b $x0 $($XCORE | cut -d' ' -f2 || echo -)" >> $out/xcore.txt; fi
  done
done
echo done
