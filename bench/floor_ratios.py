#!/usr/bin/env python3
"""bench/floor_ratios.py DIR: per-round ratios of cpu-us/cycle from a bench/floor.sh run.

Each row of DIR/new.txt at 256 lockers (this tree's engine and the floor's variants) is divided,
round by round, by the reference build's row of DIR/old.txt run just before it (BenchmarkMemory
for memory and none rows, BenchmarkRedis for redis and none rows): the ratio a target is
stated in, from pairs that met the same load. Prints the median and range of the ratios."""
import re
import statistics as st
import sys


def load(path):
    rows = {}
    for line in open(path):
        if not line.startswith("Benchmark"):
            continue
        f = line.split()
        name = re.sub(r"-\d+$", "", f[0])
        for i in range(2, len(f)):
            if f[i] == "cpu-us/cycle":
                rows.setdefault(name, []).append(float(f[i - 1]))
    return rows


def main(d):
    old, new = load(d + "/old.txt"), load(d + "/new.txt")
    for base, kinds in (("BenchmarkMemory/uncontended/c=256", ("memory", "none")),
                        ("BenchmarkRedis/uncontended/c=256", ("redis", "none"))):
        ref = old.get(base)
        if not ref:
            continue
        for name in sorted(new):
            if "c=256" not in name or not (name == base or name.split("/")[1] in kinds):
                continue
            r = [a / b for a, b in zip(new[name], ref)]
            print(f"{name:62s} / ref {base.split('/')[0][9:]:6s} cpu-us/cycle: median {st.median(r):.2f}"
                  f"  range {min(r):.2f}-{max(r):.2f}  n={len(r)}")


if __name__ == "__main__":
    main(sys.argv[1])
