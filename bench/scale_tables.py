#!/usr/bin/env python3
"""bench/scale_tables.py OUT: the Markdown tables of a bench/scale.sh run.

Reads the go test benchmark outputs scale.sh left in OUT (masters-N-CLIENT.txt,
rtt-MS-CLIENT.txt, held-engine.txt, contention-CLIENT.txt) and prints one table
per section found; with COUNT > 1 each figure is the median of the runs.
"""
import glob
import os
import re
import statistics
import sys

LINE = re.compile(r"^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+(.*)$")



def parse(path):
    """{sub-benchmark name: {unit: [values]}} of one output file."""
    out = {}
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            m = LINE.match(line.strip())
            if not m:
                continue
            name, rest = m.group(1), m.group(2).split()
            metrics = out.setdefault(name, {})
            for value, unit in zip(rest[::2], rest[1::2]):
                try:
                    metrics.setdefault(unit, []).append(float(value))
                except ValueError:
                    pass
    return out


def med(runs, name, unit):
    vals = runs.get(name, {}).get(unit)
    return statistics.median(vals) if vals else None


def fmt(v, digits=0):
    if v is None:
        return "–"
    if digits == 0:
        return f"{v:,.0f}"
    return f"{v:,.{digits}f}"


def span(runs, name):
    lo, hi = med(runs, name, "grants-min"), med(runs, name, "grants-max")
    return "–" if lo is None or hi is None else f"{lo:.2f}–{hi:.2f}"


def ratio(a, b):
    return f"{a / b:.1f}×" if a and b else "–"


def syscalls(runs, name):
    r, w = med(runs, name, "reads/cycle"), med(runs, name, "writes/cycle")
    return None if r is None or w is None else r + w


def costs(out):
    c = parse(f"{out}/costs.txt")
    names = {
        "BenchmarkCostSyscall": "a trivial system call (getppid)",
        "BenchmarkCostWrite": "a 64-byte write(2) to /dev/null",
        "BenchmarkCostLoopback": "a 64-byte loopback TCP round trip to an echo goroutine (both ends)",
        "BenchmarkCostHandoff": "a goroutine hand-off and back (unbuffered channels)",
    }
    rows = [f"| {desc} | {fmt(med(c, k, 'cpu-ns/op'))} | {fmt(med(c, k, 'ns/op'))} |" for k, desc in names.items() if k in c]
    if rows:
        print("### What things cost on this machine\n")
        print("| operation | CPU ns | wall ns |")
        print("|---|---|---|")
        print("\n".join(rows) + "\n")


def masters(out):
    rows = []
    for n in (1, 3, 5, 7, 9):
        e = parse(f"{out}/masters-{n}-engine.txt")
        r = parse(f"{out}/masters-{n}-redsync.txt")
        if not e and not r:
            continue
        k = "BenchmarkRedis/uncontended/c=256"
        rows.append(
            f"| {n} | {n // 2 + 1} | {fmt(med(e, k, 'cycles/s'))} | {fmt(med(e, k, 'p99-ms'), 1)} | "
            f"{fmt(med(e, k, 'cpu-us/cycle'), 1)} | {fmt(syscalls(e, k), 2)} | {fmt(med(e, k, 'vcsw/cycle'), 2)} | "
            f"{fmt(med(r, k, 'cycles/s'))} | {fmt(med(r, k, 'p99-ms'), 1)} | {fmt(med(r, k, 'cpu-us/cycle'), 1)} | "
            f"{fmt(syscalls(r, k), 1)} | {ratio(med(e, k, 'cycles/s'), med(r, k, 'cycles/s'))} |"
        )
    if rows:
        print("### Masters (uncontended, 256 lockers)\n")
        print("| masters | quorum | engine cycles/s | p99 ms | cpu-µs/cycle | syscalls/cycle | vcsw/cycle "
              "| redsync cycles/s | p99 ms | cpu-µs/cycle | syscalls/cycle | ratio |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|")
        print("\n".join(rows) + "\n")


