"""Fused split-K's last-slice reduction with RED partials in flight (1 = the previous kernel) on the
H200 database's fused entries: cold (L2 flushed, held) and warm (queued back to back) device time,
the reference beside them. Writes $OUT/red_probe.json."""
import json, os, statistics, sys
import torch
from tilegemm import hold, tuning
from tilegemm.kernels.tensorcore import _problem as P, t04_splitk as t04
from tilegemm.tuning import tuner, timer
from tilegemm.bench.library import operands, _reference_call

OUT = os.environ.get("OUT", "/tmp")
stream = torch.cuda.current_stream().cuda_stream
flush = timer._flush_buffer()
rule = t04.reduce_width

def cold(fn, n=15):
    return statistics.median(timer._held_samples(fn, n, flush)) * 1e3

def warm(fn, calls=30, reps=5):
    vals = []
    for _ in range(reps):
        hold.hold(6000, stream)
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(calls):
            fn()
        e.record(); e.synchronize()
        vals.append(s.elapsed_time(e) / calls * 1e3)
    return statistics.median(vals)

SHAPES = [("bf16", 8, 1024, 4096, True), ("bf16", 16, 1024, 4096, True), ("bf16", 64, 1024, 4096, True),
          ("bf16", 16, 1024, 8192, True), ("bf16", 8, 4096, 14336, True), ("bf16", 128, 1024, 4096, False),
          ("bf16", 128, 1024, 8192, False), ("fp8", 16, 1024, 8192, True), ("fp8", 128, 1024, 8192, True),
          ("tf32", 128, 1024, 4096, False), ("tf32", 16, 1024, 4096, False), ("tf32", 256, 1024, 4096, False)]
res = []
for dtype, m, n, k, b_t in SHAPES:
    a, b, sa, sb = operands(dtype, m, n, k)
    if b_t and dtype != "fp8":
        b = b.t().contiguous().t()
    out = torch.bfloat16 if dtype == "fp8" else a.dtype
    c = torch.empty(m, n, dtype=out, device="cuda")
    prec = {"tf32": "tf32", "fp8": "fp8"}.get(dtype) or P.precision_of(a.dtype)
    p = P.Problem(a, b, c, prec, scale_a=sa, scale_b=sb) if dtype == "fp8" else P.Problem(a, b, c, prec)
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    d = tuning.choose(p)
    rec = dict(dtype=dtype, m=m, n=n, k=k, b_t=b_t, rung=d.rung, cfg=d.config, source=d.source)
    if d.rung != "tc_splitk" or not d.config.get("FUSED"):
        rec["skipped"] = "not a fused split"
        res.append(rec); print(rec, flush=True); continue
    split = int(d.config["SPLIT"])
    reds = [r for r in (1, 2, 4) if r <= max(1, 1 << (split - 1).bit_length())]
    rec["rule"] = rule(d.config, split)
    ref = _reference_call(dtype, a, b, sa, sb)
    tp = tuner.trial_problem(p)
    want = (a.float() @ b.float()) if dtype != "fp8" else None
    fns = {}
    for r in reds:
        t04.reduce_width = lambda cfg, s, r=r: r
        tuner.run("tc_splitk", tp, d.config); torch.cuda.synchronize()
        if want is not None:
            rec[f"err{r}"] = float((tp.c.float() - want).abs().max() / want.abs().max())
        rec[f"bits{r}"] = tp.c.float().sum().item()
    t = {r: {"cold": [], "warm": []} for r in reds}
    t["ref"] = {"cold": [], "warm": []}
    for rnd in range(3):
        order = reds + ["ref"] if rnd % 2 == 0 else ["ref"] + reds[::-1]
        for r in order:
            if r == "ref":
                fn = ref
            else:
                t04.reduce_width = lambda cfg, s, r=r: r
                fn = lambda: tuner.run("tc_splitk", tp, d.config)
            t[r]["cold"].append(cold(fn)); t[r]["warm"].append(warm(fn))
    rec["times"] = {str(r): {kk: statistics.median(v) for kk, v in x.items()} for r, x in t.items()}
    res.append(rec)
    print(dtype, m, n, k, "split", split, "rule", rec["rule"],
          {r: (round(x["cold"], 2), round(x["warm"], 2)) for r, x in rec["times"].items()},
          {kk: v for kk, v in rec.items() if kk.startswith("bits")}, flush=True)
t04.reduce_width = rule
json.dump(dict(gpu=torch.cuda.get_device_name(), records=res), open(f"{OUT}/red_probe.json", "w"), indent=1, default=str)
