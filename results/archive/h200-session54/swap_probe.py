"""Probe: t05's swapped TF32 form with 192 of C's rows (A's rows as two boxes) against the shipped
choice and cuBLAS: checks against float64, then device time (settled, interleaved)."""
import json, os, time
import torch
from tilegemm import tuning
from tilegemm.tuning import command, timer, tuner
from tilegemm.kernels.tensorcore import _problem as P

out = dict(checks=[], timings=[])
T05 = "tc_warp_specialized"
torch.backends.cuda.matmul.allow_tf32 = True
cfg = lambda bm, st, split: dict(BM=bm, BN=128, BK=32, STAGES=st, SPLIT=split, CONSUMERS=1, GROUP_M=8, SWAP=True)
S4, S5, OLD = cfg(192, 4, 1), cfg(192, 5, 2), cfg(256, 4, 4)


def check(m, n, k, c, bias=False, out_dtype=None):
    p = command.problem("tf32", m, n, k)
    if out_dtype is not None:
        p = P.Problem(p.a, p.b, torch.empty(m, n, device="cuda", dtype=out_dtype), p.precision)
    if bias:
        row = torch.randn(n, device="cuda").to(p.c.dtype)
        p = P.Problem(p.a, p.b, p.c, p.precision, beta=1.0, c_in=row.expand(m, n))
    ref = p.a.double() @ p.b.double()
    if bias:
        ref = ref + row.double()
    p.c.fill_(float("nan"))
    tuner.run(T05, p, c); torch.cuda.synchronize()
    got = p.c.double().clone()
    rel = ((got - ref).norm() / ref.norm()).item()
    rec = dict(m=m, n=n, k=k, cfg=c, bias=bias, out=str(out_dtype), rel=rel, nan=bool(torch.isnan(got).any()))
    out["checks"].append(rec)
    print("check", m, n, k, c["BM"], c["STAGES"], bias, out_dtype, f"{rel:.2e}", rec["nan"], flush=True)


def timed(m, n, k, cfgs):
    p = command.problem("tf32", m, n, k)
    trial = tuner.trial_problem(p)
    d = tuning.choose(p, "auto")
    ref = torch.empty(m, n, device="cuda")
    fns, names = [lambda: tuner.run(d.rung, trial, d.config)], [f"shipped {d.rung[:5]} {d.config}"]
    for name, c in cfgs:
        fns.append(lambda c=c: tuner.run(T05, trial, c)); names.append(name)
    fns.append(lambda: torch.matmul(p.a, p.b, out=ref)); names.append("cuBLAS")
    for f in fns:
        f()
    torch.cuda.synchronize()
    ms = timer.settle(fns, budget_ms=150, graph=False)
    rec = dict(m=m, n=n, k=k, us={nm: round(x * 1e3, 2) for nm, x in zip(names, ms)})
    out["timings"].append(rec)
    print("time tf32", m, n, k, json.dumps(rec["us"]), flush=True)


t0 = time.time()
for args in ((1000, 1200, 900, S4), (300, 520, 200, S5), (2100, 2056, 520, S4), (1000, 1200, 904, S5, True),
             (776, 1232, 4320, S4, False, torch.bfloat16), (3072, 3072, 3072, S4)):
    try:
        check(*args)
    except Exception as e:
        print("check failed", args[:4], type(e).__name__, str(e)[:600], flush=True)
        out["checks"].append(dict(args=str(args), error=f"{type(e).__name__}: {str(e)[:800]}"))
print("checks", round(time.time() - t0), "s", flush=True)
json.dump(out, open(os.environ["OUT"] + "/swap.json", "w"), indent=1)
new = [("192x128 s4", S4), ("192x128 s5", S5), ("256x128 s4", OLD)]
for m, n, k in ((3072, 3072, 3072), (3000, 3000, 3000), (4096, 4096, 4096), (2048, 2048, 2048), (1536, 1536, 1536),
                (2560, 2560, 2560)):
    try:
        timed(m, n, k, new)
    except Exception as e:
        print("time failed", m, n, k, type(e).__name__, str(e)[:300], flush=True)
    json.dump(out, open(os.environ["OUT"] + "/swap.json", "w"), indent=1)
print("total", round(time.time() - t0), "s")
