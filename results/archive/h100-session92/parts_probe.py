"""Per-call host µs of each part of gemm(a, b, precision='tf32')'s fast path at 256³ (H100)."""
import statistics, time, torch, tilegemm
from tilegemm import dispatch as D

def per(fn, calls=4000, reps=7):
    for _ in range(200): fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(calls): fn()
        ts.append((time.perf_counter() - t0) / calls * 1e6)
        torch.cuda.synchronize()
    return round(statistics.median(ts), 3)

torch.backends.cuda.matmul.allow_tf32 = True
for n in (256, 512):
    a = torch.rand(n, n, device="cuda"); b = torch.rand(n, n, device="cuda")
    a16, b16 = a.bfloat16(), b.bfloat16()
    tilegemm.gemm(a, b, precision="tf32"); tilegemm.gemm(a, b, precision="tf32"); tilegemm.matmul(a16, b16); tilegemm.matmul(a16, b16)
    pa, pb = a.data_ptr(), b.data_ptr()
    key = D.gemm_key(a, b, pa, pb, "tf32", None, 1.0, 0.0, None, None, None, "auto", True)
    plan = D._PLANS[key]
    print(n, "plan", type(plan).__name__, "launches", len(plan.launches), "direct", plan.direct, [l.name for l in plan.launches])
    launch = plan.launches[0]
    c = torch.empty(n, n, device="cuda")
    stream = torch.cuda.current_stream().cuda_stream
    addrs = (pa, pb, c.data_ptr(), c.data_ptr(), 0, 0)
    r = {}
    r["torch.matmul tf32"] = per(lambda: torch.matmul(a, b))
    r["torch.matmul bf16"] = per(lambda: torch.matmul(a16, b16))
    r["api.gemm tf32"] = per(lambda: tilegemm.gemm(a, b, precision="tf32"))
    r["api.matmul bf16"] = per(lambda: tilegemm.matmul(a16, b16))
    r["fast_gemm"] = per(lambda: D.fast_gemm(a, b, "tf32", None, 1.0, 0.0, None, None, None, "auto", True))
    r["plan.run"] = per(lambda: plan.run(pa, pb, None, 0, 0))
    r["launch (bound)"] = per(lambda: launch(addrs, stream))
    r["torch.empty_strided"] = per(lambda: torch.empty_strided((n, n), (n, 1), dtype=torch.float32, device="cuda"))
    r["D._empty_strided"] = per(lambda: D._empty_strided((n, n), (n, 1), dtype=torch.float32, device=plan.device))
    r["gemm_key"] = per(lambda: D.gemm_key(a, b, pa, pb, "tf32", None, 1.0, 0.0, None, None, None, "auto", True))
    r["matmul_key"] = per(lambda: D.matmul_key(a, b, pa, pb))
    r["_raw_stream+_current_device"] = per(lambda: (D._raw_stream(0), D._current_device()))
    r["torch.empty_like"] = per(lambda: torch.empty_like(c))
    print(n, r, flush=True)
