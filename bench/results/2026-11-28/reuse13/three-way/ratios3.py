import sys,statistics,re
out=sys.argv[1]
def vals(b,unit):
    v=[]
    for line in open(f'{out}/{b}.txt'):
        if line.startswith('BenchmarkMemory'):
            f=line.split()
            v.append(float(f[f.index(unit)-1]))
    return v
xc={}
for line in open(f'{out}/xcore.txt'):
    r,b,x0,x1=line.split(); xc[(int(r),b)]=(x0,x1)
for unit in ['cpu-us/cycle','cycles/s']:
    ba,mn,nw=vals('ba',unit),vals('main',unit),vals('new',unit)
    n=min(len(ba),len(mn),len(nw))
    rm=[mn[i]/ba[i] for i in range(n)]; rn=[nw[i]/ba[i] for i in range(n)]; rnm=[nw[i]/mn[i] for i in range(n)]
    print(unit, 'rounds',n)
    print('  medians: ba %.3f main %.3f new %.3f'%(statistics.median(ba[:n]),statistics.median(mn[:n]),statistics.median(nw[:n])))
    print('  per-round median main/ba %.3f new/ba %.3f new/main %.3f'%(statistics.median(rm),statistics.median(rn),statistics.median(rnm)))
    print('  new/ba per round', ' '.join('%.2f'%x for x in sorted(rn)))
    print('  new/main per round', ' '.join('%.2f'%x for x in sorted(rnm)))
    print('  new<main in %d of %d rounds'%(sum(1 for x in rnm if (x<1 if unit=='cpu-us/cycle' else x>1)),n))
