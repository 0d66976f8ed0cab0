#!/usr/bin/env python3
"""rounds.py DIR: per round, new/old cpu-us/cycle and cycles/s of each benchmark
in DIR/old.txt and DIR/new.txt (bench/compare.sh's outputs)."""
import re, statistics, sys
def rows(f):
    out = {}
    for line in open(f):
        m = re.match(r"Benchmark(\w+)/uncontended/(c=\d+)-\d+\s", line)
        if m:
            d = dict((k, float(v)) for v, k in re.findall(r"([-\d.e+]+) ([\w/-]+)", line))
            out.setdefault(m.group(1) + " " + m.group(2), []).append(d)
    return out
o, n = rows(sys.argv[1] + "/old.txt"), rows(sys.argv[1] + "/new.txt")
for k in o:
    for unit in ("cpu-us/cycle", "cycles/s"):
        r = [b[unit] / a[unit] for a, b in zip(o[k], n[k])]
        print(f"{k} {unit}: per round new/old {[round(x, 3) for x in r]}, median {statistics.median(r):.3f}, "
              f"old {[round(a[unit], 2) for a in o[k]]}, new {[round(b[unit], 2) for b in n[k]]}")
