"""Session 50 probe: FP32 x @ W.t() at decode sizes (M <= 16): the decode form (k17 gemv) against
the tiles reading W's rows in place, the copy path (reads_wt off) and torch (cuBLAS FP32, TF32 off).
Eager clock: back-to-back calls between CUDA events, 5 rounds alternated, medians."""
import json, os, statistics, time
import torch
import tilegemm
from tilegemm import dispatch, registry
from tilegemm.kernels.simt import k17_splitk_unrolled as k17

torch.backends.cuda.matmul.allow_tf32 = False
K17 = registry.get("splitk_unrolled")
SKINNY = k17.k13.SKINNY_ROWS


def mode(name):
    object.__setattr__(K17, "reads_wt", name != "old")
    k17.k13.SKINNY_ROWS = 0 if name == "tiles" else SKINNY
    dispatch.reset()


def per_call_us(fn, n):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(n):
        fn()
    e.record()
    e.synchronize()
    return s.elapsed_time(e) * 1e3 / n


out = []
for m, n, k in [(1, 4096, 4096), (4, 4096, 4096), (8, 4096, 4096), (16, 4096, 4096), (1, 14336, 4096),
                (1, 4096, 14336), (16, 14336, 4096), (1, 64, 64), (16, 1024, 1000)]:
    torch.manual_seed(0)
    x, w = torch.randn(m, k, device="cuda"), torch.randn(n, k, device="cuda")
    ref = x.double() @ w.double().t()
    rec = dict(m=m, n=n, k=k)
    names = ("torch", "gemv", "tiles", "old")
    for name in names:
        if name != "torch":
            mode(name)
        y = torch.matmul(x, w.t()) if name == "torch" else tilegemm.matmul(x, w.t())
        rec[f"err_{name}"] = float((y.double() - ref).norm() / ref.norm())
    rounds = {name: [] for name in names}
    for _ in range(5):
        for name in names:
            if name == "torch":
                fn = lambda: torch.matmul(x, w.t())
            else:
                mode(name)
                fn = lambda: tilegemm.matmul(x, w.t())
            fn(); fn(); torch.cuda.synchronize()
            rounds[name].append(per_call_us(fn, 300))
    for name in names:
        rec[f"{name}_us"] = statistics.median(rounds[name])
    print(json.dumps({a: (round(b, 3) if isinstance(b, float) else b) for a, b in rec.items()}), flush=True)
    out.append(rec)
mode("gemv")
lin_out = []
for m, n, k in [(1, 4096, 4096), (16, 4096, 4096)]:
    lin = torch.nn.Linear(k, n).cuda()
    x = torch.randn(m, k, device="cuda")
    rounds = {"torch": [], "patched": []}
    with torch.no_grad():
        ref = x.double() @ lin.weight.double().t() + lin.bias.double()
        with tilegemm.patch(lin):
            y = lin(x); y = lin(x)
        for _ in range(5):
            rounds["torch"].append(per_call_us(lambda: lin(x), 300))
            with tilegemm.patch(lin):
                lin(x)
                rounds["patched"].append(per_call_us(lambda: lin(x), 300))
    rec = dict(m=m, n=n, k=k, err=float((y.double() - ref).norm() / ref.norm()),
               torch_us=statistics.median(rounds["torch"]), patched_us=statistics.median(rounds["patched"]))
    print(json.dumps(rec), flush=True)
    lin_out.append(rec)
json.dump(dict(gpu=torch.cuda.get_device_name(0), date=time.strftime("%Y-%m-%dT%H:%M:%S"), torch=torch.__version__,
               matmul=out, linear=lin_out), open(os.path.join(os.environ.get("OUT", "."), "fp32-decode-probe.json"), "w"),
          indent=1)
