"""M = 128 (session 45; from session 44's probe_m64.py) decode products (B = W^T, batch-64 decode of the 8B and 70B weights): t03/t04 candidates
wider than the tuner tries, device clock, cuBLAS interleaved pairwise with each. Prints each
product's DB pick beside the best five."""
import json, os, statistics, itertools
import torch
from tilegemm import tuning, dispatch
from tilegemm.tuning.command import problem
from tilegemm.bench import library as L

MS = [int(x) for x in os.environ.get("MS", "64").split(",")]
W = [tuple(int(v) for v in w.split("x")) for w in os.environ.get(
    "W", "4096x4096,1024x4096,14336x4096,4096x14336,8192x8192,1024x8192,28672x8192,8192x28672").split(",")]
budget = float(os.environ.get("BUDGET", "0.2"))
db = json.load(open("src/tilegemm/data/tuning/nvidia-h200.json"))
clock = L._Clock()
T03, T04 = "tc_tma_persistent", "tc_splitk"


def c03(bm, bn, bk, st, w=4):
    c = dict(BM=bm, BN=bn, BK=bk, GROUP_M=8, num_warps=w, num_stages=st, REG_A=False, C_TMA=True)
    return dict(c, SWAP=True) if bm < 64 else c


def c04(bm, bn, bk, st, split, w=4):
    c = dict(BM=bm, BN=bn, BK=bk, GROUP_M=8, num_warps=w, num_stages=st, REG_A=False, FUSED=True, SPLIT=split, TMA=True)
    return dict(c, SWAP=True) if bm < 64 else c


CANDS = ([(T03, c03(128, *t)) for t in [(128, 64, 4), (128, 64, 5), (128, 64, 6), (128, 128, 3), (64, 64, 6),
                                       (64, 64, 8), (64, 128, 4), (64, 128, 5), (256, 64, 3, 8), (256, 64, 4, 8),
                                       (128, 64, 4, 8), (128, 64, 6, 8), (32, 128, 8), (32, 256, 6)]]
         + [(T03, c03(64, *t)) for t in [(128, 64, 4), (128, 64, 6), (128, 64, 8), (128, 128, 4), (64, 128, 6),
                                      (64, 256, 3), (256, 64, 4, 8), (32, 256, 4), (64, 64, 8)]]
         + [(T04, c04(bm, bn, bk, st, sp)) for (bm, bn, bk, st), sp in itertools.product(
             [(64, 64, 128, 4), (64, 128, 64, 6), (128, 64, 64, 6), (128, 128, 64, 4), (64, 64, 64, 8)], (2, 3, 4, 8))]
         + [(T04, c04(32, bn, bk, st, sp)) for (bn, bk, st), sp in itertools.product([(64, 128, 4), (128, 128, 4), (64, 256, 3)], (4, 8, 16))])
out = []
for m in MS:
    for n, k in W:
        p = problem("bf16", m, n, k, "t")
        d = tuning.pick(db, "db", p)
        ref = lambda: torch.matmul(p.a, p.b)
        fns, names = [], []
        for r, c, tag in [(d.rung, d.config, "db")] + [(r, c, "x") for r, c in CANDS]:
            try:
                got = dispatch.run_problem(p, r, config=c)
            except Exception as e:
                print("  fail", r, c, type(e).__name__, str(e)[:80]); continue
            if got.get("source") != "forced configuration" or got.get("kernel") != r:
                print("  degraded", r, c, got.get("kernel"), got.get("source")); continue
            exp = p.a.float() @ p.b.float()
            rel = ((p.c.float() - exp).norm() / exp.norm()).item()
            if not rel < 1e-2:
                print("  WRONG", r, c, rel); continue
            fns.append(lambda r=r, c=c: dispatch.run_problem(p, r, config=c)); names.append((r, c, tag))
        ref(); torch.cuda.synchronize()
        res = []
        for f, (r, c, tag) in zip(fns, names):
            so, sr = L._interleaved([lambda k_, f=f: clock.device(f, k_), lambda k_: clock.device(ref, k_)], budget)
            res.append(dict(rung=r, config=c, tag=tag, ms=statistics.median(so), ref_ms=statistics.median(sr)))
        base = res[0]
        best = max(res, key=lambda x: x["ref_ms"] / x["ms"])
        gb = (n * k + m * k + m * n) * 2 / 1e6
        print(f"{m}x{n}x{k}: db {base['ms']*1e3:.1f}us r={base['ref_ms']/base['ms']:.3f}  best {best['ms']*1e3:.1f}us "
              f"r={best['ref_ms']/best['ms']:.3f} ({gb/best['ms']:.0f} GB/s) {best['rung']} {best['config']}", flush=True)
        for x in sorted(res, key=lambda x: -x["ref_ms"] / x["ms"])[:6]:
            print(f"    {x['ref_ms']/x['ms']:.3f} {x['ms']*1e3:.1f} {x['rung']} {x['config']}")
        out.append(dict(m=m, n=n, k=k, results=res))
        del p; torch.cuda.empty_cache()
json.dump(out, open(os.path.join(os.environ.get("OUT", "."), os.environ.get("NAME", "probe-m128") + ".json"), "w"), indent=1)
