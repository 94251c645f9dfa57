"""FP8 with fast_accum=False (promoted every min(128, BK) of K): which t05/t03 configurations hide the
promotion's wait? Per shape: the tuner's t05 (and t03) search run for the fast and the promoted
problem (TILEGEMM_TUNE_BUDGET_S a rung), top configs of each, the promoted time of the fast winner,
and _scaled_mm's two modes in the same process."""
import json, os, sys, time
import torch, triton
from tilegemm.bench.library import operands
from tilegemm.kernels.tensorcore import _problem as P
from tilegemm.tuning import tuner
out = dict(gpu=torch.cuda.get_device_name(), shapes={})
shapes = [tuple(int(x) for x in s.split("x")) for s in (sys.argv[1] if len(sys.argv) > 1 else
          "4096x4096x4096,8192x8192x8192,2048x2048x2048,1024x14336x4096").split(",")]
rungs = (sys.argv[2] if len(sys.argv) > 2 else "tc_warp_specialized,tc_tma_persistent").split(",")
for (m, n, k) in shapes:
    a8, b8, sa, sb = operands("fp8", m, n, k)
    rec = {}
    for fast in (True, False):
        p = P.Problem(a8, b8, torch.empty(m, n, device="cuda", dtype=torch.bfloat16), "fp8", scale_a=sa, scale_b=sb,
                      fast_accum=fast)
        for rung in rungs:
            t0 = time.perf_counter()
            e = tuner.tune_rung(rung, p)
            lt = tuner.last_tuning
            rec[f"{rung} fast={fast}"] = dict(ms=e.get("ms"), config=e.get("config"), s=round(time.perf_counter() - t0, 1),
                                              top=[(round(ms, 5), c) for ms, c in lt.get("timings", [])[:8]],
                                              failed=len(lt.get("failed", [])))
            top = rec[f"{rung} fast={fast}"]["top"]
            print(f"{m}x{n}x{k} {rung} fast={fast}: best {e.get('ms')} {e.get('config')}", flush=True)
            for ms, c in top[:6]:
                print("    ", ms, c, flush=True)
    # the fast winner's config run promoted
    for rung in rungs:
        cfg = rec[f"{rung} fast=True"]["config"]
        pp = P.Problem(a8, b8, torch.empty(m, n, device="cuda", dtype=torch.bfloat16), "fp8", scale_a=sa, scale_b=sb,
                       fast_accum=False)
        try:
            rec[f"{rung} fast winner promoted"] = triton.testing.do_bench(lambda: tuner.run(rung, pp, cfg), warmup=10, rep=80)
        except Exception as ex:
            rec[f"{rung} fast winner promoted"] = repr(ex)[:200]
    for fast in (True, False):
        rec[f"_scaled_mm fast={fast}"] = sorted(triton.testing.do_bench(
            lambda: torch._scaled_mm(a8, b8, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16, use_fast_accum=fast),
            warmup=10, rep=80) for _ in range(3))[1]
    print(f"{m}x{n}x{k}", {k_: v for k_, v in rec.items() if not isinstance(v, dict)},
          {k_: v["ms"] for k_, v in rec.items() if isinstance(v, dict)}, flush=True)
    out["shapes"][f"{m}x{n}x{k}"] = rec
    json.dump(out, open(os.path.join(os.environ.get("OUT", "/tmp"), "probe_promoted.json"), "w"), indent=1, default=str)
