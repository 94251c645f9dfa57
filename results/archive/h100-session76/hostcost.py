"""Host time per call, back to back: 400 calls, no sync inside, median of 15 (µs per call)."""
import sys, time, statistics, json
import torch, tilegemm
res = {}
for dt in (torch.bfloat16, torch.float32):
    a = torch.randn(64, 64, device="cuda", dtype=dt); b = torch.randn(64, 64, device="cuda", dtype=dt)
    o = torch.empty(64, 64, device="cuda", dtype=dt)
    calls = [("matmul", lambda: tilegemm.matmul(a, b)), ("matmul out", lambda: tilegemm.matmul(a, b, out=o)),
             ("torch.mm", lambda: torch.mm(a, b))]
    if dt is torch.bfloat16:
        calls.append(("gemm c", lambda: tilegemm.gemm(a, b, c=o, beta=1.0)))
        calls.append(("gemm", lambda: tilegemm.gemm(a, b)))
    for name, fn in calls:
        for _ in range(50): fn()
        torch.cuda.synchronize()
        ts = []
        for _ in range(15):
            t0 = time.perf_counter()
            for _ in range(400): fn()
            torch.cuda.synchronize()
            ts.append((time.perf_counter() - t0) / 400 * 1e6)
        res[f"{name} {str(dt)[6:]}"] = statistics.median(ts)
print(sys.argv[1], json.dumps({k: round(v, 2) for k, v in res.items()}))
