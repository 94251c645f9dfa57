"""Session 52: FP32 x @ W.t() at decode sizes through the public API (tilegemm.matmul, k17's decode
form for M <= 16 with its shipped forms) against torch.matmul (cuBLAS FP32, TF32 off), three rounds
alternated. Eager: back-to-back calls between CUDA events, per call. Device: do_bench (L2 flushed,
median). Each figure the median of the rounds. Then a patched nn.Linear with bias (eager)."""
import json, os, statistics, time
import torch, triton
import tilegemm
from tilegemm.kernels.simt import k17_splitk_unrolled as k17

torch.backends.cuda.matmul.allow_tf32 = False

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
out = []
for n, k in [(4096, 4096), (14336, 4096), (4096, 14336), (1024, 4096), (28672, 8192), (1024, 8192), (2048, 4096)]:
    for m in (1, 2, 4, 8, 12, 16):
        torch.manual_seed(0)
        x, w = torch.randn(m, k, device="cuda"), torch.randn(n, k, device="cuda")
        ref = x.double() @ w.double().t()
        y = tilegemm.matmul(x, w.t())
        err = float((y.double() - ref).norm() / ref.norm())
        terr = float((torch.matmul(x, w.t()).double() - ref).norm() / ref.norm())
        ours = lambda: tilegemm.matmul(x, w.t())
        theirs = lambda: torch.matmul(x, w.t())
        r = {"eager": ([], []), "device": ([], [])}
        for _ in range(3):
            r["eager"][0].append(per_call(ours)); r["eager"][1].append(per_call(theirs))
            r["device"][0].append(dev(ours)); r["device"][1].append(dev(theirs))
        rec = dict(m=m, n=n, k=k, form=k17.gemv_form(m, n), err=err, torch_err=terr)
        for mode, (a, b) in r.items():
            rec[mode] = dict(ours_us=statistics.median(a), torch_us=statistics.median(b),
                             ratio=statistics.median([q / p for p, q in zip(a, b)]), runs_ours=a, runs_torch=b)
        print(m, n, k, rec["form"], "eager %.1f/%.1f %.3f" % (rec["eager"]["ours_us"], rec["eager"]["torch_us"], rec["eager"]["ratio"]),
              "device %.1f/%.1f %.3f" % (rec["device"]["ours_us"], rec["device"]["torch_us"], rec["device"]["ratio"]), "err %.1e" % err, flush=True)
        out.append(rec)
lin_out = []
for m in (1, 8, 16):
    lin = torch.nn.Linear(4096, 4096).cuda()
    x = torch.randn(m, 4096, device="cuda")
    with torch.no_grad():
        ref = x.double() @ lin.weight.double().t() + lin.bias.double()
        a, b = [], []
        with tilegemm.patch(lin):
            y = lin(x)
        for _ in range(3):
            b.append(per_call(lambda: lin(x)))
            with tilegemm.patch(lin):
                a.append(per_call(lambda: lin(x)))
    rec = dict(m=m, n=4096, k=4096, err=float((y.double() - ref).norm() / ref.norm()), patched_us=statistics.median(a),
               torch_us=statistics.median(b), runs_patched=a, runs_torch=b)
    print("linear", m, "%.1f/%.1f" % (rec["patched_us"], rec["torch_us"]), "err %.1e" % rec["err"], flush=True)
    lin_out.append(rec)
json.dump(dict(gpu=torch.cuda.get_device_name(0), date=time.strftime("%Y-%m-%dT%H:%M:%S"), torch=torch.__version__,
               triton=triton.__version__, clocks=dict(eager="200 back-to-back calls between CUDA events, per call",
                                                      device="triton.testing.do_bench, L2 flushed, median"),
               rounds=3, matmul=out, linear=lin_out),
          open(os.path.join(os.environ.get("OUT", "."), "fp32-decode-api.json"), "w"), indent=1)
