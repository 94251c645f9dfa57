"""Session 84: where a gemm call's host time goes (cProfile, 300 calls after warm-up), at 64^3: FP8 on BF16
operands (quantised each call: the quantiser, then the torch rule), FP8 on FP8 operands and BF16 (both planned)."""
import cProfile, io, os, pstats, sys, time
import torch
import tilegemm
from tilegemm import dispatch
out = os.environ.get("OUT", "/tmp/out")
a = torch.randn(64, 64, device="cuda").bfloat16(); b = torch.randn(64, 64, device="cuda").bfloat16().t()
a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)
a32, b32 = a.float(), b.float()
from tilegemm.kernels.tensorcore import _convert as Q
dense = Q.dense
def rule(): 
    Q.dense = lambda t: False
    try: return tilegemm.gemm(a, b, precision="fp8")
    finally: Q.dense = dense
cases = {"fp8-quantised": lambda: tilegemm.gemm(a, b, precision="fp8"), "fp8-torch-rule": rule,
         "fp8-inputs": lambda: tilegemm.gemm(a8, b8),
         "bf16": lambda: tilegemm.gemm(a, b),
         "bf16-from-fp32": lambda: tilegemm.gemm(a32, b32, precision="bf16")}
for name, f in cases.items():
    for _ in range(5): f()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(300): f()
    torch.cuda.synchronize()
    us = (time.perf_counter() - t) / 300 * 1e6
    pr = cProfile.Profile(); pr.enable()
    for _ in range(300): f()
    torch.cuda.synchronize(); pr.disable()
    s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(25)
    s2 = io.StringIO(); pstats.Stats(pr, stream=s2).sort_stats("cumulative").print_stats(40)
    print(f"##### {name}: {us:.1f} us a call (no profiler); stats {dict(dispatch.STATS.get('not_planned', {}))}")
    print(s.getvalue()[:6000]); print(s2.getvalue()[:8000])
