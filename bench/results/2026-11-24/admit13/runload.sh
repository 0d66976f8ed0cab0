#!/bin/bash
# usage: runload.sh HOGS N bin1 [bin2 ...]  -- alternates binaries, N runs each
HOGS=$1; N=$2; shift 2
pids=()
for i in $(seq $HOGS); do sh -c 'while :; do :; done' & pids+=($!); done
trap 'kill ${pids[@]} 2>/dev/null' EXIT
sleep 20
cd /work/wt/admit13/bench
for r in $(seq $N); do
  for b in "$@"; do
    l=$(cut -d' ' -f1 /proc/loadavg)
    out=$($b -test.count=1 -test.run TestOverloadOnRealMasters -test.v 2>&1)
    res=$(echo "$out" | grep -E "^(--- |ok|FAIL|PASS)" | head -1)
    first=$(echo "$out" | grep -E "cycles, .* failed|failed with ErrQuorum|late|deadline" | head -6 | cut -c1-400)
    echo "== $(date -u +%T) bin=$(basename $b) load=$l run=$r: $res"
    echo "$first"
  done
done
