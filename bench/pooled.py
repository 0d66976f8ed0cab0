#!/usr/bin/env python3
"""bench/pooled.py BENCHMARK DIR... : one benchmark's per-round ratios, pooled over several
interleaved runs of the same two builds.

Each DIR is an output of bench/compare.sh, bench/floor.sh or bench/interleave.sh (old.txt and
new.txt, whose i-th rows of a benchmark ran in the same round). Every round is a paired
measurement: both builds ran in it, in turn, on the same machine. Pooling the rounds of several
runs narrows the interval of their median where one run's interval is too wide to decide a
target; the runs must compare builds whose measured path is the same, which this script cannot
check. For each metric it prints the rounds, the median of the new/old ratios with its 95 %
confidence interval (bench/placement.py's, distribution-free), their geometric mean, and each
run's own median, so a run that disagrees with the others shows.

Every round counts once, so a run weighs as many rounds as it has. The interval takes the rounds
as independent draws: when the runs' own medians differ by more than their rounds' spread
explains (the machine had a slower hour), the real uncertainty is wider than the interval, and
the runs' medians are the figures to read beside it. Only the named benchmark's rows are paired;
a run that also ran other benchmarks in its rounds (bench/floor.sh) is still one pair a round.

  python3 bench/pooled.py BenchmarkMemory/uncontended/c=256 \\
      bench/results/2026-12-07/s20/mem-vs-ba207ff-1 bench/results/2026-12-07/s20/mem-vs-ba207ff-48 \\
      bench/results/2026-12-07/s21/floor-mem bench/results/2026-12-07/s21/mem-vs-ba207ff-32
"""
import importlib.util
import math
import os
import statistics
import sys

_spec = importlib.util.spec_from_file_location(
    "placement", os.path.join(os.path.dirname(os.path.abspath(__file__)), "placement.py"))
placement = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(placement)


def ratios(directory, bench, metric):
    for side in ("old.txt", "new.txt"):
        if not os.path.isfile(os.path.join(directory, side)):
            sys.exit(f"{directory}: no {side}: not an output of an interleaved run")
    old = placement.parse(os.path.join(directory, "old.txt")).get(bench, [])
    new = placement.parse(os.path.join(directory, "new.txt")).get(bench, [])
    if not old:
        sys.exit(f"{directory}: no rows of {bench}")
    if len(old) != len(new):
        sys.exit(f"{directory}: {len(old)} old rows of {bench} but {len(new)} new ones: rounds do not pair")
    return [n[metric] / o[metric] for o, n in zip(old, new)
            if metric in o and metric in n and o[metric] > 0 and n[metric] > 0]


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    bench, dirs = sys.argv[1], sys.argv[2:]
    for metric in placement.METRICS:
        pooled, each = [], []
        for d in dirs:
            r = ratios(d, bench, metric)
            if r:
                pooled += r
                each.append(f"{os.path.basename(os.path.normpath(d))} {statistics.median(r):.3f} (n={len(r)})")
        if not pooled:
            continue
        s = sorted(pooled)
        ci = placement.median_ci(s)
        ci_s = f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else ""
        geo = math.exp(sum(math.log(x) for x in s) / len(s))
        print(f"{bench} {metric} new/old: rounds {len(s)}  median {statistics.median(s):.3f}{ci_s}"
              f"  geomean {geo:.3f}")
        print("  by run: " + "; ".join(each))


if __name__ == "__main__":
    main()
