"""Host time per call of the tensor-core entry points, and where it goes (cProfile).

    . scripts/device/env.sh && python3 scripts/device/host_probe.py --out $OUT/host_probe.json

For small products the GPU finishes before Python has launched the next one, so the time per
call is the host's. Per shape and precision: tilegemm.gemm (new output, and into a given c),
tilegemm.matmul, tensorcore.auto_gemm on a prepared Problem, each rung's gemm with its tuned
configuration, and torch.matmul, each called N times back to back (no synchronisation inside)
with the mean host µs per call; then cProfiles of auto_gemm's and gemm's calls (top functions by
own time) for the first case.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src"))


def per_call_us(fn, n=300) -> float:
    import torch

    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / n * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", "/tmp"), "host_probe.json"))
    args = ap.parse_args()
    import torch

    import tilegemm
    from tilegemm.kernels import tensorcore as tc
    from tilegemm.kernels.tensorcore import _common as C

    torch.backends.cuda.matmul.allow_tf32 = True
    out = {"gpu": torch.cuda.get_device_name(0), "date": time.strftime("%Y-%m-%dT%H:%M:%S"), "rows": [],
           "profile": ""}
    cases = [("fp16", 1024, 1024, 1024), ("bf16", 1024, 1024, 1024), ("tf32", 1024, 1024, 1024),
             ("fp16", 16, 4096, 4096), ("fp16", 2048, 2048, 2048),
             ("tf32", 2048, 2048, 2048)]
    for prec, m, n, k in cases:
        dt = {"fp16": torch.float16, "bf16": torch.bfloat16, "tf32": torch.float32}[prec]
        a = torch.randn(m, k, device="cuda", dtype=dt)
        b = torch.randn(k, n, device="cuda", dtype=dt)
        c = torch.empty(m, n, device="cuda", dtype=dt)
        p = C.Problem(a, b, c, prec)
        row = {"precision": prec, "m": m, "n": n, "k": k}
        row["auto_config"] = tc.auto_gemm(p)  # tunes (once) and says which rung
        row["torch_us"] = per_call_us(lambda: torch.matmul(a, b, out=c))
        row["gemm_us"] = per_call_us(lambda: tilegemm.gemm(a, b, precision=prec))
        row["gemm_into_c_us"] = per_call_us(lambda: tilegemm.gemm(a, b, precision=prec, c=c))
        if prec != "tf32":
            row["matmul_us"] = per_call_us(lambda: tilegemm.matmul(a, b))
        row["auto_gemm_us"] = per_call_us(lambda: tc.auto_gemm(p))
        for name in ("tc_persistent", "tc_tma_persistent", "tc_splitk"):
            mod = tc.rung_module(name)
            try:
                mod.gemm(p)
                row[f"{name}_us"] = per_call_us(lambda: mod.gemm(p))
            except Exception as e:  # noqa: BLE001
                row[f"{name}_us"] = f"{type(e).__name__}: {e}"[:200]
        print(row, flush=True)
        out["rows"].append(row)
        if not out["profile"]:
            for what, fn in (("auto_gemm", lambda: tc.auto_gemm(p)), ("gemm", lambda: tilegemm.gemm(a, b, c=c))):
                pr = cProfile.Profile()
                pr.enable()
                for _ in range(300):
                    fn()
                pr.disable()
                torch.cuda.synchronize()
                s = io.StringIO()
                pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(25)
                out["profile"] += f"---- {what}\n" + s.getvalue()[-6000:]
            print(out["profile"], flush=True)
    from tilegemm.kernels.tensorcore import t03_tma_persistent as t03

    out["direct_launch"] = dict(t03.DIRECT)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1, default=str)


if __name__ == "__main__":
    main()
