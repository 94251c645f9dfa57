"""Correctness of the database's picks at ragged decode-batch shapes: tilegemm.matmul on the database in place
(nearest buckets), BF16 and FP16, both layouts, M from the env (MS), against an FP32 product."""
import itertools, os, torch, tilegemm

bad = n_ok = 0
ms = [int(x) for x in os.environ.get("MS", "24,32,40,100,128,129").split(",")]
shapes = [(64, 4096), (1000, 4100), (4095, 4097), (14336, 4096), (28672, 8192), (8192, 28672), (130, 264), (4096, 4096)]
for dt, lay, m, (n, k) in itertools.product((torch.bfloat16, torch.float16), "tn", ms, shapes):
    a = torch.randn(m, k, device="cuda", dtype=dt)
    b = torch.randn(n, k, device="cuda", dtype=dt).t() if lay == "t" else torch.randn(k, n, device="cuda", dtype=dt)
    ref = a.float() @ b.float()
    got = tilegemm.matmul(a, b)
    rel = ((got.float() - ref).norm() / ref.norm()).item()
    if not rel < 1e-2:
        bad += 1; print("BAD matmul", dt, lay, m, n, k, rel, tilegemm.explain(a, b).splitlines()[0])
    else:
        n_ok += 1
print(f"ok {n_ok}, bad {bad}")
