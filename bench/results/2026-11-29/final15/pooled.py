#!/usr/bin/env python3
"""The three memory compares of 2026-11-29 pooled: per-round ratios of
cycles/s (new over old, paired by round), their median and geometric mean
with bootstrap 95% intervals, and the ratio of the two sides' medians
(benchstat's statistic) with its own interval.

    python3 bench/results/2026-11-29/final15/pooled.py
"""
import os, random, re, statistics as st

here = os.path.dirname(os.path.abspath(__file__))
runs = ["vs-ba207ff", "vs-ba207ff-32", "vs-ba207ff-24b"]

def load(path):
    out = []
    for line in open(path):
        if line.startswith("BenchmarkMemory/uncontended/c=256"):
            out.append(float(re.search(r"([\d.e+]+) cycles/s", line).group(1)))
    return out

old, new = [], []
for r in runs:
    old += load(os.path.join(here, r, "old.txt"))
    new += load(os.path.join(here, r, "new.txt"))
ratios = [b / a for a, b in zip(old, new)]
random.seed(1)

def boot(f, k=10000):
    xs = sorted(f() for _ in range(k))
    return xs[k // 40], xs[k - k // 40]

print(f"rounds {len(ratios)}; at or above 1.5: {sum(r >= 1.5 for r in ratios)}")
print("per-round median %.3f, 95%% CI %.3f-%.3f" % (st.median(ratios), *boot(lambda: st.median(random.choices(ratios, k=len(ratios))))))
print("per-round geomean %.3f, 95%% CI %.3f-%.3f" % (st.geometric_mean(ratios), *boot(lambda: st.geometric_mean(random.choices(ratios, k=len(ratios))))))
print("ratio of medians %.3f, 95%% CI %.3f-%.3f" % (st.median(new) / st.median(old), *boot(lambda: st.median(random.choices(new, k=len(new))) / st.median(random.choices(old, k=len(old))))))
