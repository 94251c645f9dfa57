import copy, statistics, time
import torch
import tilegemm
from tilegemm import dispatch

def block(fn, calls=400):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    us = (time.perf_counter() - t0) / calls * 1e6
    torch.cuda.synchronize()
    return us

def per_call(fns, reps=15):
    for _ in range(2):
        for f in fns.values(): block(f)
    t = {k: [] for k in fns}
    for _ in range(reps):
        for k, f in fns.items(): t[k].append(block(f))
    return {k: round(statistics.median(v), 1) for k, v in t.items()}

for dt in (torch.float32, torch.bfloat16):
    x = (torch.rand(64, 64, device="cuda") * 2 - 1).to(dt)
    plain = torch.nn.Linear(64, 64, device="cuda", dtype=dt)
    nob = torch.nn.Linear(64, 64, device="cuda", dtype=dt, bias=False)
    pb, pn = copy.deepcopy(plain), copy.deepcopy(nob)
    tilegemm.patch(pb); tilegemm.patch(pn)
    y = torch.empty(64, 64, device="cuda", dtype=dt)
    bias = plain.bias
    bias_plain = plain.bias.detach().clone()
    w = pb.weight
    with torch.no_grad():
        pb(x); pb(x); pn(x); pn(x)
        kb = dispatch.linear_key(x, w, x.data_ptr(), w.data_ptr()) + dispatch.bias_key(pb.bias, pb.bias.data_ptr())
        print(dt, "plan under the bias key:", type(dispatch._PLANS.get(kb)).__name__)
        r = per_call({"patched+bias": lambda: pb(x), "patched nobias": lambda: pn(x), "nn.Linear+bias": lambda: plain(x),
                      "nn.Linear nobias": lambda: nob(x), "matmul x@Wt": lambda: tilegemm.matmul(x, w.t()),
                      "fast_linear(x,w,b)": lambda: dispatch.fast_linear(x, w, pb.bias),
                      "fast_linear(x,w)": lambda: dispatch.fast_linear(x, pn.weight),
                      "y.add_(Parameter)": lambda: y.add_(bias), "y.add_(tensor)": lambda: y.add_(bias_plain),
                      "empty": lambda: torch.empty(64, 64, device="cuda", dtype=dt)})
        print(dt, r, flush=True)
