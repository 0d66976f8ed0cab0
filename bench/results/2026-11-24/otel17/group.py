import importlib.util,re,sys
# group.py BASE1 BASE2 VAR1 VAR2 N: bench/otel_hooks.py's per-cycle difference (callgrind outputs at N1 and N2 cycles, N = N2-N1), grouped by what each SDK/engine function does (BENCHMARKS.md "otel17").
import os
spec=importlib.util.spec_from_file_location("h",os.path.join(os.path.dirname(os.path.abspath(__file__)),"../../../otel_hooks.py"));h=importlib.util.module_from_spec(spec);spec.loader.exec_module(h)
b1,b2,v1,v2,n=sys.argv[1:6]; n=int(n)
a=h.per_cycle(b1,b2,n); b=h.per_cycle(v1,v2,n)
groups=[
 ("API options: NewRecordConfig, attrOpt.applyRecord, Set.Len (reflect) x2", r"NewRecordConfig|applyRecord|attribute\.\(\*Set\)\.Len|reflect\.|typeAssert"),
 ("SDK dispatch: inst.Record, aggregate, filter closure", r"sdk/metric\.\(\*(float64|int64)Inst\)\.Record|ExplicitBucketHistogram"),
 ("attribute-set lookup: limitedSyncMap, sync.Map (HashTrieMap), interface hash/compare", r"LoadOrStoreAttr|HashTrieMap|nilinterhash|typehash|efaceeq|memhash64|memequal64"),
 ("aggregation: hot/cold counts, sum (measure)", r"cumulativeHistogram.*measure"),
 ("bucket search: sort.SearchFloat64s", r"sort\.Search"),
 ("min/max: atomicMinMax.Update", r"atomicMinMax"),
 ("exemplar: filter (SpanContextFromContext on ctx), reservoir Offer", r"Exemplar|exemplar|SpanContextFromContext|SpanFromContext|noopSpan|backgroundCtx"),
 ("Enabled (per-batch guards)", r"Enabled"),
 ("engine: op counting (returned, count, tally)", r"Metrics\)\.returned|nodeMetrics"),
 ("engine: sending, Attempted, Acquired, Ended, Outcome, CallIndex, lock.ended, On, finished", r"Metrics\)\.|actors\.Outcome|CallIndex|lock\)\.ended"),
]
tel=h.TELEMETRY
used=set(); tot=0
for name,pat in groups:
    p=re.compile(pat); s=0
    for k in set(a)|set(b):
        if k in used or not tel.search(k) and not p.search(k): continue
        if p.search(k):
            s+=b.get(k,0)-a.get(k,0); used.add(k)
    tot+=s
    print(f"{s:+8.0f}  {name}")
rest=sum(b.get(k,0)-a.get(k,0) for k in set(a)|set(b) if tel.search(k) and k not in used)
print(f"{rest:+8.0f}  other telemetry-group functions")
clk=re.compile(r'^time\.|nanotime|walltime')
c=sum(b.get(k,0)-a.get(k,0) for k in set(a)|set(b) if clk.search(k) and k not in used)
print(f"{tot+rest:+8.0f}  telemetry group total;  clock reads (time.*, nanotime) {c:+.0f}")
print("base whole", sum(a.values()))
