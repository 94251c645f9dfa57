"""Where a back-to-back call's time goes at small products: host enqueue (GPU held), back-to-back
per call, device per call; ours and the reference; BF16, TF32, FP8. Writes $OUT/eager_probe.json."""
import json, os, statistics, time, sys
import torch
import tilegemm
from tilegemm import hold
from tilegemm.bench.library import _library_call, _reference_call, operands
from tilegemm.bench.timing import L2Flush

flush = L2Flush(framework="torch", kind="read")
stream = torch.cuda.current_stream().cuda_stream
CALLS = 40

def host_us(fn):
    # GPU held: the host's enqueue of CALLS calls
    hold.hold(3000, stream)
    t0 = time.perf_counter()
    for _ in range(CALLS):
        fn()
    t = (time.perf_counter() - t0) / CALLS * 1e6
    torch.cuda.synchronize()
    return t

def b2b_us(fn, do_flush=True):
    if do_flush:
        flush()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(CALLS):
        fn()
    e.record(); e.synchronize()
    return s.elapsed_time(e) / CALLS * 1e3

def queued_us(fn):
    # all CALLS queued behind a hold: GPU time per call back to back, no host in it
    hold.hold(3000, stream)
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(CALLS):
        fn()
    e.record(); e.synchronize()
    return s.elapsed_time(e) / CALLS * 1e3

out = []
sizes = [(64, 64, 64), (256, 256, 256), (384, 384, 384), (512, 512, 512), (128, 1024, 4096), (1024, 1024, 1024)]
for dtype in ("bf16", "tf32", "fp8"):
    for m, n, k in sizes:
        a, b, sa, sb = operands(dtype, m, n, k)
        torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
        fns = dict(ours=_library_call(dtype, a, b, sa, sb), ref=_reference_call(dtype, a, b, sa, sb))
        for f in fns.values():
            for _ in range(5):
                f()
        torch.cuda.synchronize()
        rec = dict(dtype=dtype, m=m, n=n, k=k)
        for name, f in fns.items():
            for what, fn in (("host", host_us), ("b2b", b2b_us), ("b2b_warm", lambda f: b2b_us(f, False)), ("queued", queued_us)):
                vals = [fn(f) for _ in range(9)]
                rec[f"{name}_{what}"] = round(statistics.median(vals), 2)
        out.append(rec)
        print(json.dumps(rec), flush=True)
# a profile of ours at TF32 256^3 and FP8 256^3 back to back: kernel names and durations
from torch.profiler import profile, ProfilerActivity
prof_out = {}
for dtype in ("tf32", "fp8", "bf16"):
    a, b, sa, sb = operands(dtype, 256, 256, 256)
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    for name, f in (("ours", _library_call(dtype, a, b, sa, sb)), ("ref", _reference_call(dtype, a, b, sa, sb))):
        for _ in range(5): f()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
            for _ in range(20): f()
            torch.cuda.synchronize()
        evs = [(e.name[:90], round(e.device_time_total / max(e.count, 1), 2), e.count) for e in p.key_averages() if e.device_time_total > 0]
        prof_out[f"{dtype}/{name}"] = evs
        print(dtype, name, evs, flush=True)
        p.export_chrome_trace(os.path.join(os.environ.get("OUT", "/tmp"), f"trace-{dtype}-{name}.json"))
json.dump(dict(records=out, profile=prof_out, torch=torch.__version__, gpu=torch.cuda.get_device_name()),
          open(os.path.join(os.environ.get("OUT", "/tmp"), "eager_probe.json"), "w"), indent=1)
