"""Issue 5 on the H200: every SIMT rung against cuBLAS FP32 (TF32 off), in one run, same inputs.

    . scripts/device/env.sh && python3 scripts/device/simt_ladder.py --out $OUT/simt_ladder.json

For each shape: fresh random FP32 operands on the GPU, cuBLAS (`torch.mm`) timed with torch
events, then each SIMT kernel of the registry: one checked run (output poisoned with NaN, float64
reference from torch on the GPU, the same elementwise bound and Frobenius tolerance as
tilegemm.validate), then timing with `measure(..., DeviceClock(), L2Flush())`. Slow rungs (1-3)
run only at 4096³ and on the awkward shapes. k11's autotuner runs once first (bounded). The
resource table (registers, spills, smem, SASS census) comes from the GPU's own compiler.
A failing kernel is recorded with its error and the run goes on; the JSON is rewritten after
every record, so a crash leaves what was measured.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib
import json
import math
import os
import platform
import sys
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src"))

SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (4096, 14336, 4096), (4095, 4097, 1023), (3000, 5003, 2049)]
SLOW_RUNG = 3  # rungs <= this are timed only at 4096³ and the awkward shapes
SLOW_SKIP = {(8192, 8192, 8192), (4096, 14336, 4096)}


def versions():
    import numba
    import numpy
    import torch

    v = {"python": platform.python_version(), "numpy": numpy.__version__, "numba": numba.__version__,
         "torch": torch.__version__, "torch_cuda": torch.version.cuda}
    try:
        import importlib.metadata as md

        v["numba_cuda"] = md.version("numba-cuda")
    except Exception:
        pass
    try:
        from numba.cuda.cudadrv import driver

        v["cuda_driver"] = ".".join(map(str, driver.driver.get_version()))
    except Exception:
        pass
    try:
        from numba.cuda.cudadrv import nvvm

        v["libnvvm"] = ".".join(map(str, nvvm.NVVM().get_version()))
    except Exception:
        pass
    return v


class Checker:
    """tilegemm.validate.check's two tests, computed on the GPU in float64 (host numpy at 8192³
    would take minutes per kernel)."""

    def __init__(self, a, b):
        import torch

        from tilegemm.validate import _growth, tolerance_for

        a64, b64 = a.double(), b.double()
        k = a.shape[1]
        self.ref = a64 @ b64
        tol = tolerance_for("float32")
        gamma = _growth(k) * tol.u_acc / max(1.0 - k * tol.u_acc, 0.5)
        self.bound = gamma * (a64.abs() @ b64.abs()) + tol.u_out * self.ref.abs() + 1e-300
        self.ref_norm = torch.linalg.norm(self.ref).item()
        self.tol = tol.rel_fro

    def __call__(self, c):
        import torch

        d = c.double() - self.ref
        n_nan = int(torch.isnan(c).sum().item())
        n_bad = int((~(d.abs() <= self.bound)).sum().item())
        rel = torch.linalg.norm(d).item() / self.ref_norm if n_nan == 0 else math.inf
        return {"ok": n_bad == 0 and rel <= self.tol, "rel_err": rel, "n_bad": n_bad, "n_nan": n_nan}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", "/tmp"), "simt_ladder.json"))
    ap.add_argument("--budget-s", type=float, default=0.5, help="timing budget per (kernel, shape)")
    ap.add_argument("--autotune-s", type=float, default=75.0, help="k11 search budget (0: skip)")
    ap.add_argument("--kernels", default="", help="comma-separated names (default: every SIMT rung)")
    ap.add_argument("--shapes", default="", help="e.g. 4096x4096x4096,1000x1000x1000")
    args = ap.parse_args()

    t_start = time.time()
    import torch

    # IEEE FP32 for cuBLAS. If TF32 slipped in anyway, cuBLAS's own check below fails
    # (TF32 errors are ~1e-3, the FP32 tolerance is 1e-5) and its record says ok: false.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

    from tilegemm import _cuda, registry
    from tilegemm.bench import sass
    from tilegemm.bench.timing import DeviceClock, L2Flush, measure

    if not _cuda.has_gpu():
        raise SystemExit("no CUDA GPU visible to Numba (simulator on): this script is for the device")
    cuda = _cuda.cuda
    dev = cuda.get_current_device()
    name = dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name)
    out = {"gpu": name, "torch_gpu": torch.cuda.get_device_name(0), "versions": versions(),
           "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
           "settings": {"budget_s": args.budget_s, "tf32": False, "flush": "L2Flush", "clock": "cuda events"},
           "autotune": None, "records": [], "resources": [], "errors": []}

    def save():
        os.makedirs(os.path.dirname(os.path.abspath(args.out)) or ".", exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1, default=str)

    kernels = [k for k in registry.select([s for s in args.kernels.split(",") if s] or None, backend="simt")
               if "broken" not in k.tags and k.supports("float32")]
    shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",") if s] or SHAPES
    print(f"{name}: {len(kernels)} kernels, shapes {shapes}", flush=True)

    # k11's search, once, before anything is timed (it writes its cache; launches then use it)
    try:
        from tilegemm.kernels.simt import k11_autotuned as k11

        if args.autotune_s > 0:
            t0 = time.time()
            res = k11.autotune(budget_s=args.autotune_s, force=True)
            out["autotune"] = {"seconds": time.time() - t0, **res}
            print(f"autotune: {res.get('winner')} in {time.time() - t0:.0f} s", flush=True)
            if not res.get("winner"):
                os.environ["TILEGEMM_AUTOTUNE"] = "0"  # k10's defaults; no second search mid-run
        else:
            os.environ["TILEGEMM_AUTOTUNE"] = "0"
    except Exception as e:
        out["autotune"] = {"error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()[-2000:]}
        os.environ["TILEGEMM_AUTOTUNE"] = "0"
    save()

    flush = L2Flush()
    for (m, n, k) in shapes:
        try:
            g = torch.Generator(device="cuda").manual_seed(m * 7 + n * 3 + k)
            a = torch.rand((m, k), device="cuda", generator=g, dtype=torch.float32) * 2 - 1
            b = torch.rand((k, n), device="cuda", generator=g, dtype=torch.float32) * 2 - 1
            c = torch.empty((m, n), device="cuda", dtype=torch.float32)
            chk = Checker(a, b)
            flops = 2.0 * m * n * k
            torch.mm(a, b, out=c)
            cub_check = chk(c)
            t = measure(lambda: torch.mm(a, b, out=c), clock=DeviceClock("torch"), flush=flush,
                        budget_s=args.budget_s)
            cub_ms = t.median_ms
            out["records"].append({"kernel": "cublas", "m": m, "n": n, "k": k, **cub_check,
                                   "median_ms": cub_ms, "iqr_ms": t.iqr_ms, "reps": t.reps,
                                   "tflops": flops / cub_ms / 1e9, "cublas_ms": cub_ms,
                                   "cublas_tflops": flops / cub_ms / 1e9, "pct_cublas": 100.0})
            print(f"{m}x{n}x{k} cublas {flops / cub_ms / 1e9:6.1f} TFLOP/s  ok={cub_check['ok']}", flush=True)
        except Exception as e:
            out["errors"].append({"shape": [m, n, k], "stage": "setup/cublas", "error": f"{type(e).__name__}: {e}"})
            save()
            continue
        da, db, dc = cuda.as_cuda_array(a), cuda.as_cuda_array(b), cuda.as_cuda_array(c)
        for kern in kernels:
            if kern.rung <= SLOW_RUNG and (m, n, k) in SLOW_SKIP:
                continue
            rec = {"kernel": kern.name, "rung": kern.rung, "m": m, "n": n, "k": k,
                   "cublas_ms": cub_ms, "cublas_tflops": flops / cub_ms / 1e9}
            try:
                mod = importlib.import_module(kern.module)
                if hasattr(mod, "vector_ok"):  # k08+: 16-byte path, or k07's kernel for misaligned rows
                    rec["path"] = "16-byte" if mod.vector_ok(da, db, dc) else "k07 fallback"
                c.fill_(float("nan"))
                torch.cuda.synchronize()
                kern.launch(da, db, dc)
                cuda.synchronize()
                rec.update(chk(c))
                if rec["ok"]:
                    t = measure(lambda: kern.launch(da, db, dc), clock=DeviceClock(), flush=flush,
                                budget_s=args.budget_s)
                    rec.update({"median_ms": t.median_ms, "iqr_ms": t.iqr_ms, "reps": t.reps,
                                "rse": t.rse, "tflops": flops / t.median_ms / 1e9,
                                "pct_cublas": 100.0 * cub_ms / t.median_ms,
                                "traffic_bytes": kern.traffic(m, n, k, 4)})
            except Exception as e:
                rec.update({"ok": False, "error": f"{type(e).__name__}: {e}",
                            "trace": traceback.format_exc()[-1500:]})
            out["records"].append(rec)
            save()
            if rec.get("tflops"):
                tail = f"{rec['tflops']:6.2f} TFLOP/s {rec['pct_cublas']:5.1f}% of cuBLAS"
            else:
                tail = rec.get("error", f"rel_err {rec.get('rel_err')}, {rec.get('n_bad')} bad")[:100]
            print(f"  {kern.name:22} {'ok ' if rec.get('ok') else 'BAD'} {tail}", flush=True)
        del da, db, dc, a, b, c, chk
        torch.cuda.empty_cache()

    try:
        out["resources"] = sass.resource_table(kernels, "float32", route="gpu")
    except Exception as e:
        out["errors"].append({"stage": "resources", "error": f"{type(e).__name__}: {e}"})
    out["seconds"] = time.time() - t_start
    save()

    # compact table: TFLOP/s and % of cuBLAS per kernel and shape
    recs = out["records"]
    print()
    print(f"{'kernel':22}" + "".join(f"{f'{m}x{n}x{k}':>22}" for m, n, k in shapes))
    for kname in ["cublas"] + [kk.name for kk in kernels]:
        cells = []
        for (m, n, k) in shapes:
            r = next((r for r in recs if r["kernel"] == kname and (r["m"], r["n"], r["k"]) == (m, n, k)), None)
            if r is None:
                cells.append(f"{'-':>22}")
            elif not r.get("ok"):
                cells.append(f"{'FAIL' if 'error' not in r else 'ERROR':>22}")
            else:
                cells.append(f"{r['tflops']:9.2f} ({r['pct_cublas']:5.1f}%)".rjust(22))
        print(f"{kname:22}" + "".join(cells))
    print()
    print(sass.format_table(out["resources"]))
    if out["autotune"]:
        print("autotune:", {k: v for k, v in out["autotune"].items() if k in ("winner", "seconds", "error", "key")})
    print(f"wrote {args.out} in {out['seconds']:.0f} s; errors: {len(out['errors'])}")


if __name__ == "__main__":
    main()
