"""t05 OVERLAP (promoted FP8, the promotion overlapped with the next k-step's wgmma) against the
implicit promoted form and the fast form: error (one-signed and random, odd and ragged k-step
counts) and device time (tuner's timer, L2 flushed, held)."""
import json, os, sys
import torch, triton
from tilegemm.bench.library import operands
from tilegemm.kernels.tensorcore import _problem as P
from tilegemm.tuning import tuner, timer
T05 = "tc_warp_specialized"
out = dict(gpu=torch.cuda.get_device_name(), err={}, ms={})
def cfg(bm, bn, stages, cons, **kw):
    return dict(BM=bm, BN=bn, BK=128, STAGES=stages, SPLIT=1, CONSUMERS=cons, GROUP_M=8, **kw)
C = {"192x128c3": cfg(192, 128, 4, 3), "128x128c1": cfg(128, 128, 6, 1), "128x128c1 ov": cfg(128, 128, 6, 1, OVERLAP=True),
     "128x128c2": cfg(128, 128, 5, 2), "128x128c2 ov": cfg(128, 128, 5, 2, OVERLAP=True),
     "128x128c2s4 ov": cfg(128, 128, 4, 2, OVERLAP=True), "128x256c1": cfg(128, 256, 3, 1)}
def prob(a, b, sa, sb, fast):
    return P.Problem(a, b, torch.empty(a.shape[0], b.shape[1], device="cuda", dtype=torch.bfloat16), "fp8",
                     scale_a=sa, scale_b=sb, fast_accum=fast)
def rel(c, ref): return ((c.double() - ref).norm() / ref.norm()).item()
g = torch.Generator(device="cuda").manual_seed(1)
one = torch.ones(1, device="cuda")
# errors: one-signed (K 8192: 64 steps; 8320: 65, odd; 8200: ragged tail)
for k in (8192, 8320, 8208, 128, 256):
    a = (torch.rand(256, k, device="cuda", generator=g) * 224 + 224).to(torch.float8_e4m3fn)
    b = (torch.rand(512, k, device="cuda", generator=g) * 224 + 224).to(torch.float8_e4m3fn).t()
    ref = a.double() @ b.double()
    for name in ("128x128c1", "128x128c1 ov", "128x128c2 ov"):
        for fast in ((False, True) if "ov" not in name else (False,)):
            pc = P.Problem(a, b, torch.empty(256, 512, device="cuda", dtype=torch.float32), "fp8", scale_a=one, scale_b=one, fast_accum=fast)
            try:
                tuner.run(T05, pc, C[name]); torch.cuda.synchronize()
                out["err"][f"onesigned K{k} {name} fast={fast}"] = rel(pc.c, ref)
            except Exception as e:
                out["err"][f"onesigned K{k} {name} fast={fast}"] = repr(e)[:300]
    for fast in (True, False):
        out["err"][f"onesigned K{k} _scaled_mm fast={fast}"] = rel(torch._scaled_mm(a, b, one, one, out_dtype=torch.float32, use_fast_accum=fast), ref)
print(json.dumps(out["err"], indent=0), flush=True)
# random operands, odd M/N (tails), check against float64
for (m, n, k) in ((1000, 1000, 1000), (304, 704, 8320)):
    a8, b8, sa, sb = operands("fp8", m, n, k)
    ref = (a8.double() * sa.double()) @ (b8.double() * sb.double())
    for name in ("128x128c1 ov", "128x128c2 ov", "192x128c3"):
        p = prob(a8, b8, sa, sb, False)
        tuner.run(T05, p, C[name]); torch.cuda.synchronize()
        out["err"][f"rand {m}x{n}x{k} {name}"] = rel(p.c, ref)
    print({k_: v for k_, v in out["err"].items() if k_.startswith("rand")}, flush=True)
shapes = [tuple(int(x) for x in s.split("x")) for s in (sys.argv[1] if len(sys.argv) > 1 else
          "8192x8192x8192,4096x4096x4096,2048x2048x2048,1024x14336x4096,16384x8192x8192,4096x14336x4096").split(",")]
for (m, n, k) in shapes:
    a8, b8, sa, sb = operands("fp8", m, n, k)
    row = {}
    for name, c in C.items():
        for fast in ((True, False) if "ov" not in name else (False,)):
            p = prob(a8, b8, sa, sb, fast)
            try:
                tuner.run(T05, p, c); torch.cuda.synchronize()
                row[f"{name} {'fast' if fast else 'prom'}"] = round(timer.time_ms(lambda: tuner.run(T05, p, c), budget_ms=150), 4)
            except Exception as e:
                row[f"{name} {'fast' if fast else 'prom'}"] = repr(e)[:120]
    for fast in (True, False):
        row[f"_scaled_mm {'fast' if fast else 'default'}"] = round(timer.time_ms(
            lambda: torch._scaled_mm(a8, b8, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16, use_fast_accum=fast),
            budget_ms=150), 4)
    out["ms"][f"{m}x{n}x{k}"] = row
    print(f"{m}x{n}x{k}", row, flush=True)
    json.dump(out, open(os.path.join(os.environ.get("OUT", "/tmp"), "probe_overlap.json"), "w"), indent=1)
