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
        d[name]=d.get(name,0)+v
    return d
a=load(sys.argv[1]); b=load(sys.argv[2]); n=int(sys.argv[3]); top=int(sys.argv[4]) if len(sys.argv)>4 else 60
rows=sorted(((b.get(k,0)-a.get(k,0))/n,k) for k in set(a)|set(b))
rows.reverse()
for v,k in rows[:top]: print("%9.0f  %s"%(v,k))
