import statistics, torch
from tilegemm.bench import library as L
clock = L._Clock()
torch.backends.cuda.matmul.allow_tf32 = True
for n in (256, 512):
    rec = L.measure_shape(clock, "tf32", n, n, n, ("eager",), 0.3)
    print(n, "measure_shape:", {k: (round(v * 1e3, 2) if isinstance(v, float) else v) for k, v in rec["eager"].items()}, flush=True)
    torch.backends.cuda.matmul.allow_tf32 = True
    a, b, sa, sb = L.operands("tf32", n, n, n)
    ours, ref = L._library_call("tf32", a, b, sa, sb), L._reference_call("tf32", a, b, sa, sb)
    for f in (ours, ref):
        f(); f()
    for calls in (30,):
        o = clock.eager(ours, 15, calls); r = clock.eager(ref, 15, calls)
        print(n, f"clock.eager x15, {calls} calls: ours {statistics.median(o)*1e3:.2f} ref {statistics.median(r)*1e3:.2f}", flush=True)
        s = L._interleaved([lambda k_, f=ours: clock.eager(f, k_, calls), lambda k_, f=ref: clock.eager(f, k_, calls)], 0.3)
        print(n, f"interleaved: ours {statistics.median(s[0])*1e3:.2f} ref {statistics.median(s[1])*1e3:.2f} (n={len(s[0])})", flush=True)
    # without the flush
    fl = clock.flush
    clock.flush = lambda: None
    o = clock.eager(ours, 15, 30); r = clock.eager(ref, 15, 30)
    print(n, f"no flush: ours {statistics.median(o)*1e3:.2f} ref {statistics.median(r)*1e3:.2f}", flush=True)
    clock.flush = fl
    # flush, then a short sleep-free pause: does the GPU's idle after the flush cost?
    o = clock.eager(ours, 15, 30); r = clock.eager(ref, 15, 30)
    print(n, f"flush again: ours {statistics.median(o)*1e3:.2f} ref {statistics.median(r)*1e3:.2f}", flush=True)
