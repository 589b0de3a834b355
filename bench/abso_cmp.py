#!/usr/bin/env python3
"""Compares the builds or settings of one `gpu_run.sh abso` job (abso.txt, and abso_osu.txt
if given): per pattern (osu0 back to back, osu1 OSU's pattern, osu the OSU programs) and
size group, each variant's mean latency over rounds, its ratio to NCCL's in the same run
(r) and its ranks' median (med); then each variant's slowest rows up to 64 KiB.
Jobs on the 2x H200 machine drift by about 1 us as a whole (NCCL too), so compare
variants of one job only.   usage: bench/abso_cmp.py abso.txt [abso_osu.txt]"""
import re,sys,collections,statistics as st
def load(fn):
    f=open(fn).read()
    d=collections.defaultdict(lambda: collections.defaultdict(list))
    for b in re.split(r'^## ',f,flags=re.M)[1:]:
        head=b.split('\n',1)[0].split(); var,pat=head[0],head[1]
        coll=None
        for line in b.split('\n'):
            if line.startswith('# ') and not line.startswith('# OSU') and not line.startswith('# Size') and not line.startswith('# Datatype'):
                coll=line.split()[1]
            m=re.match(r'\s+(\d+)\s+([\d.]+)\s+[\d.]+\s+([\d.]+)\s+\S+\s+\S+\s+\S+\s+\S+(?:\s+([\d.]+)/)?',line)
            if m and coll:
                d[(pat,coll,int(m.group(1)))][var].append((float(m.group(2)),float(m.group(3)),float(m.group(4)) if m.group(4) else None))
            mo=re.match(r'^(\d+)\s+([\d.]+)$',line)
            if mo and pat.startswith('osu_'):
                d[('osu',pat,int(mo.group(1)))][var].append((float(mo.group(2)),None,None))
    return d
d=load(sys.argv[1])
if len(sys.argv)>2:
    d2=load(sys.argv[2]); d.update(d2)
vars_=[]
for k in d:
    for v in d[k]:
        if v not in vars_: vars_.append(v)
groups=[((1,2048),'<=2K'),((4096,8192),'4-8K'),((16384,65536),'16-64K')]
for pat in ['osu0','osu1','osu']:
    for (lo,hi),name in groups:
        out=[]
        for v in vars_:
            xs=[];rs=[];meds=[]
            for k,vv in d.items():
                if k[0]==pat and lo<=k[2]<=hi and v in vv:
                    for x in vv[v]:
                        xs.append(x[0])
                        if x[1]: rs.append(x[0]/x[1])
                        if x[2]: meds.append(x[2])
            if xs:
                out.append(f"{v}: {st.mean(xs):.2f}" + (f" r{st.mean(rs):.3f}" if rs else "") + (f" med{st.mean(meds):.2f}" if meds else ""))
        print(pat,name,' | '.join(out))
# worst rows per variant (mean over rounds), up to 64K
print()
for pat in ['osu0','osu1','osu']:
    for v in vars_:
        rows=[(st.mean(x[0] for x in vv[v]),k[1],k[2]) for k,vv in d.items() if k[0]==pat and v in vv and k[2]<=65536]
        rows.sort(reverse=True)
        print(pat,v,'worst:',', '.join(f"{c} {s} {m:.2f}" for m,c,s in rows[:4]), f"| >10: {sum(1 for r in rows if r[0]>10)}/{len(rows)}")
