"""Run one product a few times with our kernel (auto_gemm, tuned or cached) and with the library,
nothing else: a target for a profiler.

    TILEGEMM_CACHE_DIR=... ncu --section SpeedOfLight -k regex:'tma_persistent|gemm' \
        python3 scripts/device/one_shape.py --dtype tf32 --shape 4096x4096x4096

The tuning (when the cache has no entry) runs first, the profiled calls after it, each side
`--reps` times, with a synchronisation between them.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtype", default="tf32", choices=("bf16", "fp16", "tf32", "fp8"))
    ap.add_argument("--shape", default="4096x4096x4096")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--cfg", help="K=V,... : run t05 with this configuration instead of the tuned choice")
    args = ap.parse_args(argv)
    import torch

    from tensorcore_bench import library_call, operands, out_dtype
    from tilegemm.kernels import tensorcore as tc
    from tilegemm.kernels.tensorcore import _common as C

    m, n, k = (int(x) for x in args.shape.split("x"))
    a, b, sa, sb = operands(args.dtype, m, n, k, torch.device("cuda"), torch)
    c = torch.empty(m, n, dtype=out_dtype(args.dtype, torch), device="cuda")
    p = C.Problem(a, b, c, args.dtype, scale_a=sa, scale_b=sb)
    if args.cfg:
        from tilegemm.kernels.tensorcore import t05_warp_specialized as t05
        from ws_probe import t05_config

        cfg = t05_config(args.cfg)
        ours = lambda: t05.gemm(p, cfg)  # noqa: E731
    else:
        ours = lambda: tc.auto_gemm(p)  # noqa: E731
    print("ours:", ours(), flush=True)
    torch.backends.cuda.matmul.allow_tf32 = args.dtype == "tf32"
    ref = library_call(args.dtype, a, b, sa, sb, torch)
    ref()
    torch.cuda.synchronize()
    for _ in range(args.reps):
        ours()
        torch.cuda.synchronize()
        ref()
        torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
