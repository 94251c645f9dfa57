"""Correctness of the new decode picks and tiles at ragged shapes: tilegemm.matmul (shipped database,
nearest buckets) and each new tile forced through run_problem, against an FP32 product."""
import itertools, torch, tilegemm
from tilegemm import dispatch
from tilegemm.tuning.command import problem

bad = n_ok = 0
shapes = [(64, 4096), (1000, 4100), (4095, 4097), (14336, 4096), (28672, 8192), (8192, 28672), (130, 264), (4096, 4096)]
for dt, lay, m, (n, k) in itertools.product((torch.bfloat16, torch.float16), "tn", (1, 3, 8, 13, 16), shapes):
    a = torch.randn(m, k, device="cuda", dtype=dt)
    b = torch.randn(n, k, device="cuda", dtype=dt).t() if lay == "t" else torch.randn(k, n, device="cuda", dtype=dt)
    ref = a.float() @ b.float()
    got = tilegemm.matmul(a, b)
    rel = ((got.float() - ref).norm() / ref.norm()).item()
    if not rel < 1e-2:
        bad += 1; print("BAD matmul", dt, lay, m, n, k, rel, tilegemm.explain(a, b).splitlines()[0])
    else:
        n_ok += 1
new = [("tc_tma_persistent", dict(BM=16, BN=128, BK=128, GROUP_M=8, num_warps=4, num_stages=4, C_TMA=True)),
       ("tc_tma_persistent", dict(BM=16, BN=64, BK=256, GROUP_M=8, num_warps=4, num_stages=4, C_TMA=True)),
       ("tc_persistent", dict(BM=16, BN=128, BK=128, GROUP_M=8, num_warps=4, num_stages=4))]
for (rung, c), swap, lay, m, (n, k) in itertools.product(new, (True, False), "tn", (1, 5, 16), shapes[:3] + shapes[6:]):
    p = problem("bf16", m, n, k, lay)
    cfg = dict(c, SWAP=True, REG_A=False) if swap else dict(c)
    try:
        got = dispatch.run_problem(p, rung, config=cfg)
    except Exception as e:
        print("refused", rung, cfg, lay, m, n, k, type(e).__name__, str(e)[:100]); continue
    ref = p.a.float() @ p.b.float()
    rel = ((p.c.float() - ref).norm() / ref.norm()).item()
    ran = (got.get("kernel"), got.get("source"))
    if not rel < 1e-2:
        bad += 1; print("BAD forced", rung, cfg, lay, m, n, k, rel, ran)
    else:
        n_ok += 1
print(f"ok {n_ok}, bad {bad}")
