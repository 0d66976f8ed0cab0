#!/usr/bin/env python3
"""bench/otel_hooks.py BASE1 BASE2 VAR1 VAR2 N: where a telemetry variant's added instructions go.

BASE1/BASE2 are callgrind outputs of the base variant (e.g. none) at N1 and N2 cycles, VAR1/VAR2 of
the variant (e.g. metrics) at the same N1 and N2; N is N2 - N1. Each function's self cost per cycle
is (Ir at N2 - Ir at N1) / N, so set-up cancels. Functions are split into the telemetry group (the
engine's hooks in actors/metrics.go and engine/otel.go, the OpenTelemetry API and SDK, and the
runtime and library code only they call here: reflect's Len of an attribute set, the SDK's sync.Map,
its bucket search) and the rest. The telemetry group's difference is code executed per cycle, so it
hardly moves from run to run; the rest's difference is the run-to-run noise of the whole-process
count (garbage collection, stack growth, scheduling), which is why the whole-process medians of
bench/otel-count.sh need several runs on Redis.
"""
import collections
import re
import subprocess
import sys

TELEMETRY = re.compile(
    r"opentelemetry|actors\.\(\*(Metrics|nodeMetrics)\)|actors\.Outcome|actors\.CallIndex|engine\.\(\*lock\)\.ended"
    r"|^reflect\.|^sort\.Search|HashTrieMap|nilinterhash|^runtime\.typehash|^runtime\.efaceeq")


def load(path):
    out = subprocess.run(["callgrind_annotate", "--auto=no", "--threshold=100", path],
                         capture_output=True, text=True, check=True).stdout
    costs = collections.Counter()
    for line in out.splitlines():
        m = re.match(r"\s*([\d,]+)\s+\([^)]*\)\s+(\S.*)$", line)
        if not m or "PROGRAM TOTALS" in line:
            continue
        name = re.sub(r"\s*\[[^\]]*\]$", "", m.group(2))
        name = name.split(":", 1)[1] if ":" in name else name
        costs[name.replace("'2", "")] += int(m.group(1).replace(",", ""))
    return costs


def per_cycle(a, b, n):
    fa, fb = load(a), load(b)
    return {k: (fb[k] - fa[k]) / n for k in set(fa) | set(fb)}


def main():
    b1, b2, v1, v2, n = sys.argv[1:6]
    base, var = per_cycle(b1, b2, int(n)), per_cycle(v1, v2, int(n))
    keys = set(base) | set(var)
    tb, tv = sum(base.values()), sum(var.values())
    gb = sum(v for k, v in base.items() if TELEMETRY.search(k))
    gv = sum(v for k, v in var.items() if TELEMETRY.search(k))
    print(f"whole process, instructions per cycle: base {tb:.0f}, variant {tv:.0f} ({(tv - tb) / tb * 100:+.1f} %)")
    print(f"telemetry group: base {gb:.0f}, variant {gv:.0f}: {gv - gb:+.0f} per cycle,"
          f" {(gv - gb) / tb * 100:+.1f} % of the base's whole cycle")
    print(f"the rest: base {tb - gb:.0f}, variant {tv - gv:.0f} ({(tv - gv) - (tb - gb):+.0f}: noise)")
    print("telemetry functions, self instructions per cycle, variant - base:")
    rows = sorted(((var.get(k, 0) - base.get(k, 0), k) for k in keys if TELEMETRY.search(k)), reverse=True)
    for d, k in rows:
        if abs(d) >= 5:
            print(f"  {d:+8.0f}  {k[:140]}")


if __name__ == "__main__":
    main()
