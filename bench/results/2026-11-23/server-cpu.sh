#!/bin/bash
pids=""; ports=""
for i in 1 2 3 4 5; do p=$((27000+i)); redis-server --port $p --save '' --appendonly no --bind 127.0.0.1 >/dev/null 2>&1 & pids="$pids $!"; ports="$ports,127.0.0.1:$p"; done
sleep 0.5
export REDLOCK_BENCH_NODES=${ports#,}
tck=$(getconf CLK_TCK)
cpu() { s=0; for p in $pids; do set -- $(cut -d' ' -f14,15 /proc/$p/stat); s=$((s+$1+$2)); done; echo $s; }
for r in 1 2 3; do
  a=$(cpu)
  /usr/bin/time -f "client %U %S" /tmp/step_dl.test -test.run '^$' -test.bench 'Redis/uncontended/c=256$' -test.benchtime 300000x 2>&1 | grep -E "^Bench|client" | awk '{print $1, $5, $11, $2, $3, $4}'
  b=$(cpu)
  echo "server cpu per cycle us: $(python3 -c "print(round(($b-$a)/$tck/300000*1e6,1))")"
done
kill $pids
