"""Correctness of the batch-decode picks and tiles at ragged shapes (16 < M <= 64): tilegemm.matmul (the
database in place, nearest buckets) and each new tile forced through run_problem, against an FP32 product."""
import itertools, torch, tilegemm
from tilegemm import dispatch
from tilegemm.tuning.command import problem

bad = n_ok = 0
shapes = [(64, 4096), (1000, 4100), (4095, 4097), (14336, 4096), (28672, 8192), (8192, 28672), (130, 264), (4096, 4096)]
for dt, lay, m, (n, k) in itertools.product((torch.bfloat16, torch.float16), "tn", (17, 33, 48, 63, 64), shapes):
    a = torch.randn(m, k, device="cuda", dtype=dt)
    b = torch.randn(n, k, device="cuda", dtype=dt).t() if lay == "t" else torch.randn(k, n, device="cuda", dtype=dt)
    ref = a.float() @ b.float()
    got = tilegemm.matmul(a, b)
    rel = ((got.float() - ref).norm() / ref.norm()).item()
    if not rel < 1e-2:
        bad += 1; print("BAD matmul", dt, lay, m, n, k, rel, tilegemm.explain(a, b).splitlines()[0])
    else:
        n_ok += 1
T03, T02, T04 = "tc_tma_persistent", "tc_persistent", "tc_splitk"
def c(bm, bn, bk, st, w=4, **kw):
    return dict(BM=bm, BN=bn, BK=bk, GROUP_M=8, num_warps=w, num_stages=st, **kw)
new = [(T03, c(32, 64, 256, 4, C_TMA=True, SWAP=True, REG_A=False)), (T03, c(32, 64, 256, 4, C_TMA=True)),
       (T03, c(64, 128, 128, 4, C_TMA=True)), (T03, c(64, 128, 128, 3, C_TMA=True)), (T03, c(64, 32, 256, 4, C_TMA=True)),
       (T03, c(64, 256, 64, 4, 8, C_TMA=True)), (T03, c(64, 128, 64, 6, C_TMA=True)), (T02, c(64, 128, 128, 4)),
       (T02, c(64, 256, 64, 4, 8)), (T04, c(64, 128, 128, 4, SPLIT=2, FUSED=True, TMA=True)),
       (T04, c(64, 128, 128, 4, SPLIT=2))]
for (rung, cfg), lay, m, (n, k) in itertools.product(new, "tn", (20, 37, 64), shapes[:3] + shapes[6:]):
    p = problem("bf16", m, n, k, lay)
    try:
        got = dispatch.run_problem(p, rung, config=cfg)
    except Exception as e:
        print("refused", rung, cfg, lay, m, n, k, type(e).__name__, str(e)[:100]); continue
    ref = p.a.float() @ p.b.float()
    rel = ((p.c.float() - ref).norm() / ref.norm()).item()
    if not rel < 1e-2:
        bad += 1; print("BAD forced", rung, cfg, lay, m, n, k, rel, (got.get("kernel"), got.get("source")))
    else:
        n_ok += 1
print(f"ok {n_ok}, bad {bad}")
