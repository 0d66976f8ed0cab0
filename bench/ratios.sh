#!/usr/bin/env bash
# bench/ratios.sh DIR: the per-round new/old ratios of cycles/s and cpu-us/cycle of an interleaved
# run (DIR/old.txt and DIR/new.txt from bench/compare.sh or bench/interleave.sh), sorted, with
# their median. On a loaded machine benchstat's medians of each side can hide that one build won
# every round; the paired ratios show it (and a sign test reads off them: all 10 of 10 on one side
# is p = 0.002).
set -euo pipefail
d=${1:?usage: bench/ratios.sh DIR}
for bm in $(grep -o '^Benchmark[^ ]*' "$d/old.txt" | sort -u); do
  for m in cycles/s cpu-us/cycle; do
    paste <(grep "^$bm " "$d/old.txt" | grep -o "[0-9.]* $m" | cut -d' ' -f1) \
      <(grep "^$bm " "$d/new.txt" | grep -o "[0-9.]* $m" | cut -d' ' -f1) |
      awk '{printf "%.3f\n", $2/$1}' | sort -n | tr '\n' ' ' |
      awk -v n="$bm $m" '{m=(NF%2)?$((NF+1)/2):($(NF/2)+$(NF/2+1))/2; printf "%-48s median %.3f  (%s)\n", n, m, $0}'
  done
done
