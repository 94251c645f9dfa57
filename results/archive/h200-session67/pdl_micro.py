"""PDL on and off in chains of products (no model): 200 calls of tilegemm.matmul captured in one
CUDA graph and replayed (GPU time a call), alone (ours back to back) and with a torch
elementwise op between calls (as a model's norm or activation sits between products); and 200
eager calls queued behind a hold (GPU-paced). Writes $OUT/pdl_micro.json."""
import json, os, statistics, time
import torch
import tilegemm
from tilegemm import hold
from tilegemm.kernels.tensorcore import _problem as P
from tilegemm.tuning import cache

OUT = os.environ.get("OUT", "/tmp")
rule = P.pdl
dev = torch.device("cuda")
N_CALLS = 200

def setpdl(on):
    P.pdl = rule if on else (lambda p: False)
    cache.reset()

def graphed(fn, reps=5):
    fn(); torch.cuda.synchronize()
    s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    out = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); g.replay(); b.record(); b.synchronize()
        out.append(a.elapsed_time(b) / N_CALLS * 1e3)
    return statistics.median(out)

def queued(fn, reps=5):
    fn(); torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        hold.hold(20000, torch.cuda.current_stream().cuda_stream)
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); b.synchronize()
        out.append(a.elapsed_time(b) / N_CALLS * 1e3)
    return statistics.median(out)

SHAPES = [(1, 4096, 4096), (8, 1024, 4096), (8, 4096, 4096), (16, 14336, 4096), (128, 4096, 4096)]
res = []
for m, n, k in SHAPES:
    x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
    w = torch.randn(n, k, device=dev, dtype=torch.bfloat16)
    def alone():
        for _ in range(N_CALLS):
            tilegemm.matmul(x, w.t())
    def between():
        for _ in range(N_CALLS):
            tilegemm.matmul(x * 1.0, w.t())
    def torch_between():
        for _ in range(N_CALLS):
            torch.matmul(x * 1.0, w.t())
    rec = dict(m=m, n=n, k=k)
    for rnd in range(2):
        for on in (False, True):
            setpdl(on)
            key = "pdl" if on else "off"
            for name, fn in (("graph_alone", alone), ("graph_between", between)):
                rec.setdefault(f"{key}_{name}", []).append(graphed(fn))
            rec.setdefault(f"{key}_queued_alone", []).append(queued(alone))
    rec["torch_graph_between"] = graphed(torch_between)
    line = f"{m}x{n}x{k}"
    for kk in sorted(rec):
        if kk.startswith(("off", "pdl")):
            line += f" | {kk} {statistics.median(rec[kk]):.2f}"
    line += f" | torch_between {rec['torch_graph_between']:.2f} us"
    print(line, flush=True)
    res.append(rec)
setpdl(True)
json.dump(dict(gpu=torch.cuda.get_device_name(), when=time.strftime("%Y-%m-%dT%H:%M:%S"), records=res),
          open(f"{OUT}/pdl_micro.json", "w"), indent=1)