def rtt(out):
    rows = []
    files = glob.glob(f"{out}/rtt-*-engine.txt")
    for ms in sorted({float(re.search(r"rtt-([\d.]+)-", f).group(1)) for f in files}):
        tag = f"{ms:g}"
        e = parse(f"{out}/rtt-{tag}-engine.txt")
        r = parse(f"{out}/rtt-{tag}-redsync.txt")
        for c in (1, 256):
            k = f"BenchmarkRedis/uncontended/c={c}"
            rows.append(
                f"| {tag} | {c} | {fmt(med(e, k, 'cycles/s'))} | {fmt(med(e, k, 'p50-ms'), 2)} | {fmt(med(e, k, 'p99-ms'), 2)} | "
                f"{fmt(med(r, k, 'cycles/s'))} | {fmt(med(r, k, 'p50-ms'), 2)} | {fmt(med(r, k, 'p99-ms'), 2)} | "
                f"{ratio(med(e, k, 'cycles/s'), med(r, k, 'cycles/s'))} |"
            )
    if rows:
        print("### Round-trip time (five masters behind delay proxies, uncontended)\n")
        print("| RTT ms | lockers | engine cycles/s | p50 ms | p99 ms | redsync cycles/s | p50 ms | p99 ms | ratio |")
        print("|---|---|---|---|---|---|---|---|---|")
        print("\n".join(rows) + "\n")


def held(out):
    e = parse(f"{out}/held-engine.txt")
    rows = []
    for name in sorted(e, key=lambda s: int(s.split("=")[-1])):
        n = int(name.split("=")[-1])
        rows.append(
            f"| {n:,} | {fmt(med(e, name, 'B/lock'))} | {fmt(med(e, name, 'ext/s'))} | {fmt(med(e, name, 'cpu-us/ext'), 1)} | "
            f"{fmt(med(e, name, 'core-pct'), 1)} | {fmt(med(e, name, 'window-s'), 1)} | {fmt(med(e, name, 'take-s'), 1)} | "
            f"{fmt(med(e, name, 'first-ext-s'), 1)} | {fmt(med(e, name, 'lost'))} | "
            f"{fmt(med(e, name, 'untaken'))} |"
        )
    if rows:
        print("### Held locks with auto-extension (engine, five masters)\n")
        print("| locks held | heap B/lock | extensions/s | cpu-µs/extension | % of a core | window s | s to take them | s until all extended once | lost | untaken |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        print("\n".join(rows) + "\n")


def contention(out):
    e = parse(f"{out}/contention-engine.txt")
    r = parse(f"{out}/contention-redsync.txt")
    names = sorted(set(e) | set(r), key=lambda s: int(s.split("=")[-1]))
    rows = []
    for k in names:
        c = int(k.split("=")[-1])
        rows.append(
            f"| {c:,} | {fmt(med(e, k, 'cycles/s'))} | {fmt(med(e, k, 'p99-ms'), 1)} | {fmt(med(e, k, 'grants-cv'), 2)} | "
            f"{span(e, k)} | {fmt(med(e, k, 'starved'))} | "
            f"{fmt(med(r, k, 'cycles/s'))} | {fmt(med(r, k, 'p99-ms'), 1)} | {fmt(med(r, k, 'grants-cv'), 2)} | "
            f"{span(r, k)} | {fmt(med(r, k, 'starved'))} |"
        )
    if rows:
        print("### Contention: lockers on one key (Lock + Unlock, five masters)\n")
        print("Fairness: grants-cv is the coefficient of variation of grants per locker (0 = even); "
              "min–max are the fewest and most grants of one locker over the mean; starved lockers never got it.\n")
        print("| lockers | engine cycles/s | p99 ms | grants-cv | min–max | starved "
              "| redsync cycles/s | p99 ms | grants-cv | min–max | starved |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        print("\n".join(rows) + "\n")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: scale_tables.py OUT")
    out = sys.argv[1]
    costs(out)
    masters(out)
    rtt(out)
    held(out)
    contention(out)


if __name__ == "__main__":
    main()
