import sys,statistics,math
def rows(f):
    out=[]
    for l in open(f):
        if not l.startswith('BenchmarkRedis/uncontended/c=256-'): continue
        x=l.split(); out.append({x[i+1]:float(x[i]) for i in range(2,len(x)-1,2)})
    return out
pairs=[]
for d in sys.argv[1:]:
    for a,b in zip(rows(f'{d}/old.txt'),rows(f'{d}/new.txt')): pairs.append((a,b))
def wilcoxon(ds):
    ds=[d for d in ds if d!=0]; n=len(ds)
    r=sorted(range(n),key=lambda i:abs(ds[i])); ranks=[0]*n
    for k,i in enumerate(r): ranks[i]=k+1
    wp=sum(ranks[i] for i in range(n) if ds[i]>0)
    mu=n*(n+1)/4; sd=math.sqrt(n*(n+1)*(2*n+1)/24); z=(wp-mu)/sd
    return 2*(1-0.5*(1+math.erf(abs(z)/math.sqrt(2))))
for name,f in [('client cpu-us',lambda d:d['cpu-us/cycle']),('servers srv-us',lambda d:d['srv-us/cycle']),('client+servers',lambda d:d['cpu-us/cycle']+d['srv-us/cycle']),('cycles/s',lambda d:d['cycles/s']),('writes',lambda d:d['writes/cycle'])]:
    ds=[(f(b)-f(a))/f(a) for a,b in pairs]
    print('%-16s n=%d median paired change %+.2f%%  new lower in %d  Wilcoxon p=%.3f'%(name,len(ds),100*statistics.median(ds),sum(d<0 for d in ds),wilcoxon(ds)))
