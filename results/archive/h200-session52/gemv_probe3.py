"""Session 52 probe: k17's decode form with K split over a block's warps (ks) and W's next step
loaded ahead (ahead), against the shipped forms and cuBLAS FP32 (TF32 off). Device clock:
do_bench, L2 flushed, median, µs."""
import json, os, time, sys
import torch, triton
from numba import cuda
from tilegemm.kernels.simt import k17_splitk_unrolled as k17
from tilegemm.kernels.simt._common import configure

torch.backends.cuda.matmul.allow_tf32 = False
FORMS = {1: [(4, 2, 1), (4, 1, 1), (8, 2, 2), (8, 1, 2), (4, 1, 4), (8, 1, 4), (8, 2, 4)],
         4: [(8, 2, 1), (4, 2, 1), (4, 1, 1), (8, 2, 2), (8, 1, 2), (4, 1, 2)],
         8: [(4, 4, 1), (4, 2, 1), (8, 4, 2), (8, 2, 2), (4, 2, 2)],
         16: [(8, 2, 1), (4, 4, 1), (4, 2, 1), (8, 2, 2)]}
FORMS[2] = FORMS[1]

def bench(fn):
    return triton.testing.do_bench(fn, warmup=25, rep=120, return_mode="median") * 1e3

x = torch.randn(8192, 8192, device="cuda"); t0 = time.time()
while time.time() - t0 < 2:
    x @ x
torch.cuda.synchronize()
out = []
for n, k in [(1024, 4096), (4096, 4096), (14336, 4096), (4096, 14336), (1024, 8192), (28672, 8192)]:
    for m in (1, 2, 4, 8, 16):
        torch.manual_seed(0)
        x, w = torch.randn(m, k, device="cuda"), torch.randn(n, k, device="cuda")
        ref = x.double() @ w.double().t()
        dx, dw = cuda.as_cuda_array(x), cuda.as_cuda_array(w)
        R = 1 << (m - 1).bit_length()
        rec = dict(m=m, n=n, k=k, torch=round(bench(lambda: torch.matmul(x, w.t())), 2),
                   shipped=list(k17.gemv_form(m, n) or ()))
        errs = []
        for warps, cols, ks in FORMS[R]:
            blocks = triton.cdiv(n, warps // ks * cols)
            if blocks < 32:
                continue
            for ahead in (False, True):
                kern = k17.gemv_for("float32", R, cols, warps, False, ks, ahead)
                y = torch.full((m, n), float("nan"), device="cuda"); dy = cuda.as_cuda_array(y)
                f = lambda: configure(kern, (blocks,), 32 * warps)(dx, dw, dy, dy)
                f(); torch.cuda.synchronize()
                errs.append(float((y.double() - ref).norm() / ref.norm()))
                rec[f"w{warps}c{cols}k{ks}{'a' if ahead else ''}"] = round(bench(f), 2)
        rec["max_err"] = max(errs)
        print(json.dumps(rec), flush=True)
        out.append(rec)
kinfo = {}
for R, forms in FORMS.items():
    for warps, cols, ks in forms:
        for ahead in (False, True):
            for ck in k17.gemv_for("float32", R, cols, warps, False, ks, ahead).overloads.values():
                g = lambda a: (getattr(ck, a)() if callable(getattr(ck, a)) else getattr(ck, a))
                try:
                    kinfo[f"R{R}w{warps}c{cols}k{ks}{'a' if ahead else ''}"] = [g("regs_per_thread"), g("local_mem_per_thread")]
                except Exception as e:
                    kinfo[f"R{R}w{warps}c{cols}k{ks}"] = repr(e)[:80]
print(json.dumps(kinfo), flush=True)
json.dump(dict(gpu=torch.cuda.get_device_name(0), date=time.strftime("%Y-%m-%dT%H:%M:%S"), torch=torch.__version__,
               clock="triton.testing.do_bench, L2 flushed, median, us", records=out, kernels=kinfo),
          open(os.path.join(os.environ.get("OUT", "."), "gemv-forms3.json"), "w"), indent=1)
