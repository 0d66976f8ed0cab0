# flat samples of GC and allocation (the tenth session's categories.py rule) as a share of a profile:
#   go tool pprof -top -nodecount=3000 X.test X.prof | python3 gcshare.py
import re,sys
tot=gc=0
for line in sys.stdin:
    m=re.match(r'\s*([\d.]+)(ms|s)\s+([\d.]+)%\s+[\d.]+%\s+[\d.]+m?s\s+[\d.]+%\s+(.*)$',line)
    if not m: continue
    pct=float(m.group(3)); fn=m.group(4); tot+=pct
    if re.search(r'runtime.(mallocgc|gc|scan|mark|sweep|mspan|heap|newobject|memclr|greyobject|findObject|mcache|mcentral|nextFree|deductAssist|tryDeferToSpanScan|wbBuf|bulkBarrier|typePointers|markBits|spanOf)|runtime\.\(\*(gcWork|mspan|mheap|mcache|mcentral|gcBits|spanSet|pageAlloc|sweepLocked|gcControllerState|mSpanStateBox)',fn): gc+=pct
print('GC+malloc %.1f%% of the samples (%.1f%% listed)'%(gc,tot))
