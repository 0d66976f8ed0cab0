import re,sys,statistics as st
def load(p):
    d={}
    for line in open(p):
        if not line.startswith('BenchmarkRedis/'): continue
        f=line.split()
        name=re.sub(r'-\d+$','',f[0].replace('BenchmarkRedis/',''))
        m={}
        for i in range(2,len(f)-1,2):
            try: m[f[i+1]]=float(f[i])
            except: pass
        d.setdefault(name,[]).append(m)
    return d
old=load(sys.argv[1]); new=load(sys.argv[2])
print("| workload | radix cycles/s | rueidis cycles/s | cycles/s ratio | radix cpu-µs/cycle | rueidis cpu-µs/cycle | cpu ratio | allocs/cycle radix / rueidis |")
print("|---|---|---|---|---|---|---|---|")
for name in old:
    n=min(len(old[name]),len(new.get(name,[])))
    if n==0: continue
    o=old[name][:n]; w=new[name][:n]
    r=[w[i]['cycles/s']/o[i]['cycles/s'] for i in range(n)]
    c=[w[i]['cpu-us/cycle']/o[i]['cpu-us/cycle'] for i in range(n)]
    med=lambda xs:st.median(xs)
    print(f"| {name} | {med([x['cycles/s'] for x in o]):,.0f} | {med([x['cycles/s'] for x in w]):,.0f} | **{med(r):.2f}** ({min(r):.2f}–{max(r):.2f}) | {med([x['cpu-us/cycle'] for x in o]):.1f} | {med([x['cpu-us/cycle'] for x in w]):.1f} | **{med(c):.2f}** ({min(c):.2f}–{max(c):.2f}) | {med([x['allocs/op'] for x in o]):.0f} / {med([x['allocs/op'] for x in w]):.0f} |")
print("rounds:", {k:min(len(old[k]),len(new.get(k,[]))) for k in old})
