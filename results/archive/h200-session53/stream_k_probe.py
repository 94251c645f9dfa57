"""Probe: t05 with stream-K (SK) against t05 without and cuBLAS: correctness on awkward shapes, then
device time at the wave-quantised shapes (settled, interleaved)."""
import json, os, time
import torch
from tilegemm.tuning import command, timer, tuner
from tilegemm.kernels.tensorcore import _problem as P

out = dict(checks=[], timings=[])
T05 = "tc_warp_specialized"
base16 = dict(BM=128, BN=256, BK=64, STAGES=3, SPLIT=1, CONSUMERS=1, GROUP_M=8)
c192 = dict(BM=192, BN=128, BK=64, STAGES=4, SPLIT=1, CONSUMERS=3, GROUP_M=8)
c2 = dict(BM=128, BN=256, BK=64, STAGES=4, SPLIT=2, CONSUMERS=2, GROUP_M=8)
tf = dict(BM=256, BN=128, BK=32, STAGES=4, SPLIT=4, CONSUMERS=1, GROUP_M=8, SWAP=True)
fp8 = dict(BM=128, BN=256, BK=128, STAGES=3, SPLIT=1, CONSUMERS=1, GROUP_M=8)


def check(dtype, m, n, k, cfg, bias=False):
    p = command.problem(dtype, m, n, k)
    if bias:
        row = torch.randn(n, device="cuda").to(p.c.dtype)
        p = P.Problem(p.a, p.b, p.c, p.precision, beta=1.0, c_in=row.expand(m, n))
    ref = p.a.double() @ p.b.double()
    if p.scale_a is not None:
        ref = ref * float(p.scale_a) * float(p.scale_b)
    if bias:
        ref = ref + row.double()
    errs = []
    for sk in (0, 2, 3):
        c = dict(cfg, SK=sk)
        p.c.fill_(float("nan"))
        tuner.run(T05, p, c); torch.cuda.synchronize()
        got = p.c.double().clone()
        tuner.run(T05, p, c); torch.cuda.synchronize()
        same = bool(torch.equal(got, p.c.double()))
        rel = ((got - ref).norm() / ref.norm()).item()
        errs.append(dict(sk=sk, rel=rel, nan=bool(torch.isnan(got).any()), repeat_identical=same))
    rec = dict(dtype=dtype, m=m, n=n, k=k, cfg=cfg, bias=bias, runs=errs)
    out["checks"].append(rec)
    print("check", dtype, m, n, k, cfg["BM"], cfg["BN"], cfg["CONSUMERS"], bias,
          [(e["sk"], f"{e['rel']:.2e}", e["nan"], e["repeat_identical"]) for e in errs], flush=True)


def timed(dtype, m, n, k, cfgs):
    p = command.problem(dtype, m, n, k)
    trial = tuner.trial_problem(p)
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    ref = torch.empty(m, n, device="cuda", dtype=p.c.dtype if dtype != "fp8" else torch.bfloat16)
    fns, names = [], []
    for name, c in cfgs:
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
    print("time", dtype, m, n, k, rec["us"], flush=True)


t0 = time.time()
for args in (("bf16", 304, 512, 704, base16), ("bf16", 1000, 1000, 1000, c192), ("bf16", 1536, 1536, 1536, c192),
             ("fp16", 776, 1232, 4320, c2), ("bf16", 3000, 3000, 3000, dict(base16, PAD="b")),
             ("tf32", 1000, 1200, 900, tf), ("tf32", 3072, 3072, 3072, tf), ("fp8", 1024, 1536, 2048, fp8),
             ("bf16", 5000, 3000, 2000, dict(c2, PAD="b")), ("bf16", 64, 4096, 8192, base16)):
    try:
        check(*args)
    except Exception as e:
        print("check failed", args[:4], type(e).__name__, str(e)[:300], flush=True)
        out["checks"].append(dict(args=str(args), error=f"{type(e).__name__}: {str(e)[:500]}"))
try:
    check("bf16", 1536, 1536, 1536, c192, bias=True)
    check("tf32", 1000, 1200, 900, tf, bias=True)
except Exception as e:
    print("bias check failed", type(e).__name__, str(e)[:300], flush=True)
print("checks", round(time.time() - t0), "s", flush=True)
json.dump(out, open(os.environ["OUT"] + "/sk2.json", "w"), indent=1)
for dtype, m, n, k, cfgs in (
        ("tf32", 3072, 3072, 3072, [("256x128", tf), ("SK2", dict(tf, SK=2)), ("SK3", dict(tf, SK=3))]),
        ("bf16", 1536, 1536, 1536, [("192", c192), ("192 SK2", dict(c192, SK=2)), ("192 SK4", dict(c192, SK=4))]),
        ("bf16", 5000, 3000, 2000, [("128x256 PADb", dict(base16, PAD="b")), ("SK2", dict(base16, PAD="b", SK=2)),
                                    ("c2 PADb SK2", dict(c2, PAD="b", SK=2))]),
        ("bf16", 3000, 5000, 7000, [("c2 PADb", dict(c2, PAD="b")), ("c2 PADb SK2", dict(c2, PAD="b", SK=2))]),
        ("bf16", 4096, 4096, 4096, [("128x256", base16), ("SK2", dict(base16, SK=2))]),
        ("tf32", 4096, 4096, 4096, [("256x128", tf), ("SK2", dict(tf, SK=2))]),
        ("bf16", 2304, 2816, 8192, [("128x256", base16), ("SK2", dict(base16, SK=2)), ("192", c192), ("192 SK2", dict(c192, SK=2))]),
        ("fp8", 3072, 3072, 3072, [("fp8", fp8), ("fp8 SK2", dict(fp8, SK=2))])):
    try:
        timed(dtype, m, n, k, cfgs)
    except Exception as e:
        print("time failed", dtype, m, n, k, type(e).__name__, str(e)[:300], flush=True)
    json.dump(out, open(os.environ["OUT"] + "/sk2.json", "w"), indent=1)
print("total", round(time.time() - t0), "s")
