#!/bin/bash
out=/tmp/steps.out; : > $out
pids=""; ports=""
for i in 1 2 3 4 5; do p=$((26000+i)); redis-server --port $p --save '' --appendonly no --bind 127.0.0.1 >/dev/null 2>&1 & pids="$pids $!"; ports="$ports,127.0.0.1:$p"; done
sleep 0.5
export REDLOCK_BENCH_NODES=${ports#,}
for r in 1 2 3; do
 for spec in 'Redis/uncontended/c=256$:300000' 'Redis/uncontended/c=1$:15000' 'Memory/uncontended/c=256$:1000000'; do
  re=${spec%:*}; n=${spec##*:}
  for b in base enc mbox dl; do
    /usr/bin/time -f "TIME $b $re $n %U %S" /tmp/step_$b.test -test.run '^$' -test.bench "$re" -test.benchtime ${n}x -test.benchmem 2>&1 | grep -E "^Benchmark|^TIME" | sed "s/^Benchmark/$b Benchmark/" >> $out
  done
 done
done
kill $pids
