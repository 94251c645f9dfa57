"""Probe: TF32 1x14336x4096 split-K / gemv configs and 3072^3 swapped t05 tiles, vs cuBLAS (device clock)."""
import itertools, json, os, sys, time
import torch
from tilegemm.tuning import command, timer, tuner, space
from tilegemm.kernels.tensorcore import _problem as P

torch.backends.cuda.matmul.allow_tf32 = True
out = {}
def probe(shape, rung_cfgs):
    m, n, k = shape
    p = command.problem("tf32", m, n, k)
    trial = tuner.trial_problem(p)
    ref = torch.empty_like(p.c)
    res = []
    for rung, c in rung_cfgs:
        try:
            tuner.run(rung, trial, c); torch.cuda.synchronize()
            err = (trial.c.float() - (p.a.double() @ p.b.double()).float()).abs().max().item()
            ms = timer.time_ms(lambda: tuner.run(rung, trial, c), budget_ms=30)
            res.append((ms, rung, c, err))
        except Exception as e:
            print("fail", rung, c, str(e)[:120])
    res.sort(key=lambda t: t[0])
    top = res[:5]
    fns = [lambda r=r: tuner.run(r[1], trial, r[2]) for r in top] + [lambda: torch.matmul(p.a, p.b, out=ref)]
    again = timer.settle(fns, budget_ms=60, graph=False)
    key = f"{m}x{n}x{k}"
    out[key] = dict(single=[(round(ms*1e3, 2), r, c, err) for ms, r, c, err in res[:12]],
                    settled=[(round(a*1e3, 2), t[1], t[2]) for a, t in zip(again, top)], cublas_us=round(again[-1]*1e3, 2))
    print(key, "cuBLAS", out[key]["cublas_us"])
    for a, t in zip(again, top): print("  ", round(a*1e3, 2), t[1], t[2])

# 1x14336x4096: t04 split-K grid
cfgs = []
for bn, bk, st, sp, fused in itertools.product((64, 128), (64, 128), (2, 3, 4), (1, 2, 3, 4, 6), (True,)):
    if (16 * bk + bk * bn) * 4 * st > 220 * 1024: continue
    c = dict(BM=16, BN=bn, BK=bk, GROUP_M=8, num_warps=4, num_stages=st, SPLIT=sp)
    if sp > 1: c["FUSED"] = True
    cfgs.append(("tc_splitk", c))
for bn, bk, w, fold in itertools.product((4, 8, 16), (512, 1024), (4, 8), (1, 4)):
    cfgs.append(("tc_gemv", dict(BN=bn, BK=bk, FOLD=fold, num_warps=w, num_stages=1)))
t0 = time.time(); probe((1, 14336, 4096), cfgs); print("decode probe", time.time() - t0, "s")
# 3072^3: swapped t05 tiles (+ the shipped one)
c5 = []
for bm, bn, st, sp in ((256, 128, 4, 4), (256, 128, 3, 2), (128, 128, 4, 1), (128, 128, 5, 2), (128, 128, 6, 2), (128, 128, 4, 2), (128, 64, 6, 1), (256, 64, 5, 2)):
    c5.append(("tc_warp_specialized", space.t05_cfg(bm, bn, 32, st, sp, 1, swap=True)))
for shape in ((3072, 3072, 3072), (3000, 3000, 3000)):
    t0 = time.time(); probe(shape, c5); print("t05 probe", time.time() - t0, "s")
json.dump(out, open(os.environ["OUT"] + "/probe.json", "w"), indent=1)
