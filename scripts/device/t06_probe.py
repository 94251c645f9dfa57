"""The probe behind docs/perf-notes.md, 42 (session 15; results/archive/h200-t06-probe/): t06 (each
tile) against t04 and cuBLAS on the 8B model's decode products, BF16, B = W^T. Device time: one
CUDA graph of 20 calls, each on another copy of the weight (together past the 60 MB L2, as a
model's layers are), timed with do_bench, median of 3 runs; writes $OUT/t06probe2.json.
On the GPU host: PYTHONPATH=src python3 scripts/device/t06_probe.py"""
import json, os, statistics
import torch, triton
from tilegemm import dispatch
from tilegemm.kernels.tensorcore import _problem as P
SHAPES = [(m, n, k) for m in (1, 2, 4) for (n, k) in ((4096, 4096), (1024, 4096), (14336, 4096), (4096, 14336))]
SHAPES.append((3, 4096, 4096))
CALLS = 20
CFGS = [(2, 1024, 4, 1), (4, 1024, 4, 1), (4, 512, 4, 1), (8, 512, 4, 1), (16, 256, 4, 1), (2, 2048, 8, 1),
        (2, 1024, 4, 8), (4, 1024, 4, 8), (8, 1024, 4, 8), (8, 512, 4, 8), (16, 512, 4, 8), (16, 256, 4, 8),
        (4, 2048, 8, 8), (8, 1024, 8, 8), (2, 1024, 2, 8), (1, 1024, 2, 8)]
out = []
for (m, n, k) in SHAPES:
    copies = max(2, -(-200 * 2**20 // (n * k * 2)))
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    ws = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) for _ in range(copies)]
    c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    ps = [P.Problem(a, w.t(), c, "bf16") for w in ws]
    ref = a.float() @ ws[0].float().t()
    rows = {"cublas": lambda i, ws=ws: torch.mm(a, ws[i].t(), out=c),
            "t04": lambda i, ps=ps: dispatch.run_problem(ps[i], "tc_splitk")}
    for bn, bk, w, f in CFGS:
        cfg = dict(BN=bn, BK=bk, num_warps=w, FOLD=f, num_stages=1)
        rows[f"t06 {bn}x{bk}w{w}f{f}"] = \
            lambda i, cfg=cfg, ps=ps: dispatch.run_problem(ps[i], "tc_gemv", config=cfg)
    for name, fn in rows.items():
        fn(0); torch.cuda.synchronize()
        err = float((c.float() - ref).norm() / ref.norm())
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for j in range(CALLS):
                fn(j % copies)
        ms = statistics.median(triton.testing.do_bench(g.replay, warmup=5, rep=60) for _ in range(3)) / CALLS
        gbs = n * k * 2 / ms / 1e6
        out.append(dict(m=m, n=n, k=k, name=name, ms=ms, gbs=gbs, rel_err=err))
        print(f"{m}x{n}x{k} {name:22s} {ms * 1e3:8.1f} us {gbs:7.0f} GB/s err {err:.1e}", flush=True)
    del ws, ps, rows
    torch.cuda.empty_cache()
    json.dump(out, open(os.path.join(os.environ.get("OUT", "/tmp"), "t06probe2.json"), "w"), indent=1)
