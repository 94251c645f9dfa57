"""Where an eager call's time goes on the shapes that lose in eager use but not on the device clock
(issue 16): per shape, the host µs a call takes while the GPU is held (calls only queued), the
wall µs a call takes back to back, torch's two figures beside, the plan's launches and scratch, and
the top of a cProfile of the held calls.

    python scripts/device/host_path_probe.py --json $OUT/host-path.json
"""

import argparse
import cProfile
import io
import json
import pstats
import time

import torch

import tilegemm
from tilegemm import dispatch

CASES = [("tf32", 64, 64, 64), ("tf32", 256, 256, 256), ("tf32", 384, 384, 384), ("tf32", 512, 512, 512),
         ("tf32", 128, 1024, 8192), ("tf32", 1, 1024, 4096), ("tf32", 1, 14336, 4096),
         ("bf16", 64, 64, 64), ("bf16", 256, 256, 256), ("bf16", 100, 12345, 678), ("bf16", 1024, 1024, 8192)]


def per_call_us(fn, n, hold_ms=0.0):
    torch.cuda.synchronize()
    if hold_ms:
        torch.cuda._sleep(int(hold_ms * 1.98e6))  # cycles at about 1.98 GHz
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    return (t1 - t0) / n * 1e6, (t2 - t0) / n * 1e6


