#!/usr/bin/env python3
"""bench/placement.py A.txt B.txt [--xcore FILE]: two sides of an interleaved run, round by round,
split by where the machine's two cores sat during each round (bench.CoreRoundTrip).

A and B are `go test -bench` outputs whose rows pair up by order: the i-th row of a benchmark in A
and the i-th row of the same benchmark in B ran in the same round (bench/interleave.sh's old.txt and
new.txt; bench/run.sh's redsync.txt and engine.txt, whose rows have the same names). A row's
placement is read from its own xcore-before-ns and xcore-after-ns metrics or, for a build that does
not report them (an old commit's), from the readings bench/interleave.sh took before and after the
run (--xcore FILE, lines "old|new BEFORE AFTER" in run order; A is "old", B is "new").

A round is "near" when all its readings, both rows' before and after, are under --near ns; "far"
when all are over --far ns; "mixed" otherwise (the placement moved during the round, or a reading
fell between). For each benchmark and metric the table gives, by class, the rounds, each side's
median and the median of the rounds' B/A ratios: the ratio of two builds, or of the engine and
redsync, at one placement. Beside that median, in brackets, is its 95 % confidence interval (two order
statistics of the ratios, from the binomial distribution: no assumption about their spread), for six
rounds or more; with fewer, no interval reaches 95 %. A target on a ratio is met at 95 % when the
whole interval clears it. Readings only bracket each run, so a move there and back inside a run
goes unseen: a "near" round is one that began and ended near.

--pair A_NAME,B_NAME (repeatable) pairs A's rows of one benchmark with B's rows of another instead of
same-named rows: the engine of an old build against the floor (bench/floor) of the new one, say.
"""
import argparse
import math
import re
import statistics
import sys
from collections import defaultdict

METRICS = ("cycles/s", "cpu-us/cycle", "p50-ms")


def parse(path):
    rows = defaultdict(list)
    with open(path) as f:
        for line in f:
            if not line.startswith("Benchmark"):
                continue
            parts = line.split()
            name = re.sub(r"-\d+$", "", parts[0])
            vals = {}
            for v, unit in zip(parts[2::2], parts[3::2]):
                try:
                    vals[unit] = float(v)
                except ValueError:
                    pass
            rows[name].append(vals)
    return rows


def median_ci(sorted_vals, level=0.95):
    """The distribution-free interval for the median of sorted_vals: its l-th and (n-l+1)-th values,
    with l the largest rank at which P(Binomial(n, 1/2) < l) stays within (1-level)/2. None when n
    is too small for any interval to reach level."""
    n = len(sorted_vals)
    tail, below, l = (1 - level) / 2, 0.0, 0
    while True:
        below += math.comb(n, l) / 2 ** n  # P(X <= l)
        if below > tail:
            break
        l += 1
    if l == 0:
        return None
    return sorted_vals[l - 1], sorted_vals[n - l]


def classify(readings, near, far):
    if not readings or any(r is None for r in readings):
        return "unknown"
    if all(r < near for r in readings):
        return "near"
    if all(r > far for r in readings):
        return "far"
    return "mixed"


def external(path):
    runs = defaultdict(list)
    if not path:
        return runs
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) != 3:
                continue
            vals = []
            for p in parts[1:]:
                try:
                    vals.append(float(p))
                except ValueError:
                    vals.append(None)
            runs[parts[0]].append(vals)
    return runs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--xcore", help="bench/interleave.sh's xcore.txt")
    ap.add_argument("--near", type=float, default=100.0)
    ap.add_argument("--far", type=float, default=250.0)
    ap.add_argument("--pair", action="append", default=[], metavar="A_NAME,B_NAME",
                    help="pair A's rows of A_NAME with B's rows of B_NAME (names without the -N suffix)")
    args = ap.parse_args()
    a, b = parse(args.a), parse(args.b)
    ext = external(args.xcore)

    def readings(side, rows, name, i):
        own = [rows[name][i].get(k) for k in ("xcore-before-ns", "xcore-after-ns")]
        if None not in own:
            return own
        runs = ext.get(side, [])
        # Every run of a side runs each benchmark of the filter once, so the
        # i-th row of a benchmark is from the i-th run.
        return runs[i] if i < len(runs) else [None]

    if args.pair:
        names = [tuple(p.split(",", 1)) for p in args.pair]
    else:
        names = [(n, n) for n in sorted(set(a) & set(b))]
    out = []
    for an, bn in names:
        n = min(len(a.get(an, [])), len(b.get(bn, [])))
        classes = [classify(readings("old", a, an, i) + readings("new", b, bn, i), args.near, args.far)
                   for i in range(n)]
        for m in METRICS:
            pairs = [(a[an][i].get(m), b[bn][i].get(m), classes[i]) for i in range(n)]
            pairs = [p for p in pairs if p[0] and p[1]]
            if not pairs:
                continue
            out.append(f"{an} {m}" if an == bn else f"{bn} over {an} {m}")
            for cls in ("near", "far", "mixed", "unknown", "all"):
                sel = [p for p in pairs if cls == "all" or p[2] == cls]
                if not sel:
                    continue
                ma = statistics.median(p[0] for p in sel)
                mb = statistics.median(p[1] for p in sel)
                ratios = sorted(p[1] / p[0] for p in sel)
                ci = median_ci(ratios)
                ci = f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else ""
                out.append(f"  {cls:8s} rounds {len(sel):2d}  A {ma:11.4g}  B {mb:11.4g}  B/A median {statistics.median(ratios):6.3f}{ci}"
                           f"  (per round {' '.join(f'{r:.2f}' for r in ratios)})")
    if not out:
        print("placement.py: no benchmark in both files", file=sys.stderr)
        return 1
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
