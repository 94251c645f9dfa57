"""Probe: t05 with B's tile in two boxes (WIDE: 192 = 128 + 64, 96 = 64 + 32) against the shipped
choice and cuBLAS: correctness first, then device time (settled, interleaved)."""
import json, os, time
import torch
from tilegemm import tuning
from tilegemm.tuning import command, timer, tuner
from tilegemm.kernels.tensorcore import _problem as P

out = dict(checks=[], timings=[])
T05 = "tc_warp_specialized"
cfg = lambda bm, bn, st, co, split=1, bk=64, **kw: dict(BM=bm, BN=bn, BK=bk, STAGES=st, SPLIT=split, CONSUMERS=co, GROUP_M=8, **kw)
W4, W3, W96, W2 = cfg(192, 192, 4, 3), cfg(192, 192, 3, 3), cfg(192, 96, 5, 3), cfg(128, 192, 4, 2)


def check(dtype, m, n, k, c, bias=False):
    p = command.problem(dtype, m, n, k)
    if dtype == "fp8":
        c = dict(c, BK=128)
    if bias:
        row = torch.randn(n, device="cuda").to(p.c.dtype)
        p = P.Problem(p.a, p.b, p.c, p.precision, beta=1.0, c_in=row.expand(m, n))
    ref = p.a.double() @ p.b.double()
    if p.scale_a is not None:
        ref = ref * float(p.scale_a) * float(p.scale_b)
    if bias:
        ref = ref + row.double()
    p.c.fill_(float("nan"))
    tuner.run(T05, p, c); torch.cuda.synchronize()
    got = p.c.double().clone()
    rel = ((got - ref).norm() / ref.norm()).item()
    rec = dict(dtype=dtype, m=m, n=n, k=k, cfg=c, bias=bias, rel=rel, nan=bool(torch.isnan(got).any()))
    out["checks"].append(rec)
    print("check", dtype, m, n, k, c["BM"], c["BN"], c.get("PAD", ""), bias, f"{rel:.2e}", rec["nan"], flush=True)


def timed(dtype, m, n, k, cfgs):
    p = command.problem(dtype, m, n, k)
    trial = tuner.trial_problem(p)
    d = tuning.choose(p, "auto")
    ref = torch.empty(m, n, device="cuda", dtype=p.c.dtype if dtype != "fp8" else torch.bfloat16)
    fns, names = [lambda: tuner.run(d.rung, trial, d.config)], [f"shipped {d.rung[:5]} {d.config}"]
    for name, c in cfgs:
        if dtype == "fp8":
            c = dict(c, BK=128)
        fns.append(lambda c=c: tuner.run(T05, trial, c)); names.append(name)
    if dtype == "fp8":
        fns.append(lambda: torch._scaled_mm(p.a, p.b, scale_a=p.scale_a, scale_b=p.scale_b, out_dtype=torch.bfloat16))
    else:
        fns.append(lambda: torch.matmul(p.a, p.b, out=ref))
    names.append("cuBLAS")
    for f in fns:
        f()
    torch.cuda.synchronize()
    ms = timer.settle(fns, budget_ms=150, graph=False)
    rec = dict(dtype=dtype, m=m, n=n, k=k, us={nm: round(x * 1e3, 2) for nm, x in zip(names, ms)})
    out["timings"].append(rec)
    print("time", dtype, m, n, k, json.dumps(rec["us"]), flush=True)


t0 = time.time()
for args in (("bf16", 1000, 1000, 1000, W4), ("bf16", 304, 500, 704, W96), ("fp16", 3000, 3000, 3000, W3),
             ("bf16", 1536, 1536, 1536, W2), ("fp8", 1024, 1536, 2048, W4), ("bf16", 776, 1232, 4320, W4, True),
             ("fp8", 1000, 1000, 1024, W96, True), ("bf16", 3000, 3000, 3000, dict(W4, PAD="b"))):
    try:
        check(*args)
    except Exception as e:
        print("check failed", args[:4], type(e).__name__, str(e)[:600], flush=True)
        out["checks"].append(dict(args=str(args), error=f"{type(e).__name__}: {str(e)[:800]}"))
print("checks", round(time.time() - t0), "s", flush=True)
json.dump(out, open(os.environ["OUT"] + "/wide.json", "w"), indent=1)
plain = [("192x192 s4", W4), ("192x192 s3", W3), ("192x96 s5", W96), ("128x192 c2", W2)]
padb = [(n + " PADb", dict(c, PAD="b")) for n, c in plain[:2] + plain[3:]]
for dtype, m, n, k, cfgs in (
        ("bf16", 3000, 3000, 3000, plain + padb), ("bf16", 3072, 3072, 3072, plain),
        ("bf16", 1536, 1536, 1536, plain), ("fp16", 1536, 1536, 1536, plain),
        ("bf16", 3000, 5000, 7000, plain + padb), ("bf16", 5000, 3000, 2000, plain + padb),
        ("fp16", 3000, 3000, 3000, plain + padb), ("bf16", 4096, 4096, 4096, plain),
        ("bf16", 2048, 2048, 2048, plain), ("bf16", 1024, 1024, 8192, plain), ("fp8", 3000, 3000, 3000, plain[:2]),
        ("fp8", 1536, 1536, 1536, plain)):
    try:
        timed(dtype, m, n, k, cfgs)
    except Exception as e:
        print("time failed", dtype, m, n, k, type(e).__name__, str(e)[:300], flush=True)
    json.dump(out, open(os.environ["OUT"] + "/wide.json", "w"), indent=1)
print("total", round(time.time() - t0), "s")
