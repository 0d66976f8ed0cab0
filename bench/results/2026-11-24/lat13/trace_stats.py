#!/usr/bin/env python3
# trace_stats.py PARSED: from `go tool trace -d=parsed T` of BenchmarkRedis/uncontended/c=1, the wall
# time of write(2) and read(2) and how long goroutines waited between being readied and running, by
# role (reader: transport/redis pipe.read; worker: actors node.worker; caller: the engine's run) and
# by who readied them. Roles come from the stacks where goroutines block; '?' is anything else (the
# coordinator's goroutine on main, the netpoller). Skips the first fifth of the trace (set-up).
import sys,re
pat=re.compile(r'M=(-?\d+) P=(-?\d+) G=(-?\d+) StateTransition Time=(\d+) GoID=(\d+) (\S+)->(\S+) Reason="([^"]*)"')
ev=[];role={};last=None;grab=False
for l in open(sys.argv[1]):
    m=pat.match(l)
    if m:
        M,P,G,T,gid,a,b,r=m.groups()
        last=[int(T),int(gid),a,b,r,int(P),int(M),[] ,int(G)]
        ev.append(last); continue
    if last is not None and l.startswith('\t') and not l.startswith('\t\t'):
        last[7].append(l.strip().split(' @')[0])
for e in ev:
    if e[2]=='Running' and e[3]=='Waiting':
        st=' '.join(e[7])
        if 'pipe).read' in st: role[e[1]]='reader'
        elif 'node).worker' in st: role[e[1]]='worker'
        elif 'engine' in st and ('run' in st): role[e[1]]='caller'
import statistics as st
ev.sort()
ev=ev[len(ev)//5:]  # skip setup
def pct(xs):
    xs=sorted(xs); n=len(xs)
    return 'n=%d p50=%.1f p90=%.1f mean=%.1f'%(n,xs[n//2],xs[int(n*.9)],sum(xs)/n) if n else 'n=0'
wr=[];rd=[];readyq={};hop=[];fan=[];callerRun=[];lastRun={}
sysstart={}
for e in ev:
    T,g,a,b,r,P,M,stk,G=e
    R=role.get(g,'?')
    if a=='Running' and b=='Syscall':
        sysstart[g]=(T,stk[0] if stk else '')
    if a=='Syscall' and b=='Running' and g in sysstart:
        t0,fn=sysstart.pop(g)
        if 'write' in fn: wr.append((T-t0)/1000)
        elif 'read' in fn: rd.append((T-t0)/1000)
    if b=='Runnable' and a=='Waiting':
        readyq[g]=(T,role.get(G,'?'))
    if a=='Runnable' and b=='Running' and g in readyq:
        t0,by=readyq.pop(g)
        hop.append((R,by,(T-t0)/1000))
    if R=='caller' and a=='Runnable' and b=='Running': lastRun[g]=T
    if a=='NotExist' and G in lastRun:
        callerRun.append((T-lastRun.pop(G))/1000)
print('write syscall us', pct(wr))
print('read syscall us', pct(rd))
print('caller run -> coordinator goroutine created', pct(callerRun))
from collections import defaultdict
d=defaultdict(list)
for R,by,x in hop: d[(R,by)].append(x)
for k,v in sorted(d.items(), key=lambda kv:-len(kv[1])):
    print('wake->run',k,pct(v))
