"""Session 50 probe: FP32 x @ W.t() with W's rows read in place (k17 b_rows) against the copy path
(reads_wt off) and torch (cuBLAS FP32, TF32 off); and a patched nn.Linear with bias. Eager clock:
back-to-back calls between CUDA events, 5 rounds alternated, medians."""
import json, os, statistics, sys, time
import torch
import tilegemm
from tilegemm import dispatch, registry

torch.backends.cuda.matmul.allow_tf32 = False
K17 = registry.get("splitk_unrolled")


def reads(on):
    object.__setattr__(K17, "reads_wt", on)
    dispatch.reset()


def per_call_us(fn, n):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(n):
        fn()
    e.record()
    e.synchronize()
    return s.elapsed_time(e) * 1e3 / n


def err(y, ref):
    return float((y.double() - ref).norm() / ref.norm())


out = []
shapes = [(64, 64, 64), (1, 4096, 4096), (16, 4096, 4096), (64, 4096, 4096), (128, 4096, 4096), (1024, 4096, 4096),
          (4096, 4096, 4096), (1, 14336, 4096), (2048, 1024, 4096), (100, 300, 130)]
for m, n, k in shapes:
    torch.manual_seed(0)
    x = torch.randn(m, k, device="cuda")
    w = torch.randn(n, k, device="cuda")
    ref = x.double() @ w.double().t()
    flops = 2 * m * n * k
    calls = max(5, min(2000, int(3e11 / flops / 1.0) if flops else 100))
    calls = 200 if flops < 1e9 else max(5, int(2e12 / flops))
    rec = dict(m=m, n=n, k=k, calls=calls)
    sides = {}
    for name in ("torch", "new", "old"):
        if name == "torch":
            fn = lambda: torch.matmul(x, w.t())
        else:
            reads(name == "new")
            fn = lambda: tilegemm.matmul(x, w.t())
        y = fn(); y = fn(); torch.cuda.synchronize()
        rec[f"err_{name}"] = err(y, ref)
        if name != "torch":
            plan = dispatch._PLANS.get(dispatch.call_key(x, w.t()))
            rec[f"launches_{name}"] = [l.name[-60:] for l in plan.launches] if plan is not None else None
        sides[name] = fn
    for name in sides:
        if name != "torch":
            reads(name == "new"); sides[name](); torch.cuda.synchronize()
        # (plans rebuilt per toggle: time each side right after its own warm call)
    rounds = {name: [] for name in sides}
    for r in range(5):
        for name, fn in sides.items():
            if name != "torch":
                reads(name == "new"); fn(); fn()
            torch.cuda.synchronize()
            rounds[name].append(per_call_us(fn, calls))
    for name in sides:
        rec[f"{name}_us"] = statistics.median(rounds[name])
        rec[f"{name}_rounds"] = rounds[name]
    rec["new_vs_torch"] = rec["torch_us"] / rec["new_us"]
    rec["old_vs_torch"] = rec["torch_us"] / rec["old_us"]
    print(json.dumps({k2: (round(v, 4) if isinstance(v, float) else v) for k2, v in rec.items() if "rounds" not in k2}), flush=True)
    out.append(rec)

# a patched nn.Linear with bias, FP32: host part of the call at 64 -> 64 and eager at larger shapes
reads(True)
lin_out = []
for m, n, k in [(64, 64, 64), (1, 4096, 4096), (64, 4096, 4096), (1024, 4096, 4096), (4096, 4096, 4096)]:
    lin = torch.nn.Linear(k, n).cuda()
    lin.bias.data.uniform_(-4, 4)
    x = torch.randn(m, k, device="cuda")
    ref = x.double() @ lin.weight.double().t() + lin.bias.double()
    calls = 200 if 2 * m * n * k < 1e9 else max(5, int(2e12 / (2 * m * n * k)))
    rounds = {"torch": [], "patched": []}
    with torch.no_grad():
        y0 = lin(x)
        with tilegemm.patch(lin):
            y1 = lin(x); y1 = lin(x)
            key = dispatch.linear_key(x, lin.weight, x.data_ptr(), lin.weight.data_ptr()) + dispatch.bias_key(lin.bias, lin.bias.data_ptr())
            kind = type(dispatch._PLANS.get(key)).__name__
        for r in range(5):
            torch.cuda.synchronize(); rounds["torch"].append(per_call_us(lambda: lin(x), calls))
            with tilegemm.patch(lin):
                lin(x); torch.cuda.synchronize()
                rounds["patched"].append(per_call_us(lambda: lin(x), calls))
    rec = dict(m=m, n=n, k=k, plan=kind, err_torch=err(y0, ref), err_patched=err(y1, ref),
               torch_us=statistics.median(rounds["torch"]), patched_us=statistics.median(rounds["patched"]))
    rec["ratio"] = rec["torch_us"] / rec["patched_us"]
    print(json.dumps({k2: (round(v, 4) if isinstance(v, float) else v) for k2, v in rec.items()}), flush=True)
    lin_out.append(rec)
json.dump(dict(gpu=torch.cuda.get_device_name(0), date=time.strftime("%Y-%m-%dT%H:%M:%S"), torch=torch.__version__,
               matmul=out, linear=lin_out), open(os.path.join(os.environ.get("OUT", "."), "fp32-wt-probe.json"), "w"), indent=1)
