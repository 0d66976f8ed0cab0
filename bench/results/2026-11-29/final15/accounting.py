#!/usr/bin/env python3
"""Round by round, the engine's lock cycles/s over redsync's against the ratio
of their total CPU per cycle (client, servers, kernel: both saturate the two
cores), and what the engine's client CPU per cycle would have to be for 20x:
redsync's total / 20 minus the engine's total without its client.

    python3 bench/results/2026-11-29/final15/accounting.py
"""
import os, statistics as st

here = os.path.dirname(os.path.abspath(__file__))

def rows(path, sel):
    out = []
    for line in open(path):
        if line.startswith("BenchmarkRedis/uncontended/" + sel):
            toks, d = line.split(), {}
            for i in range(len(toks) - 1):
                try:
                    d[toks[i + 1]] = float(toks[i])
                except ValueError:
                    pass
            out.append(d)
    return out

for run, sel in (("round2", "c=256-"), ("round2", "c=1024-"), ("c1024x10", "c=1024-")):
    e, r = rows(os.path.join(here, run, "engine.txt"), sel), rows(os.path.join(here, run, "redsync.txt"), sel)
    print(f"{run} {sel.rstrip('-')}")
    needs, clients = [], []
    for a, b in zip(e, r):
        rest = a["total-us/cycle"] - a["cpu-us/cycle"]
        need = b["total-us/cycle"] / 20 - rest
        needs.append(need)
        clients.append(a["cpu-us/cycle"])
        print(f"  cycles/s ratio {a['cycles/s'] / b['cycles/s']:5.1f}  total-us ratio {b['total-us/cycle'] / a['total-us/cycle']:5.1f}"
              f"  (engine {a['total-us/cycle']:5.1f}: client {a['cpu-us/cycle']:5.2f}, servers {a['srv-us/cycle']:5.2f}; redsync {b['total-us/cycle']:6.1f})"
              f"  free-client bound {b['total-us/cycle'] / rest:5.1f}x  client for 20x {need:6.2f}")
    print(f"  medians: engine client {st.median(clients):.2f} us, client for 20x {st.median(needs):.2f} us")
