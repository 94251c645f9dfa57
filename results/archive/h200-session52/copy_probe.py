"""Session 52: FP32's strided A copied for the SIMT rungs. The copy alone (a transposed 2-D operand
into a C-contiguous buffer): session 51's copy2d (a warp's threads down a column), copy_2d now
(along dst's rows), k17's 32×32 transposing tile (now taken for a transposed A), torch's copy_.
Then matmul(X.t(), B) against matmul on a contiguous A and torch.matmul (cuBLAS FP32, TF32 off).
Device clock: do_bench, L2 flushed, median of 3 rounds, µs."""
import json, os, statistics, time
import numpy as np, torch, triton
from numba import cuda
import tilegemm
from tilegemm import arrays
from tilegemm.kernels.simt import k17_splitk_unrolled as k17

torch.backends.cuda.matmul.allow_tf32 = False

@cuda.jit
def old_copy(s, d):
    i, j = cuda.grid(2)
    if i < d.shape[0] and j < d.shape[1]:
        d[i, j] = s[i, j]

def b(fn):
    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median") * 1e3

x = torch.randn(8192, 8192, device="cuda"); t0 = time.time()
while time.time() - t0 < 2:
    x @ x
torch.cuda.synchronize()
copies, products = [], []
for m, k in [(4096, 4096), (1024, 4096), (4096, 1024), (2048, 2048), (128, 4096)]:
    X = torch.rand(k, m, device="cuda"); src = X.t(); dst = torch.empty(m, k, device="cuda")
    s_nb, d_nb, x_nb = cuda.as_cuda_array(src), cuda.as_cuda_array(dst), cuda.as_cuda_array(X)
    tile = k17.transpose_for(np.dtype(np.float32))
    fns = dict(old=lambda: old_copy[((m + 15) // 16, (k + 15) // 16), (16, 16)](s_nb, d_nb),
               now=lambda: arrays.copy_2d(s_nb, d_nb),
               tile=lambda: tile[(triton.cdiv(m, 32), triton.cdiv(k, 32)), (32, 8)](x_nb, d_nb),
               torch=lambda: dst.copy_(src))
    rec = dict(m=m, k=k)
    for name, f in fns.items():
        dst.zero_(); f(); torch.cuda.synchronize()
        assert torch.equal(dst, src), name
    for name, f in fns.items():
        rec[name] = statistics.median([b(f) for _ in range(3)])
    rec["gbps_tile"] = 2 * 4 * m * k / rec["tile"] / 1e3
    print(json.dumps(rec), flush=True); copies.append(rec)
for m, n, k in [(1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096), (128, 4096, 4096), (4096, 1024, 4096)]:
    at = torch.rand(k, m, device="cuda").t(); ac = at.contiguous(); bb = torch.rand(k, n, device="cuda")
    ref = ac.double() @ bb.double()
    y = tilegemm.matmul(at, bb)
    rec = dict(m=m, n=n, k=k, err=float((y.double() - ref).norm() / ref.norm()))
    runs = {"transposed_a": [], "contiguous_a": [], "torch_transposed_a": []}
    for _ in range(3):
        runs["transposed_a"].append(b(lambda: tilegemm.matmul(at, bb)))
        runs["contiguous_a"].append(b(lambda: tilegemm.matmul(ac, bb)))
        runs["torch_transposed_a"].append(b(lambda: torch.matmul(at, bb)))
    rec.update({kk: statistics.median(v) for kk, v in runs.items()})
    print(json.dumps(rec), flush=True); products.append(rec)
json.dump(dict(gpu=torch.cuda.get_device_name(0), date=time.strftime("%Y-%m-%dT%H:%M:%S"), torch=torch.__version__,
               clock="triton.testing.do_bench, L2 flushed, median of 3 rounds, us", copies=copies, products=products),
          open(os.path.join(os.environ.get("OUT", "."), "fp32-strided-a.json"), "w"), indent=1)
