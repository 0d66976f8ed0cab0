#!/bin/bash
# cgpairs.sh OUT RUNS N1 N2 BIN... : instructions per cycle of BenchmarkRedis/uncontended/c=256, alternated
# run from a directory holding the binaries and a file "nodes" with the five servers (host:port,...)
out=$1 runs=$2 n1=$3 n2=$4; shift 4
mkdir -p $out
export REDLOCK_BENCH_NODES=$(cat nodes) REDLOCK_BENCH_SLOW=1
irs() { GOMAXPROCS=1 GODEBUG=${GOD:-asyncpreemptoff=1,adaptivestackstart=0} valgrind --tool=callgrind --cache-sim=no --callgrind-out-file=$out/$(basename $1 .test)-$2-r$3.out $(realpath $1) -test.run '^$' -test.bench "${BENCH:-^BenchmarkRedis\$/^uncontended\$/^c=256\$}" -test.benchtime ${2}x > $out/log-$(basename $1 .test)-$2-r$3.txt 2>&1; sed -n 's/.*Collected : \([0-9]*\).*/\1/p' $out/log-$(basename $1 .test)-$2-r$3.txt; }
for r in $(seq 1 $runs); do for b in "$@"; do a=$(irs $b $n1 $r); c=$(irs $b $n2 $r); echo "$(basename $b .test) run=$r ir1=$a ir2=$c ir_per_cycle=$(( (c-a)/(n2-n1) ))" | tee -a $out/summary.txt; done; done
