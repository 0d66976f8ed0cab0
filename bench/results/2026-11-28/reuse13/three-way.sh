#!/usr/bin/env bash
# three-way.sh OUT ROUNDS: ba207ff's, main's (4d05138) and this session's (1e7f92e) ./bench test
# binaries (ba.test, main.test, new.test in OUT), run in turn ROUNDS times on the memory masters at
# 256 lockers, each run bracketed by two xcore probes, so that each round gives main/ba207ff and
# new/ba207ff from runs a few seconds apart. Build the binaries with
#   git archive REF | tar -x -C DIR && (cd DIR && GOWORK=off go test -c -o OUT/X.test ./bench)
# and xcore with `go build -o OUT/xcore ./bench/cmd/xcore`.
set -euo pipefail
out=$1 rounds=$2
filter='^BenchmarkMemory$/^uncontended$/^c=256$'
for r in $(seq 1 "$rounds"); do
  for b in ba main new; do
    x0=$("$out/xcore" | cut -d' ' -f2 || echo -)
    "$out/$b.test" -test.run '^$' -test.bench "$filter" -test.benchmem -test.benchtime 2s >> "$out/$b.txt" 2>&1
    echo "$r $b $x0 $("$out/xcore" | cut -d' ' -f2 || echo -)" >> "$out/xcore.txt"
  done
done
