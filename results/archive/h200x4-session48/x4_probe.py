"""Session 48 probe: the host split at 32768 on 4 GPUs, traced; each GPU's block alone, cuBLAS vs tilegemm."""
import json, os, statistics, sys, time
import torch
import tilegemm
from tilegemm import multigpu
sys.path.insert(0, "scripts/device")
from host_split_trace import per_gpu, sync

n = int(os.environ.get("N", "32768"))
G = torch.cuda.device_count()
a = torch.randn(n, n, device="cuda:0").to(torch.bfloat16)
b = torch.randn(n, n, device="cuda:0").to(torch.bfloat16)
call = lambda: tilegemm.matmul(a, b, devices="all")
call(); call()
res = dict(split=[list(r) for r in multigpu.describe_split(n, n, n, tuple(range(G)), 2, 0)])
whole = []
for _ in range(5):
    sync(); t0 = time.perf_counter(); call(); sync(); whole.append((time.perf_counter() - t0) * 1e3)
res["whole_ms"] = whole
res["traces"] = [per_gpu(call) for _ in range(2)]
print(json.dumps(res, indent=1), flush=True)

def timed(fn, dev, reps=3):
    fn(); torch.cuda.synchronize(dev)
    out = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.device(dev):
            s.record(); fn(); e.record()
        e.synchronize(); out.append(round(s.elapsed_time(e), 3))
    return out

alone = {}
for g, r0, r1 in multigpu.describe_split(n, n, n, tuple(range(G)), 2, 0):
    dev = torch.device("cuda", g)
    ag, bg = a[r0:r1].to(dev), b.to(dev)
    alone[g] = dict(rows=r1 - r0, cublas=timed(lambda: torch.mm(ag, bg), dev),
                    tilegemm=timed(lambda: tilegemm.matmul(ag, bg), dev),
                    panel_tilegemm=timed(lambda: [tilegemm.matmul(ag, bg[:, j0:j1]) for j0, j1 in multigpu.panels(n)], dev),
                    panel_cublas=timed(lambda: [torch.mm(ag, bg[:, j0:j1]) for j0, j1 in multigpu.panels(n)], dev))
    del ag, bg
    print(g, alone[g], flush=True)
res["alone"] = alone
json.dump(res, open(os.environ.get("OUT", "/tmp") + f"/probe-{n}.json", "w"), indent=1)
