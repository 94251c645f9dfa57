"""Probe: shapes whose nearest database entry is another bucket's wave-fitted t05 tile (192 rows,
or a 192/96-wide N side): the decision they got before `space.t05_fits_waves` beside the one they
get with it, device time (settled, interleaved), cuBLAS beside."""
import json, os, time
import torch
from tilegemm import tuning
from tilegemm.tuning import cache, command, space, timer, tuner
from tilegemm.kernels.tensorcore import _problem as P

OUT = os.environ.get("OUT", "/tmp/out")
T05 = "tc_warp_specialized"
res = []


def run(dtype, m, n, k):
    p = command.problem(dtype, m, n, k)
    trial = tuner.trial_problem(p)
    sms, cc, gpu = P.device_facts(p.a.device)
    db, phrase = cache.database_for(gpu, cc, sms)
    rule = space.t05_fits_waves
    space.t05_fits_waves = lambda p, c: True  # the database as it was read before the rule
    try:
        before = tuning.pick(db, phrase, p)
    finally:
        space.t05_fits_waves = rule
    after = tuning.choose(p)  # with the rule: another bucket's wave-fitted tile only where it fits p's waves
    ref = torch.empty(m, n, device="cuda", dtype=p.c.dtype)
    fns = [lambda: tuner.run(before.rung, trial, before.config), lambda: tuner.run(after.rung, trial, after.config)]
    if dtype == "fp8":
        fns.append(lambda: torch._scaled_mm(p.a, p.b, scale_a=p.scale_a, scale_b=p.scale_b, out_dtype=torch.bfloat16))
    else:
        fns.append(lambda: torch.matmul(p.a, p.b, out=ref))
    try:
        fns[2]()
        torch.cuda.synchronize()
    except RuntimeError:  # _scaled_mm's shape rules (N a multiple of 16): ours only
        fns.pop()
    for f in fns:
        f()
    torch.cuda.synchronize()
    ms = timer.settle(fns, budget_ms=150, graph=False) + [float("nan")] * (3 - len(fns))
    rec = dict(dtype=dtype, m=m, n=n, k=k, before=dict(rung=before.rung, config=before.config, source=before.source),
               after=dict(rung=after.rung, config=after.config, source=after.source),
               us=dict(before=round(ms[0] * 1e3, 2), after=round(ms[1] * 1e3, 2), ref=round(ms[2] * 1e3, 2)))
    res.append(rec)
    json.dump(res, open(f"{OUT}/borrow.json", "w"), indent=1)  # after every shape: a run cut short keeps them
    same = before.rung == after.rung and before.config == after.config
    print(dtype, m, n, k, "same" if same else "", rec["us"], "| before:", before.source[-60:], before.config.get("BM"), before.config.get("BN"),
          "| after:", after.source[-60:], after.config.get("BM"), after.config.get("BN"), flush=True)


t0 = time.time()
torch.backends.cuda.matmul.allow_tf32 = True
for dtype, shapes in (("fp8", [(5000, 3000, 2000)]),
                      ("bf16", [(2560, 2560, 2560), (2816, 3328, 2560), (1280, 1792, 1280)]),
                      ("tf32", [(2560, 3328, 5120), (3584, 2048, 2304)]),
                      ("fp8", [(2560, 4096, 2048), (3072, 3584, 3072)]),
                      ("fp16", [(2816, 2304, 2304)])):
    for m, n, k in shapes:
        if time.time() - t0 > 110:
            break
        try:
            run(dtype, m, n, k)
        except Exception as e:  # noqa: BLE001
            print(dtype, m, n, k, "failed", type(e).__name__, str(e)[:300], flush=True)
json.dump(res, open(f"{OUT}/borrow.json", "w"), indent=1)
