"""Session 52, last probe: more warps sharing K for narrow weights at 1 and 2 rows (the shipped
form first), against torch.matmul (cuBLAS FP32, TF32 off). Kernel only; device clock: do_bench,
L2 flushed, median of 3 rounds, µs."""
import json, os, statistics, time
import torch, triton
from numba import cuda
from tilegemm.kernels.simt import k17_splitk_unrolled as k17
from tilegemm.kernels.simt._common import configure

torch.backends.cuda.matmul.allow_tf32 = False
F = k17.GemvForm
FORMS = [F(8, 1, 4), F(8, 1, 8), F(16, 1, 8), F(16, 2, 8), F(16, 1, 4), F(16, 1, 16), F(4, 1, 4), F(8, 2, 4)]
b = lambda f: triton.testing.do_bench(f, warmup=25, rep=100, return_mode="median") * 1e3
x = torch.randn(8192, 8192, device="cuda"); t0 = time.time()
while time.time() - t0 < 2:
    x @ x
torch.cuda.synchronize()
out = []
for m, n, k in [(1, 1024, 4096), (1, 2048, 4096), (1, 1024, 8192), (2, 1024, 4096), (1, 4096, 4096), (1, 512, 4096)]:
    x, w = torch.randn(m, k, device="cuda"), torch.randn(n, k, device="cuda")
    ref = x.double() @ w.double().t()
    dx, dw = cuda.as_cuda_array(x), cuda.as_cuda_array(w)
    R = 1 << (m - 1).bit_length()
    rec = dict(m=m, n=n, k=k, shipped=str(k17.gemv_form(m, n)))
    fns = {"torch": lambda: torch.matmul(x, w.t())}
    for f in FORMS:
        try:
            kern = k17.gemv_for("float32", R, f.cols, f.warps, False, f.ks)
        except ValueError:
            continue
        y = torch.full((m, n), float("nan"), device="cuda"); dy = cuda.as_cuda_array(y)
        g = (lambda kern=kern, f=f, dy=dy: configure(kern, (f.blocks(n),), 32 * f.warps)(dx, dw, dy, dy))
        g(); torch.cuda.synchronize()
        assert float((y.double() - ref).norm() / ref.norm()) < 1e-5, f
        fns[f"w{f.warps}c{f.cols}k{f.ks}"] = g
    for name, g in fns.items():
        rec[name] = round(statistics.median([b(g) for _ in range(3)]), 2)
    print(json.dumps(rec), flush=True); out.append(rec)
json.dump(dict(gpu=torch.cuda.get_device_name(0), date=time.strftime("%Y-%m-%dT%H:%M:%S"), torch=torch.__version__,
               clock="triton.testing.do_bench, L2 flushed, median of 3 rounds, us", records=out),
          open(os.path.join(os.environ.get("OUT", "."), "narrow-forms.json"), "w"), indent=1)
