"""Session 52: k17's decode forms, session 51's table (old) against this session's (new: K split over
a block's warps for narrow weights; 4 warps of 4 columns at 16 rows past 160 columns an SM), through
the public API (tilegemm.matmul(x, w.t()), FP32), with torch.matmul (cuBLAS FP32, TF32 off) in the
same rounds; three rounds, the order of old and new alternated. Eager: 200 back-to-back calls
between CUDA events, per call. Device: do_bench (L2 flushed, median). Each figure the median of the
rounds."""
import json, os, statistics, time
import torch, triton
import tilegemm
from tilegemm import dispatch
from tilegemm.kernels.simt import k17_splitk_unrolled as k17

torch.backends.cuda.matmul.allow_tf32 = False
F = k17.GemvForm
OLD = {1: (F(4, 2), F(4, 1)), 2: (F(4, 2), F(4, 1)), 4: (F(8, 2), F(4, 2), F(4, 1)), 8: (F(4, 4), F(4, 2)),
       16: (F(8, 2), F(4, 4), F(4, 2))}
NEW = dict(k17.GEMV_FORMS)

def per_call(fn, reps=200):
    fn(); fn(); torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(reps):
        fn()
    e.record(); e.synchronize()
    return s.elapsed_time(e) * 1e3 / reps

def dev(fn):
    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median") * 1e3

x = torch.randn(8192, 8192, device="cuda"); t0 = time.time()
while time.time() - t0 < 2:
    x @ x
torch.cuda.synchronize()
shapes = [(m, n, k) for n, k in [(1024, 4096), (1024, 8192)] for m in (1, 2, 4, 8, 16)]
shapes += [(16, 28672, 8192), (12, 28672, 8192), (16, 14336, 4096), (1, 256, 4096), (1, 128, 4096), (4, 2048, 4096),
           (1, 2048, 4096)]
out = []
for m, n, k in shapes:
    torch.manual_seed(0)
    x, w = torch.randn(m, k, device="cuda"), torch.randn(n, k, device="cuda")
    ref = x.double() @ w.double().t()
    rec = dict(m=m, n=n, k=k)
    runs = {v: {"eager": [], "device": []} for v in ("old", "new", "torch")}
    for rnd in range(3):
        for v in (("old", "new") if rnd % 2 == 0 else ("new", "old")):
            k17.GEMV_FORMS = OLD if v == "old" else NEW
            dispatch._PLANS.clear()
            y = tilegemm.matmul(x, w.t())
            rec[f"{v}_err"] = float((y.double() - ref).norm() / ref.norm())
            rec[f"{v}_form"] = k17.gemv_form(m, n)
            fn = lambda: tilegemm.matmul(x, w.t())
            runs[v]["eager"].append(per_call(fn)); runs[v]["device"].append(dev(fn))
        th = lambda: torch.matmul(x, w.t())
        runs["torch"]["eager"].append(per_call(th)); runs["torch"]["device"].append(dev(th))
    for v, r in runs.items():
        for mode, xs in r.items():
            rec[f"{v}_{mode}"] = statistics.median(xs); rec[f"{v}_{mode}_runs"] = xs
    print(m, n, k, rec["old_form"], rec["new_form"],
          " ".join("%s %.1f/%.1f/%.1f" % (mode, rec[f"old_{mode}"], rec[f"new_{mode}"], rec[f"torch_{mode}"])
                   for mode in ("eager", "device")), "err %.1e" % rec["new_err"], flush=True)
    out.append(rec)
json.dump(dict(gpu=torch.cuda.get_device_name(0), date=time.strftime("%Y-%m-%dT%H:%M:%S"), torch=torch.__version__,
               triton=triton.__version__, clocks=dict(eager="200 back-to-back calls between CUDA events, per call",
                                                      device="triton.testing.do_bench, L2 flushed, median"),
               rounds=3, records=out),
          open(os.path.join(os.environ.get("OUT", "."), "gemv-ab.json"), "w"), indent=1, default=list)
