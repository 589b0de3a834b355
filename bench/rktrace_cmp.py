#!/usr/bin/env python3
"""Compares variants of `gpu_run.sh rktrace` runs in one file: each variant's runs start with a
line `#### name` (the caller writes it), then rktrace's `## coll size` sections. Prints, per
collective and size, each variant's bench mean and median, NCCL's, the host's time from
the descriptor to its completion, and the resident kernel's device phases (verbose 10
trace: hand-off, writes, peers' flags, result, completion; their sum). The device phases
vary much less from job to job than the host's latency.   usage: bench/rktrace_cmp.py rktrace.txt"""
import re,sys,collections,statistics as st
txt=open(sys.argv[1]).read()
var=None; coll=None; size=None
R=collections.defaultdict(dict)
for line in txt.split('\n'):
    m=re.match(r'#### (\S+)',line)
    if m: var=m.group(1); continue
    m=re.match(r'## (\S+) (\d+)',line)
    if m: coll,size=m.group(1),int(m.group(2)); continue
    key=(var,coll,size)
    m=re.match(r'\s+(\d+)\s+([\d.]+)\s+[\d.]+\s+([\d.]+).*ok\s+([\d.]+)/',line)
    if m: R[key]['us']=float(m.group(2)); R[key]['nccl']=float(m.group(3)); R[key]['med']=float(m.group(4)); continue
    m=re.search(r'mean ([\d.]+) us from the descriptor',line)
    if m: R[key].setdefault('d2c',[]).append(float(m.group(1))); continue
    m=re.search(r'us waiting for the descriptor ([\d.]+), hand-off ([\d.]+), writes and fence ([\d.]+), peers. flags ([\d.]+), result ([\d.]+), completion ([\d.]+)',line)
    if m: R[key].setdefault('dev',[]).append([float(x) for x in m.groups()])
vars_=[]
for k in R:
    if k[0] not in vars_: vars_.append(k[0])
colls=[]
for k in R:
    if k[1] not in colls: colls.append(k[1])
sizes=sorted({k[2] for k in R})
for coll in colls:
  for size in sizes:
    print(f"{coll} {size}")
    for v in vars_:
        r=R.get((v,coll,size))
        if not r or 'dev' not in r: print('  ',v,'-'); continue
        dev=[st.mean(x[i] for x in r['dev']) for i in range(6)]
        devsum=sum(dev[1:])
        print(f"   {v:6s} bench {r.get('us',0):5.2f} med {r.get('med',0):5.2f} nccl {r.get('nccl',0):5.2f} | host d->c {st.mean(r['d2c']):.2f} | dev: hand {dev[1]:.2f} wr {dev[2]:.2f} peers {dev[3]:.2f} res {dev[4]:.2f} cmp {dev[5]:.2f} sum {devsum:.2f}")
