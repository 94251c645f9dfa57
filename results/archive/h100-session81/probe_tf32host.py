"""Why TF32 gemm is ~6 us/call slower than BF16 matmul in eager at 256^3..1024^3 on the H100
(library.json: TF32 15.8-17.7 us, BF16 10.5-10.9), while host_us at 64^3 says 9.8.
Per shape and path: host us/call (400 calls, no sync inside), eager us/call (events around 50
calls), kernels per call (torch.profiler), and explain()."""
import json, statistics, sys, time
import torch
import tilegemm
from tilegemm import dispatch

out = {"gpu": torch.cuda.get_device_name(), "rows": []}
torch.manual_seed(0)

def host(fn, calls=400, reps=9):
    ts = []
    for _ in range(reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        ts.append((time.perf_counter() - t0) / calls * 1e6)
        torch.cuda.synchronize()
    return statistics.median(ts)

def eager(fn, calls=50, reps=9):
    ts = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        s.record()
        for _ in range(calls):
            fn()
        e.record(); e.synchronize()
        ts.append(s.elapsed_time(e) / calls * 1e3)
    return statistics.median(ts)

def kernels(fn):
    from torch.profiler import profile, ProfilerActivity
    fn(); torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
        for _ in range(10):
            fn()
        torch.cuda.synchronize()
    names = {}
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA:
            names[ev.name[:60]] = names.get(ev.name[:60], 0) + 1
    cpu = {}
    for ev in prof.key_averages():
        if ev.key.startswith("aten::") or "cuda" in ev.key.lower():
            cpu[ev.key] = ev.count
    return {k: v / 10 for k, v in names.items()}, {k: v / 10 for k, v in cpu.items()}

for n in (64, 128, 256, 512, 1024):
    a32 = torch.rand(n, n, device="cuda") * 2 - 1
    b32 = torch.rand(n, n, device="cuda") * 2 - 1
    a16, b16 = a32.bfloat16(), b32.bfloat16()
    paths = {
        "tf32 gemm": lambda: tilegemm.gemm(a32, b32, precision="tf32"),
        "bf16 matmul": lambda: tilegemm.matmul(a16, b16),
        "bf16 gemm": lambda: tilegemm.gemm(a16, b16),
        "torch tf32": lambda: torch.matmul(a32, b32),
        "torch bf16": lambda: torch.matmul(a16, b16),
    }
    for name, fn in paths.items():
        torch.backends.cuda.matmul.allow_tf32 = name == "torch tf32"
        for _ in range(20):
            fn()
        row = dict(n=n, path=name, host_us=round(host(fn), 2), eager_us=round(eager(fn), 2))
        try:
            row["kernels"], row["cpu_ops"] = kernels(fn)
        except Exception as e:  # noqa
            row["kernels"] = repr(e)
        out["rows"].append(row)
        print(json.dumps(row), flush=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        from tilegemm.kernels.tensorcore import _problem as P
        for prec, x, y in (("tf32", a32, b32), ("bf16", a16, b16)):
            c = torch.empty(n, n, device="cuda", dtype=x.dtype)
            print(n, prec, dispatch.explain_problem(P.Problem(x, y, c, prec)), flush=True)
    except Exception as e:
        print("explain:", repr(e))

# cProfile of the TF32 repeated call at 512^3
import cProfile, pstats, io
a32 = torch.rand(512, 512, device="cuda"); b32 = torch.rand(512, 512, device="cuda")
fn = lambda: tilegemm.gemm(a32, b32, precision="tf32")
for _ in range(50): fn()
pr = cProfile.Profile(); pr.enable()
for _ in range(2000): fn()
pr.disable(); torch.cuda.synchronize()
s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(18); print(s.getvalue()[:5000])
a16 = a32.bfloat16(); b16 = b32.bfloat16()
fn = lambda: tilegemm.matmul(a16, b16)
for _ in range(50): fn()
pr = cProfile.Profile(); pr.enable()
for _ in range(2000): fn()
pr.disable(); torch.cuda.synchronize()
s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(18); print(s.getvalue()[:5000])
import os
json.dump(out, open(os.environ.get("OUT", "/tmp") + "/probe_tf32host.json", "w"), indent=1)
