import re,subprocess,sys
def prof(path, cpu):
    out=subprocess.run(['go','tool','pprof','-top','-nodecount=2000','/tmp/new.test',path],capture_output=True,text=True,cwd='/tmp').stdout
    cats={}
    for line in out.splitlines():
        m=re.match(r'\s*([\d.]+)(ms|s)\s+([\d.]+)%\s+[\d.]+%\s+[\d.]+m?s\s+[\d.]+%\s+(.*)$',line)
        if not m: continue
        pct=float(m.group(3)); fn=m.group(4)
        rules=[('probe/harness',r'bench\.|hdrhistogram|benchtest'),
               ('time reads',r'^time\.|runtime.nanotime|vdso'),
               ('crypto/rand',r'crypto|vgetrandom|getrandom|base64'),
               ('GC+malloc',r'runtime.(mallocgc|gc|scan|mark|sweep|mspan|heap|newobject|memclr|greyobject|findObject|mcache|mcentral|nextFree|deductAssist|tryDeferToSpanScan|wbBuf|bulkBarrier|typePointers|pcvalue|funcInfo|step|findfunc|markBits|spanOf)|runtime\.\(\*(gcWork|mspan|mheap|mcache|mcentral|gcBits|spanSet|pageAlloc|sweepLocked|gcControllerState|mSpanStateBox)'),
               ('sema/park/sched',r'runtime.(sema|cansemacquire|semrelease|gopark|goready|park_m|schedule|findRunnable|runqget|runqput|ready|casgstatus|mcall|gogo|goexit|newproc|execute|lock2|unlock2|lockWithRank|unlockWithRank|wakep|startm|notewakeup|futex|stopm|releaseSudog|acquireSudog|resetspinning|checkTimers|procyield|osyield|netpoll|runqsteal|stealWork|globrunq|nanosleep|usleep|mPark|handoffp|entersyscall|exitsyscall|systemstack|goschedIfBusy|dropg|readgstatus)|runtime\.\(\*(semaRoot|waitq|timers|randomEnum|gQueue)|sync.runtime_|sync.\(\*WaitGroup\)|internal/runtime/atomic|runtime.selectgo|runtime.sellock|runtime.selunlock|runtime.chan|runtime.send|runtime.recv'),
               ('mutex',r'sync.\(\*Mutex\)|internal/sync.\(\*Mutex\)'),
               ('memory master',r'transport/memory'),
               ('protoactor',r'protoactor'),
               ('engine+actors',r'quorumlock/redlock/(actors|engine|transport|api|bench/floor)'),
               ]
        c='other'
        for name,rx in rules:
            if re.search(rx,fn): c=name; break
        cats[c]=cats.get(c,0)+pct*cpu*10
    return cats
f=prof(sys.argv[1],float(sys.argv[2])); e=prof(sys.argv[3],float(sys.argv[4]))
keys=sorted(set(f)|set(e),key=lambda k:-(e.get(k,0)-f.get(k,0)))
print("%-18s %8s %8s %8s"%('ns/cycle','floor','engine','diff'))
for k in keys: print("%-18s %8.0f %8.0f %8.0f"%(k,f.get(k,0),e.get(k,0),e.get(k,0)-f.get(k,0)))
print("%-18s %8.0f %8.0f"%('total',sum(f.values()),sum(e.values())))
