import re,sys
def load(f):
    d={}
    for l in open(f):
        if '=>' in l: continue
        m=re.match(r'\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+(\S.*?)\s*(\[.*\])?$',l)
        if not m: continue
        v=int(m.group(1).replace(',',''))
        name=m.group(2)
        if ':' in name: name=name.split(':',1)[1]
        name=name.rstrip("'0123456789").rstrip("'")
        d[name]=d.get(name,0)+v
    return d
a=load(sys.argv[1]); b=load(sys.argv[2]); n=int(sys.argv[3])
d={k:(b.get(k,0)-a.get(k,0))/n for k in set(a)|set(b)}
tot=d.pop('PROGRAM TOTALS')
cats=[('gc',r'runtime\.(gc|scan|tryDefer|greyobject|mark|wbBuf|findObject|typePointers|extractHeapBits|spanOf|bulkBarrier|heapBits|sweep|mspan\)\.(sweep|mark)|markBits|shade|(\(\*gcWork)|(\(\*spanInlineMarkBits)|(\(\*spanQueue)|(\(\*gcBits))|runtime\.\(\*(gcWork|spanQueue|mspan\)\.(typePointers|heapBits))'),
 ('malloc',r'runtime\.(mallocgc|newobject|\(\*mcache|\(\*mcentral|\(\*mspan\)\.(nextFreeIndex|init|writeHeapBits|refill)|nextFreeFast|memclr|makeslice|growslice|deductAssist|\(\*mheap)|runtime\.(mallocgc.*|heapSetType.*)'),
 ('stack',r'runtime\.(newstack|copystack|morestack|findfunc|pcvalue|step|adjust|funcInfo|stackalloc|stackfree|readvarint|gentraceback|\(\*unwinder)'),
 ('sched',r'runtime\.(schedule|findRunnable|execute|gopark|park_m|mcall|casgstatus|ready|goready|wakep|runqput|runqget|runqgrab|newproc|goexit|gdestroy|gfput|gfget|isSystemGoroutine|lock2|unlock2|sem|\(\*sema|releaseSudog|acquireSudog|checkTimers|\(\*timers|stealWork|netpoll|futex|notewake|notesleep|resetspinning|startm|stopm|handoffp|gogo|systemstack|entersyscall|exitsyscall|reentersyscall|chansend|chanrecv|selectgo|selunlock|sellock|send|recv|goroutineReady|casGToRunnable|dropg|gcstopm|checkdead|nanotime|procyield|osyield|runtimer|unlockf|selparkcommit|parkunlock|pidle|mPark|injectglist|\(\*randomEnum|\(\*gQueue|\(\*timer)|^sync\.|^internal/sync|^time\.|runtime\.(semrelease|semacquire)'),
 ('syscall/poll',r'syscall|internal/poll|net\.|runtime\.(netpoll|pollWait|poll_)'),
 ('transport',r'transport/redis|quorumlock/redlock/transport\.|bufio|resp'),
 ('node',r'actors\.\(\*node\)|actors\.\(\*quarantine|actors\.\(\*deadline|actors\.unsent|actors\.expires|actors\.\(\*Metrics|actors\.stillStale|actors\.keyHash|actors\.getReplies|actors\.putReplies|actors\.\(\*batch|newDeadline'),
 ('mailbox/protoactor',r'protoactor|actors\.\(\*mailbox|actors\.\(\*queue|processMessages|loneCallMailbox'),
 ('coordinator/call',r'actors\.'),
 ('engine',r'redlock/engine'),
 ('bench',r'redlock/bench|hdrhistogram'),
 ('crypto/rand',r'crypto|base64|vgetrandom|getrandom'),
 ('memmove/mem',r'memmove|memeq|indexbyte|memclr|cmpbody'),
]
res={}; ex={}
for k,v in d.items():
    for c,p in cats:
        if re.search(p,k): res[c]=res.get(c,0)+v; ex.setdefault(c,[]).append((v,k)); break
    else: res['other']=res.get('other',0)+v; ex.setdefault('other',[]).append((v,k))
print("total %.0f"%tot)
for c,v in sorted(res.items(),key=lambda x:-x[1]):
    print("%-20s %7.0f %5.1f%%"%(c,v,100*v/tot))
if len(sys.argv)>4:
    for c in sys.argv[4].split(','):
        print('--',c); [print("   %6.0f %s"%x) for x in sorted(ex[c],reverse=True)[:25]]
