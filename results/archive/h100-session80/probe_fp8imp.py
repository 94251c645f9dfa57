"""Prototype probe: FP8 accumulation promotion (TILEGEMM_FP8_IMPRECISE) cost and error."""
import json, os, sys
import torch, triton
import tilegemm
from tilegemm.bench.library import operands
v = os.environ.get("TILEGEMM_FP8_IMPRECISE") or "none"
out = dict(variant=v, gpu=torch.cuda.get_device_name(), err={}, ms={})
g = torch.Generator(device="cuda").manual_seed(1)
def rel(c, ref): return ((c.double() - ref).norm() / ref.norm()).item()
one = torch.ones((), device="cuda")
a = (torch.rand(256, 8192, device="cuda", generator=g) * 224 + 224).to(torch.float8_e4m3fn)
b = (torch.rand(512, 8192, device="cuda", generator=g) * 224 + 224).to(torch.float8_e4m3fn).t()
ref = a.double() @ b.double()
for kern in ("tc_tiled", "tc_persistent", "tc_tma_persistent", "tc_splitk", "tc_warp_specialized"):
    try:
        c = tilegemm.gemm(a, b, precision="fp8", kernel=kern, scale_a=1.0, scale_b=1.0, out_dtype="float32")
        out["err"]["onesigned/" + kern] = rel(c, ref)
    except Exception as e:
        out["err"]["onesigned/" + kern] = f"{type(e).__name__}: {str(e)[:200]}"
for fast in (False, True):
    c = torch._scaled_mm(a, b, one, one, out_dtype=torch.float32, use_fast_accum=fast)
    out["err"][f"onesigned/_scaled_mm fast={fast}"] = rel(c, ref)
shapes = [(8192, 8192, 8192), (4096, 4096, 4096), (4096, 14336, 4096), (2048, 2048, 2048), (3072, 5120, 7168),
          (1024, 1024, 8192), (128, 8192, 8192), (512, 4096, 4096), (64, 4096, 4096)]
for (m, n, k) in shapes:
    a8, b8, sa, sb = operands("fp8", m, n, k)
    c = tilegemm.gemm(a8, b8, scale_a=sa, scale_b=sb)
    r64 = (a8.double() * sa.double()) @ (b8.double() * sb.double())
    key = f"{m}x{n}x{k}"
    out["err"]["rand/" + key] = rel(c, r64)
    fns = {"ours": lambda: tilegemm.gemm(a8, b8, scale_a=sa, scale_b=sb),
           "ref": lambda: torch._scaled_mm(a8, b8, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16),
           "ref_fast": lambda: torch._scaled_mm(a8, b8, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16, use_fast_accum=True)}
    res = {}
    for rep in range(3):
        for name, fn in fns.items():
            res.setdefault(name, []).append(triton.testing.do_bench(fn, warmup=10, rep=60))
    out["ms"][key] = {name: sorted(x)[1] for name, x in res.items()}
    print(v, key, {n_: round(x, 4) for n_, x in out["ms"][key].items()}, "err", round(out["err"]["rand/" + key], 6), flush=True)
print(v, {k_: (round(x, 6) if isinstance(x, float) else x) for k_, x in out["err"].items() if k_.startswith("one")})
json.dump(out, open(os.path.join(os.environ["OUT"], f"fp8imp-{v}.json"), "w"), indent=1)
