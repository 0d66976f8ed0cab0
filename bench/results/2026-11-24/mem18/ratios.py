#!/usr/bin/env python3
"""ratios.py DIR BASE NAME...: per round (the Nth line of each file is the
Nth round), NAME's c=256 and c=1 cpu-us/cycle and cycles/s divided by BASE's;
medians and the count of rounds where NAME was cheaper."""
import re, statistics, sys
d, base, names = sys.argv[1], sys.argv[2], sys.argv[3:]
def rows(name):
    out = {}
    for line in open(f"{d}/{name}.txt"):
        m = re.match(r"BenchmarkMemory/uncontended/(c=\d+)-\d+\s", line)
        if not m:
            continue
        f = dict((k, float(v)) for v, k in re.findall(r"([-\d.e+]+) ([\w/-]+)", line))
        out.setdefault(m.group(1), []).append(f)
    return out
b = rows(base)
for c in ("c=256", "c=1"):
    print(f"{c}: median over rounds of {base}: cpu-us/cycle {statistics.median(x['cpu-us/cycle'] for x in b[c]):.3f}, cycles/s {statistics.median(x['cycles/s'] for x in b[c]):.0f}")
    for n in names:
        r = rows(n)[c]
        k = min(len(r), len(b[c]))
        cpu = [r[i]['cpu-us/cycle'] / b[c][i]['cpu-us/cycle'] for i in range(k)]
        thr = [r[i]['cycles/s'] / b[c][i]['cycles/s'] for i in range(k)]
        print(f"  {n:>8} / {base}: cpu per cycle median {statistics.median(cpu):.3f} (range {min(cpu):.3f}-{max(cpu):.3f}, cheaper in {sum(x < 1 for x in cpu)} of {k}); "
              f"cycles/s median {statistics.median(thr):.3f} (range {min(thr):.3f}-{max(thr):.3f}); own medians cpu {statistics.median(x['cpu-us/cycle'] for x in r):.3f} allocs {statistics.median(x['allocs/op'] for x in r):.0f} B {statistics.median(x['B/op'] for x in r):.0f}")
