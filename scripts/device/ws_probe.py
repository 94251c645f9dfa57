"""Time t05 (warp-specialised, Gluon) configurations beside t03's committed configuration and cuBLAS.

    . scripts/device/env.sh && python3 scripts/device/ws_probe.py --out $OUT/ws_probe.json \
        --case bf16:8192x8192x8192 --cfg BM=128,BN=256,BK=64,STAGES=4,SPLIT=2

Every configuration's result is compared with the library's (cuBLAS, or torch._scaled_mm for FP8;
relative Frobenius error) before it is timed. Each configuration is then timed interleaved with the
library, as the bench times (tensorcore_bench.timed: ABBA batches, L2 flushed, device time), so
each ratio is free of the order and of the drift between configurations; t03's configuration from
the committed bench run (--from) comes first where that run used t03.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

DEFAULT_CFGS = ["BM=128,BN=256,BK=64,STAGES=3,SPLIT=1", "BM=128,BN=256,BK=64,STAGES=4,SPLIT=2",
                "BM=128,BN=256,BK=64,STAGES=4,SPLIT=4", "BM=128,BN=128,BK=64,STAGES=6,SPLIT=1"]


def parse(s: str) -> dict:
    return {k: int(v) for k, v in (kv.split("=") for kv in s.split(","))}


def t05_config(s: str) -> dict:
    """A forced t05 configuration from "K=V,...": t05's 128×256×64, 3-stage defaults, overridden."""
    from tilegemm.kernels.tensorcore import t05_warp_specialized as t05

    return dict(t05.cfg(128, 256, 64, 3), **parse(s))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", "/tmp"), "ws_probe.json"))
    ap.add_argument("--case", action="append", required=True, help="precision:MxNxK")
    ap.add_argument("--cfg", action="append", default=[], help="K=V,... for t05")
    ap.add_argument("--from", dest="src", default="results/h200/tensorcore.json")
    ap.add_argument("--budget-s", type=float, default=1.5, help="timing budget per configuration")
    args = ap.parse_args(argv)

    import torch
    import triton

    from tensorcore_bench import library_call, operands, out_dtype, timed
    from tilegemm.bench.timing import L2Flush
    from tilegemm.kernels.tensorcore import _common as C
    from tilegemm.kernels.tensorcore import t03_tma_persistent as t03
    from tilegemm.kernels.tensorcore import t05_warp_specialized as t05

    used = {}
    with open(args.src) as f:
        for r in json.load(f)["records"]:
            used[(r["dtype"], r["m"], r["n"], r["k"])] = r.get("config", {})
    dev = torch.device("cuda")
    flush = L2Flush(framework="torch")
    result = dict(gpu=torch.cuda.get_device_name(0), date=time.strftime("%Y-%m-%dT%H:%M:%S"),
                  versions=dict(torch=torch.__version__, triton=triton.__version__),
                  timing="each configuration interleaved with the library (tensorcore_bench.timed: ABBA, "
                         "L2 flushed, device time after a hold)", rows=[])
    torch.manual_seed(0)
    for case in args.case:
        dtype, shape = case.split(":")
        m, n, k = (int(x) for x in shape.split("x"))
        torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
        a, b, sa, sb = operands(dtype, m, n, k, dev, torch)
        c = torch.empty((m, n), dtype=out_dtype(dtype, torch), device=dev)
        lib = library_call(dtype, a, b, sa, sb, torch)
        ref = lib().float()
        flops = 2.0 * m * n * k
        row = dict(dtype=dtype, m=m, n=n, k=k, runs=[])
        committed = used.get((dtype, m, n, k), {})
        base = {kk: v for kk, v in committed.items() if kk not in ("kernel", "fallback", "WS")}
        todo = [("t03", base)] if committed.get("kernel") == t03.NAME else []
        todo += [("t05", t05_config(s)) for s in (args.cfg or DEFAULT_CFGS)]
        for kernel, cfg in todo:
            rec = dict(kernel=kernel, config=cfg)
            p = C.Problem(a, b, c, dtype, scale_a=sa, scale_b=sb)
            gemm = t03.gemm if kernel == "t03" else t05.gemm
            fn = lambda: gemm(p, cfg)  # noqa: E731
            try:
                c.fill_(float("nan"))
                fn()
                torch.cuda.synchronize()
                rec["rel_err"] = float((c.float() - ref).norm() / ref.norm())
                if rec["rel_err"] < 1e-2:
                    t = timed({"ours": fn, "library": lib}, flush, args.budget_s)
                    rec["ms"], rec["library_ms"] = t["ours"][0], t["library"][0]
                    rec["reps"] = t["ours"][3]
            except Exception as e:  # noqa: BLE001  (a failing configuration is a finding)
                rec["error"] = f"{type(e).__name__}: {e}"[:400]
                torch.cuda.synchronize()
            row["runs"].append(rec)
            ms, lib_ms = rec.get("ms", float("nan")), rec.get("library_ms", float("nan"))
            print(f"{dtype} {shape} {kernel} {json.dumps(cfg)}: {ms * 1e3:.1f} µs {flops / ms / 1e9:.0f} TF/s, "
                  f"library {flops / lib_ms / 1e9:.0f} TF/s, {lib_ms / ms:.3f}× err {rec.get('rel_err', float('nan')):.1e} "
                  f"{rec.get('error', '')}", flush=True)
        result["rows"].append(row)
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
        del a, b, c, ref
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
