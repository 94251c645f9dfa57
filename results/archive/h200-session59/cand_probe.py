"""Probe (session 59): for held-out shapes past decode, every database entry within WINDOW of the
nearest that fits (tuning._fitting), each timed at the shape (device clock, settled, interleaved),
the reference beside: what any choice among the nearest entries could give, and which the rules pick.
Run on the device from the repository root (tuning._fitting is 573eeb1's), writing $OUT/cand-SEED-DTYPES.json:
    . scripts/device/env.sh && python3 results/archive/h200-session59/cand_probe.py SEED DTYPE[,DTYPE] [SECONDS]
As run: 20261206 bf16,tf32; 20261206 fp8; 20261207 and 20261208 bf16,tf32,fp8 (runs/cand-*.json)."""
import json, os, sys, time
import torch
from tilegemm import tuning
from tilegemm.bench.shapes import held_out
from tilegemm.tuning import cache, command, timer, tuner
from tilegemm.kernels.tensorcore import _problem as P

OUT = os.environ.get("OUT", "/tmp/out")
WINDOW, MOST = 3.0, 6
seed, dtypes = int(sys.argv[1]), sys.argv[2].split(",")
limit = float(sys.argv[3]) if len(sys.argv) > 3 else 500
path = f"{OUT}/cand-{seed}-{'-'.join(dtypes)}.json"
res, t0 = [], time.time()
torch.backends.cuda.matmul.allow_tf32 = True


def probe(dtype, m, n, k):
    p = command.problem(dtype, m, n, k)
    trial = tuner.trial_problem(p)
    sms, cc, gpu = P.device_facts(p.a.device)
    db, phrase = cache.database_for(gpu, cc, sms)
    cands, seen, first = [], set(), None
    for dist, exact, d in tuning._fitting(db, phrase, p, None):
        first = dist if first is None else first
        if dist > first + WINDOW or len(cands) == MOST:
            break
        key = (d.rung, json.dumps(d.config, sort_keys=True))
        if key in seen:
            continue
        seen.add(key)
        cands.append(dict(dist=dist, exact=exact, rung=d.rung, config=d.config, source=d.source,
                          db_ms=d.ms, timed_at=list(d.shape) if d.shape else None))
    fns = [lambda c=c: tuner.run(c["rung"], trial, c["config"]) for c in cands]
    ref = torch.empty(m, n, device="cuda", dtype=p.c.dtype)
    reff = (lambda: torch._scaled_mm(p.a, p.b, scale_a=p.scale_a, scale_b=p.scale_b, out_dtype=torch.bfloat16)) \
        if dtype == "fp8" else (lambda: torch.matmul(p.a, p.b, out=ref))
    try:
        reff()
        torch.cuda.synchronize()
        fns.append(reff)
    except RuntimeError:
        reff = None
    ok = []
    for c, f in zip(cands, fns):
        try:
            f()
            torch.cuda.synchronize()
            ok.append(True)
        except Exception as e:  # noqa: BLE001
            c["error"] = str(e)[:200]
            ok.append(False)
    live = [f for f, o in zip(fns, ok + [True]) if o]
    ms = timer.settle(live, budget_ms=40, graph=False)
    it = iter(ms)
    for c, o in zip(cands, ok):
        if o:
            c["ms"] = next(it)
    rec = dict(dtype=dtype, m=m, n=n, k=k, candidates=cands, ref_ms=next(it) if reff else None)
    res.append(rec)
    json.dump(res, open(path, "w"), indent=1)
    print(dtype, m, n, k, rec["ref_ms"] and round(rec["ref_ms"] * 1e3, 1),
          [(round(c.get("ms", float("nan")) * 1e3, 1), c["config"].get("BM"), c["config"].get("BN"), c["dist"]) for c in cands], flush=True)


for dtype in dtypes:
    for m, n, k in held_out(seed):
        if m <= 128:
            continue
        if time.time() - t0 > limit:
            print("time's up", flush=True)
            break
        try:
            probe(dtype, m, n, k)
        except Exception as e:  # noqa: BLE001
            print(dtype, m, n, k, "failed", type(e).__name__, str(e)[:300], flush=True)
json.dump(res, open(path, "w"), indent=1)
print("elapsed", round(time.time() - t0), flush=True)
