"""Session 48 A/B: the host split as shipped, with refitted lags, and with refitted lags + the home in panels."""
import functools, json, os, statistics, sys, time
import torch
import tilegemm
from tilegemm import multigpu as m

def lags2(mm, n, k, gpus, itemsize, row_s, link_gbps, host=0.7e-3):
    cuts = m.panels(n)
    w0, wl = cuts[0][1]-cuts[0][0], cuts[-1][1]-cuts[-1][0]
    rows, others, bps = mm/gpus, gpus-1, link_gbps*1e9
    start = (rows/m.FIRST_CHUNKS*k + k*w0)*itemsize/bps
    all_a = (others*rows*k + k*w0)*itemsize/bps - (m.FIRST_CHUNKS-1)*rows/m.FIRST_CHUNKS*row_s*w0/n
    back = rows*wl*itemsize/bps
    hop = k*w0*itemsize/bps
    return [host + max(start, all_a) + back + h*hop for h in range(others)]

old_lags, old_desc, old_local = m.lags, m.describe_split, m._local_steps
new_desc = functools.lru_cache(maxsize=256)(old_desc.__wrapped__)

def panel_local(w, ta, tb, tc, r0, r1, start, kernel, local):
    w.begin(start)
    for j0, j1 in m.panels(tb.shape[1]):
        local(ta[r0:r1], tb[:, j0:j1], kernel=kernel, out=tc[r0:r1, j0:j1])
    return w.end()
    yield

def use(v):
    m._local_steps = panel_local if v == "panels" else old_local

def sync():
    for g in range(torch.cuda.device_count()):
        torch.cuda.synchronize(g)

V = ["old", "panels"]
res = []
for gpus, n, rounds, calls in ((4, 32768, 10, 5), (2, 32768, 8, 4), (4, 65536, 3, 3), (2, 65536, 2, 2)):
    ids = list(range(gpus))
    a = torch.randn(n, n, device="cuda:0").to(torch.bfloat16)
    b = torch.randn(n, n, device="cuda:0").to(torch.bfloat16)
    outs = {}
    for v in V:
        use(v); outs[v] = tilegemm.matmul(a, b, devices=ids); tilegemm.matmul(a, b, devices=ids)
    same = {v: float((outs[v].float() - outs["old"].float()).abs().max()) for v in V}
    del outs
    t = {v: [] for v in V}
    for r in range(rounds):
        for v in (V if r % 2 == 0 else V[::-1]):
            use(v)
            for _ in range(calls):
                sync(); t0 = time.perf_counter(); tilegemm.matmul(a, b, devices=ids); sync()
                t[v].append((time.perf_counter() - t0) * 1e3)
        rec = dict(gpus=gpus, n=n, max_diff_vs_old=same, split_old=old_desc(n, n, n, tuple(ids), 2, 0),
               split_new=new_desc(n, n, n, tuple(ids), 2, 0),
               median_ms={v: round(statistics.median(x), 3) for v, x in t.items()},
               round_medians={v: [round(statistics.median(x[i:i + calls]), 2) for i in range(0, len(x), calls)] for v, x in t.items()}, ms=t)
    print(gpus, n, rec["median_ms"], same, rec["round_medians"], flush=True)
    res.append(rec)
    del a, b; torch.cuda.empty_cache()
json.dump(res, open(os.environ.get("OUT", "/tmp") + "/probe-ab-panels.json", "w"), indent=1)
