"""Session 56 probe (docs/perf-notes.md, 111): M = 1 with a row-major B (x @ W, W K×N): every form the tuner weighs
(t02, t03, t04, t06 candidates) plus t06 tiles with deeper num_stages, against cuBLAS (TF32 on).
Two device clocks: 'cold' = a CUDA graph of 20 calls each on another copy of B (together past the
60 MB L2), 'warm' = a graph of 50 calls on one B (the tensor-core bench's clock at M = 1).
On the device, from the repository root: python3 results/archive/h200-session56/gemv_probe.py 1x4096x4096,1x1024x4096 tf32
(gemv-tf32-probe.json; 1x14336x4096 tf32 -> gemv-tf32-probe-14336.json; 1x1024x4096,1x1024x8192,1x4096x4096 bf16).
It writes $OUT/gemv-<dtype>-probe.json; the 14336 record was renamed. gemv-tf32-probe.json came from an earlier
version (TF32 only, no dtype field, 14 of the EXTRA06 tiles: not 16×1024, 16×512, 32×512, 32×256 or 8×1024 on 4 warps
with FOLD 1). Each rung's first 16 candidates only (t04 has 40 at these shapes)."""
import json, os, statistics, sys, time
import torch, triton
from tilegemm import dispatch
from tilegemm.kernels.tensorcore import _problem as P
from tilegemm.tuning import space

OUT = os.environ.get("OUT", "/tmp/out")
torch.backends.cuda.matmul.allow_tf32 = True
SHAPES = [tuple(int(x) for x in s.split("x")) for s in (sys.argv[1] if len(sys.argv) > 1 else "1x4096x4096,1x1024x4096").split(",")]
DT = sys.argv[2] if len(sys.argv) > 2 else "tf32"
TD = {"tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[DT]
SZ = torch.tensor([], dtype=TD).element_size()
EXTRA06 = [(16, 1024, 4, 1, 1), (16, 512, 4, 1, 1), (32, 512, 4, 1, 1), (32, 256, 4, 1, 1), (8, 1024, 4, 1, 1), (16, 256, 4, 1, 2), (16, 256, 4, 1, 3), (16, 128, 4, 1, 1), (16, 128, 4, 1, 3), (32, 128, 4, 1, 1),
           (32, 128, 4, 1, 3), (32, 256, 8, 1, 1), (64, 64, 4, 1, 1), (64, 64, 4, 1, 3), (64, 128, 8, 1, 1),
           (8, 512, 4, 1, 1), (16, 512, 8, 1, 1), (8, 256, 4, 1, 1), (16, 256, 8, 1, 1)]
res = []


def timed(fn, copies, calls):
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for j in range(calls):
            fn(j % copies)
    return statistics.median(triton.testing.do_bench(g.replay, warmup=5, rep=40) for _ in range(3)) / calls


for (m, n, k) in SHAPES:
    copies = max(2, -(-200 * 2**20 // (n * k * SZ)))
    a = torch.randn(m, k, device="cuda", dtype=TD)
    bs = [torch.randn(k, n, device="cuda", dtype=TD) for _ in range(copies)]
    c = torch.empty(m, n, device="cuda", dtype=TD)
    ps = [P.Problem(a, b, c, DT) for b in bs]
    ref = a.double() @ bs[0].double()
    forms = {"cublas": lambda i: torch.mm(a, bs[i], out=c)}
    forms["shipped"] = lambda i: dispatch.run_problem(ps[i])
    for rung in (space.T02, space.T03, space.T04, space.T06):
        try:
            cands = space.candidates(rung, ps[0])
        except Exception as e:  # noqa: BLE001
            print(rung, "no candidates", e, flush=True)
            continue
        for cfg in cands[:16]:
            forms[f"{rung} {json.dumps(cfg, sort_keys=True)}"] = lambda i, cfg=cfg, rung=rung: dispatch.run_problem(ps[i], rung, config=cfg)
    for bn, bk, w, f, st in EXTRA06:
        cfg = dict(BN=bn, BK=bk, num_warps=w, FOLD=f, num_stages=st)
        forms[f"tc_gemv {json.dumps(cfg, sort_keys=True)}"] = lambda i, cfg=cfg: dispatch.run_problem(ps[i], "tc_gemv", config=cfg)
    for name, fn in forms.items():
        try:
            t0 = time.time()
            fn(0)
            torch.cuda.synchronize()
            err = float((c.double() - ref).norm() / ref.norm())
            cold = timed(fn, copies, 20)
            warm = timed(lambda i: fn(0), 1, 50)
        except Exception as e:  # noqa: BLE001
            print(f"{m}x{n}x{k} {name} failed {type(e).__name__} {str(e)[:120]}", flush=True)
            continue
        res.append(dict(m=m, n=n, k=k, form=name, cold_us=cold * 1e3, warm_us=warm * 1e3, rel_err=err,
                        gbps_cold=n * k * SZ / cold / 1e6, dtype=DT))
        print(f"{m}x{n}x{k} {name[:90]:90s} cold {cold*1e3:7.2f} warm {warm*1e3:7.2f} err {err:.1e} ({time.time()-t0:.1f}s)", flush=True)
    del bs, ps, forms
    torch.cuda.empty_cache()
    json.dump(res, open(os.path.join(OUT, f"gemv-{DT}-probe.json"), "w"), indent=1)
# the shipped decision, for each shape
from tilegemm import tuning
for (m, n, k) in SHAPES:
    a = torch.randn(m, k, device="cuda", dtype=TD); b = torch.randn(k, n, device="cuda", dtype=TD); c = torch.empty(m, n, device="cuda", dtype=TD)
    try:
        print("shipped", (m, n, k), tuning.choose(P.Problem(a, b, c, DT)), flush=True)
    except Exception as e:  # noqa: BLE001
        print("pick failed", e)
