"""Session 85: µs a call, back to back, of a product of an operand with itself (now planned) against the same
call on two tensors, and against itself on the slow path (TILEGEMM_FAST_LAUNCH=0: what x @ x took before), 64^3."""
import os, statistics, time
import torch
import tilegemm
from tilegemm import dispatch

x = torch.randn(64, 64, device="cuda").bfloat16(); y = torch.randn(64, 64, device="cuda").bfloat16()
cases = {"matmul bf16": tilegemm.matmul, "gemm bf16": tilegemm.gemm,
         "gemm fp8 from bf16": lambda a, b: tilegemm.gemm(a, b, precision="fp8")}

def us(f, reps=200, batches=7):
    for _ in range(20): f()
    torch.cuda.synchronize()
    per = []
    for _ in range(batches):
        t = time.perf_counter()
        for _ in range(reps): f()
        torch.cuda.synchronize()
        per.append((time.perf_counter() - t) / reps * 1e6)
    return statistics.median(per)

for name, fn in cases.items():
    twin, two = us(lambda: fn(x, x)), us(lambda: fn(x, y))
    os.environ["TILEGEMM_FAST_LAUNCH"] = "0"; dispatch.reset()
    slow = us(lambda: fn(x, x), reps=50)
    del os.environ["TILEGEMM_FAST_LAUNCH"]; dispatch.reset()
    print(f"##### {name}: (x, x) {twin:.1f} us a call, (x, y) {two:.1f}, (x, x) unplanned {slow:.1f}")

# the paired conversions (one launch a kernel for both operands) against each operand's own launches, same run
from tilegemm.kernels.tensorcore import _convert
x32, y32 = x.float(), y.float().t()
conv_cases = {"fp8 from bf16": lambda: tilegemm.gemm(x, y.t(), precision="fp8"),
              "bf16 from fp32": lambda: tilegemm.gemm(x32, y32, precision="bf16")}
paired = _convert.paired
for name, f in conv_cases.items():
    got = {}
    for form in ("paired", "unpaired", "paired", "unpaired"):
        _convert.paired = paired if form == "paired" else (lambda a, b: [*a, *b])
        dispatch.reset()
        got.setdefault(form, []).append(us(f))
    _convert.paired = paired
    print(f"##### {name}: paired {min(got['paired']):.1f} us a call, unpaired {min(got['unpaired']):.1f} "
          f"(each the better of two medians of 7 batches of 200)")

# a quantised FP8 call at sizes where the device sets the pace: ours (paired), FP8 inputs, torch's recipe
from tilegemm.bench.library import _torch_fp8
for m, n, k in ((16, 4096, 4096), (1024, 4096, 4096), (4096, 4096, 4096), (4096, 14336, 4096)):
    a = torch.randn(m, k, device="cuda").bfloat16(); w = torch.randn(n, k, device="cuda").bfloat16()
    a8, w8 = _convert.fp8(a)[0], _convert.fp8(w)[0]
    reps = 200 if m * n * k < 2**33 else 30
    q = us(lambda: tilegemm.gemm(a, w.t(), precision="fp8"), reps)
    i = us(lambda: tilegemm.gemm(a8, w8.t()), reps)
    t = us(lambda: _torch_fp8(a, w.t()), reps)
    print(f"##### quantised {m}x{n}x{k}: ours {q:.1f} us a call, FP8 inputs {i:.1f}, torch recipe {t:.1f} "
          f"(ours / torch {t / q:.3f})")
