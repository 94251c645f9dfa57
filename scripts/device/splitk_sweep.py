"""k13 on the H200: which tile and how many K splits, for products with 16 < M ≤ a few hundred rows.

    . scripts/device/env.sh && python3 scripts/device/splitk_sweep.py --out $OUT/splitk_sweep.json

For each shape: cuBLAS FP32 (TF32 off, `torch.mm`), k11 and k12 as they dispatch, then every tile
configuration in CANDIDATES with K split 1…32 ways, each result checked against a float64
product before it is timed (device events, L2 flushed before each sample). Records what k13's
`plan()` chose beside the sweep's fastest, so the heuristic can be judged against the search.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src"))

SHAPES = [(32, 4096, 14336), (128, 4096, 4096), (32, 4096, 4096), (64, 4096, 4096), (96, 4096, 4096),
          (256, 4096, 4096), (64, 8192, 8192), (128, 14336, 4096)]
SPLITS = [1, 2, 4, 6, 8, 12, 16, 32]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", "/tmp"), "splitk_sweep.json"))
    ap.add_argument("--budget-s", type=float, default=0.08)
    args = ap.parse_args()
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    from tilegemm import _cuda, registry
    from tilegemm.bench.timing import DeviceClock, L2Flush, measure
    from tilegemm.kernels.simt import k13_splitk_tiles as k13
    from tilegemm.kernels.simt.k10_warptile import Config
    from simt_ladder import Checker

    cands = {f"{c.BM}x{c.BN}x{c.BK} w{c.WM}x{c.WN} mb{c.min_blocks} u{c.unroll}": c for c in [
        *(cfg for cfg, _ in k13.TILES.values()),
        Config(32, 128, 16, 32, 64, min_blocks=0, split=True),
        Config(32, 64, 16, 32, 32, min_blocks=0, split=True),
        Config(64, 64, 16, 32, 32, min_blocks=0, split=True),
        Config(64, 128, 16, 32, 64, min_blocks=0, split=True),
        Config(128, 128, 8, 64, 32, min_blocks=2, split=True),
        Config(128, 64, 16, 64, 32, min_blocks=0, split=True),
    ]}
    cuda = _cuda.cuda
    t_start = time.time()
    out = {"gpu": torch.cuda.get_device_name(0), "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
           "versions": {"torch": torch.__version__}, "sms": k13.sm_count(), "records": []}
    flush = L2Flush()

    def timed(fn):
        return measure(fn, clock=DeviceClock(), flush=flush, budget_s=args.budget_s, min_reps=5).median_ms

    for (m, n, k) in SHAPES:
        g = torch.Generator(device="cuda").manual_seed(m + n + k)
        a = torch.rand((m, k), device="cuda", generator=g) * 2 - 1
        b = torch.rand((k, n), device="cuda", generator=g) * 2 - 1
        c = torch.empty((m, n), device="cuda")
        chk = Checker(a, b)  # simt_ladder's: tilegemm.validate's bounds, computed on the GPU
        da, db, dc = cuda.as_cuda_array(a), cuda.as_cuda_array(b), cuda.as_cuda_array(c)
        cub = measure(lambda: torch.mm(a, b, out=c), clock=DeviceClock("torch"), flush=flush,
                      budget_s=args.budget_s).median_ms
        rec = {"m": m, "n": n, "k": k, "cublas_ms": cub, "plan": None, "runs": []}
        p = k13.plan(m, n, k)
        if p:
            rec["plan"] = {"config": p[0].__dict__, "splits": p[1]}

        def one(label, fn, **extra):
            r = {"label": label, **extra}
            try:
                c.fill_(float("nan"))
                fn()
                cuda.synchronize()
                r.update(chk(c))
                if r["ok"]:
                    ms = timed(fn)
                    r.update(ms=ms, ratio=cub / ms)
            except Exception as e:  # noqa: BLE001  (record, go on)
                r.update(ok=False, error=f"{type(e).__name__}: {e}"[:300])
            rec["runs"].append(r)
            return r

        for name in ("autotuned", "skinny_m", "splitk_tiles"):
            kern = registry.get(name)
            one(name, lambda: kern.launch(da, db, dc))
        for label, cfg in cands.items():
            if cfg.BM > 2 * max(m, 32):
                continue
            for s in SPLITS:
                if s > 1 and k // s < 128:
                    continue
                one(label, lambda: k13.launch_plan(da, db, dc, cfg, s), splits=s, config=cfg.__dict__)
        best = max((r for r in rec["runs"] if r.get("ok")), key=lambda r: r["ratio"], default={"ratio": 0, "label": "-"})
        mine = next(r for r in rec["runs"] if r["label"] == "splitk_tiles")
        print(f"{m}x{n}x{k}: cuBLAS {cub * 1e3:.1f} µs; k13 plan {mine.get('ratio', 0):.2f}x "
              f"({p[0].BM if p else '-'}, {p[1] if p else '-'}); best {best['ratio']:.2f}x {best['label']} "
              f"s{best.get('splits', '-')}", flush=True)
        out["records"].append(rec)
        out["elapsed_s"] = time.time() - t_start
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1, default=str)


if __name__ == "__main__":
    main()