def held_us(fn, n=200, reps=5):
    """Host µs a call of fn while the GPU is held (so calls only queue; n under the launch queue's
    depth): the median of reps."""
    return sorted(per_call_us(fn, n, hold_ms=n * 0.06)[0] for _ in range(reps))[reps // 2]


def launch_parts(m, n, dtype, plan, a, b):
    """Where a planned call's host time goes, each part alone with the GPU held: the output's
    allocation, the plan's run, each launch with its addresses bound, and the bare driver call."""
    c = torch.empty((m, n), dtype=dtype, device="cuda")
    stream = torch.cuda.current_stream().cuda_stream
    addresses = (a.data_ptr(), b.data_ptr(), c.data_ptr(), c.data_ptr(), *plan.scales)
    parts = dict(empty=held_us(lambda: torch.empty((m, n), dtype=dtype, device="cuda")),
                 run_with_out=held_us(lambda: plan.run(a.data_ptr(), b.data_ptr(), c, 0, 0)), launches=[])
    if plan.scratch:
        return parts
    for launch in plan.launches:
        launch(addresses, stream)
        bare = lambda: launch._launch(launch._config_ref, launch._function, launch._params_ref, None)  # noqa: E731
        parts["launches"].append(dict(name=launch.name, grid=launch.grid, block=launch.block, shared=launch.shared,
                                      param_bytes=len(launch.parameters()), bound_us=held_us(lambda: launch(addresses, stream)),
                                      driver_us=held_us(bare)))
    return parts


def variants(m, n, dtype, plan, a, b):
    """Host µs, GPU held, of the ways a call could allocate its output and reach the driver: the
    plan's torch.empty beside other allocations, and the bound launch beside cuLaunchKernel (not
    Ex) on the same function, grid and parameters."""
    import ctypes

    from tilegemm import launcher

    dev = a.device
    shape = (m, n)
    out = dict(alloc={
        "torch.empty(shape, dtype, device)": held_us(lambda: torch.empty(shape, dtype=dtype, device=dev)),
        "torch.empty(m, n, dtype, device)": held_us(lambda: torch.empty(m, n, dtype=dtype, device=dev)),
        "a.new_empty(shape)": held_us(lambda: a.new_empty(shape)),
        "torch.empty_strided": held_us(lambda: torch.empty_strided(shape, (n, 1), dtype=dtype, device=dev)),
        "torch.empty(shape, dtype, device=int)": held_us(lambda: torch.empty(shape, dtype=dtype, device=dev.index)),
    })
    if plan.scratch or len(plan.launches) != 1:
        return out
    launch = plan.launches[0]
    c = torch.empty(shape, dtype=dtype, device=dev)
    stream = torch.cuda.current_stream().cuda_stream
    launch((a.data_ptr(), b.data_ptr(), c.data_ptr(), c.data_ptr(), *plan.scales), stream)
    lib = ctypes.CDLL("libcuda.so.1")
    legacy = lib.cuLaunchKernel
    legacy.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
    legacy.restype = ctypes.c_int
    g, bl = launch.grid, launch.block
    fn, params = launch._function, launch._params_ref
    args = (fn, *g, *bl, launch.shared, ctypes.c_void_p(stream), params, None)
    ex = launcher._driver().launch
    cfg = launch._config_ref
    out["launch"] = {
        "Launch.__call__ (bound)": held_us(lambda: launch((a.data_ptr(), b.data_ptr(), c.data_ptr(), c.data_ptr(),
                                                           *plan.scales), stream)),
        "cuLaunchKernelEx via ctypes": held_us(lambda: ex(cfg, fn, params, None)),
        "cuLaunchKernel via ctypes": held_us(lambda: legacy(*args)),
        "empty lambda": held_us(lambda: None),
    }
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--json")
    p.add_argument("--n", type=int, default=400)
    p.add_argument("--launches", action="store_true", help="also time each part of a planned call")
    p.add_argument("--cases", help="dtype:MxNxK,... instead of the default cases")
    p.add_argument("--variants", action="store_true", help="also time other allocations and driver calls")
    args = p.parse_args()
    cases = CASES
    if args.cases:
        cases = [(c.split(":")[0], *map(int, c.split(":")[1].split("x"))) for c in args.cases.split(",")]
    out = dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, date=time.strftime("%Y-%m-%d %H:%M UTC"),
               cases=[])
    for dt, m, n, k in cases:
        torch.backends.cuda.matmul.allow_tf32 = dt == "tf32"
        dtype = torch.float32 if dt == "tf32" else torch.bfloat16
        a = torch.randn(m, k, device="cuda").to(dtype)
        b = torch.randn(k, n, device="cuda").to(dtype)
        ours = (lambda: tilegemm.gemm(a, b, precision="tf32")) if dt == "tf32" else (lambda: tilegemm.gemm(a, b))
        ref = lambda: torch.matmul(a, b)  # noqa: E731
        for _ in range(30):
            ours(), ref()
        before = dict(plans=dispatch.STATS["plans_built"], not_planned=dict(dispatch.STATS["not_planned"]))
        rec = dict(dtype=dt, m=m, n=n, k=k)
        for name, fn in (("ours", ours), ("torch", ref)):
            held = [per_call_us(fn, args.n, hold_ms=args.n * 0.05) for _ in range(5)]
            loop = [per_call_us(fn, args.n) for _ in range(5)]
            rec[name] = dict(host_us_held=sorted(h[0] for h in held)[2], wall_us_held=sorted(h[1] for h in held)[2],
                             loop_us=sorted(x[1] for x in loop)[2])
        plans = [pl for pl in dispatch._PLANS.values() if isinstance(pl, dispatch.LaunchPlan)  # (not a ViewPlan of one)
                 and tuple(pl.out_shape) == (m, n) and pl.out_dtype == dtype]
        rec["plan"] = [dict(launches=len(pl.launches), scratch=[(int(x), str(d)) for x, d in pl.scratch],
                            stream_bound=pl.stream is not None) for pl in plans]
        rec["stats_after"] = dict(plans=dispatch.STATS["plans_built"], not_planned=dict(dispatch.STATS["not_planned"]),
                                  before=before)
        if args.launches and len(plans) == 1:
            rec["parts"] = launch_parts(m, n, plans[0].out_dtype, plans[0], a, b)
            print(f"  parts: {rec['parts']}", flush=True)
        if args.variants and len(plans) == 1:
            rec["variants"] = variants(m, n, plans[0].out_dtype, plans[0], a, b)
            print(f"  variants: {rec['variants']}", flush=True)
        try:
            rec["explain"] = tilegemm.explain(a, b)
        except Exception as e:  # noqa: BLE001
            rec["explain"] = f"{type(e).__name__}: {e}"
        torch.cuda.synchronize()
        torch.cuda._sleep(int(40e-3 * 1.98e9))
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(300):
            ours()
        prof.disable()
        torch.cuda.synchronize()
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(12)
        rec["profile"] = s.getvalue()[-3500:]
        out["cases"].append(rec)
        print(f"{dt} {m}x{n}x{k}: ours host {rec['ours']['host_us_held']:.1f} us (held), loop {rec['ours']['loop_us']:.1f};"
              f" torch host {rec['torch']['host_us_held']:.1f}, loop {rec['torch']['loop_us']:.1f}; plan {rec['plan']}",
              flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
