#!/usr/bin/env python3
# percall.py A1 A2 N [filter-regex]: per-function self Ir per iteration ((A2-A1)/N)
import sys, re
import importlib.util
import os
spec = importlib.util.spec_from_file_location("h", os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../otel_hooks.py"))
h = importlib.util.module_from_spec(spec); spec.loader.exec_module(h)
a1, a2, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
pat = re.compile(sys.argv[4]) if len(sys.argv) > 4 else None
d = h.per_cycle(a1, a2, n)
tot = sum(d.values())
print(f"total per iteration {tot:.0f}")
for k, v in sorted(d.items(), key=lambda kv: -kv[1]):
    if abs(v) >= 3 and (pat is None or pat.search(k)):
        print(f"{v:8.1f}  {k[:150]}")
