"""Host µs per call, back to back, of the TF32 and BF16 paths at small squares (H100 eager misses)."""
import cProfile, io, json, os, pstats, statistics, sys, time
import torch
import tilegemm
from tilegemm import dispatch

dev = torch.device("cuda")
out = {}

def per_call(fn, calls=1000, reps=7):
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        ts.append((t1 - t0) / calls * 1e6)
    return round(statistics.median(ts), 2)

def ev(fn, calls=20, reps=15):
    ts = []
    for _ in range(reps):
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(calls):
            fn()
        e.record(); e.synchronize()
        ts.append(s.elapsed_time(e) / calls * 1e3)
    return round(statistics.median(ts), 2)

for n in (64, 256, 384, 512):
    a32 = torch.rand(n, n, device=dev) * 2 - 1
    b32 = torch.rand(n, n, device=dev) * 2 - 1
    a16, b16 = a32.bfloat16(), b32.bfloat16()
    forms = {
        "tf32 gemm": lambda: tilegemm.gemm(a32, b32, precision="tf32"),
        "bf16 matmul": lambda: tilegemm.matmul(a16, b16),
        "bf16 gemm": lambda: tilegemm.gemm(a16, b16),
        "fp32 matmul": lambda: tilegemm.matmul(a32, b32),
        "torch bf16": lambda: torch.matmul(a16, b16),
    }
    torch.backends.cuda.matmul.allow_tf32 = True
    forms["torch tf32"] = lambda: torch.matmul(a32, b32)
    for name, fn in forms.items():
        if name == "fp32 matmul" and n > 256:
            continue
        out[f"{n} {name}"] = dict(host_us=per_call(fn), eager_us=ev(fn))
        print(n, name, out[f"{n} {name}"], flush=True)
    print(n, tilegemm.explain(a32, b32) if hasattr(tilegemm, "explain") else "", flush=True)
    torch.backends.cuda.matmul.allow_tf32 = False

# where a TF32 call's host time goes
a32 = torch.rand(512, 512, device=dev); b32 = torch.rand(512, 512, device=dev)
for _ in range(100):
    tilegemm.gemm(a32, b32, precision="tf32")
pr = cProfile.Profile()
pr.enable()
for _ in range(3000):
    tilegemm.gemm(a32, b32, precision="tf32")
pr.disable()
torch.cuda.synchronize()
s = io.StringIO()
pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(25)
print(s.getvalue()[:6000])
a16 = a32.bfloat16(); b16 = b32.bfloat16()
pr = cProfile.Profile()
pr.enable()
for _ in range(3000):
    tilegemm.matmul(a16, b16)
pr.disable()
s = io.StringIO()
pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(20)
print(s.getvalue()[:5000])
json.dump(out, open(os.path.join(os.environ.get("OUT", "/tmp"), "host_probe.json"), "w"), indent=1)
