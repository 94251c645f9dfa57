"""Host-side cost of one call at a tiny size, where the kernel itself takes microseconds.

For a 64×64 product the GPU work is a few microseconds; what a caller pays is the time until
the call returns: argument checks, dispatch, array wrapping, the launch itself. We time many
calls one by one with the host clock (no synchronisation inside a call: launches are
asynchronous, and the queue is drained between batches so it never fills) and report the
median and quartiles per call, for:
    tilegemm.matmul on Numba device arrays, on torch CUDA tensors (GPU),
    torch.mm on torch CUDA tensors (the yardstick: cuBLAS through torch's dispatcher),
    tilegemm.matmul on NumPy arrays with kernel="cpu_blas" beside numpy.matmul (host dispatch,
    the only pair measurable without a GPU).
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from .. import _cuda


def time_calls(fn, calls: int = 2000, warmup: int = 20, sync=None, batch: int = 100) -> dict:
    """Median/quartiles of the wall-clock time of `fn()` over `calls` calls, µs per call."""
    for _ in range(warmup):
        fn()
    if sync:
        sync()
    samples = []
    done = 0
    while done < calls:
        for _ in range(min(batch, calls - done)):
            t0 = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - t0) * 1e6)
        done += min(batch, calls - done)
        if sync:
            sync()
    q = statistics.quantiles(samples, n=4, method="inclusive") if len(samples) >= 4 else [min(samples), 0, max(samples)]
    return dict(median_us=statistics.median(samples), q1_us=q[0], q3_us=q[2], calls=len(samples))


def measure_overhead(size: int = 64, calls: int = 2000, dtype: str = "float32", progress=None) -> dict:
    import tilegemm

    results: dict = {}
    a, b = (np.random.default_rng(0).uniform(-1, 1, (size, size)).astype(dtype) for _ in range(2))
    c = np.empty((size, size), dtype=dtype)
    results["numpy.matmul (host)"] = time_calls(lambda: np.matmul(a, b, out=c), calls)
    results["tilegemm.matmul cpu_blas (host)"] = time_calls(lambda: tilegemm.matmul(a, b, kernel="cpu_blas", out=c),
                                                            calls)
    if _cuda.has_gpu():
        cuda = _cuda.cuda
        ad, bd, cd = cuda.to_device(a), cuda.to_device(b), cuda.device_array((size, size), dtype=dtype)
        results["tilegemm.matmul (Numba device arrays)"] = dict(time_calls(
            lambda: tilegemm.matmul(ad, bd, out=cd), calls, sync=cuda.synchronize), kernel=tilegemm.plan(ad, bd).kernel.name)
        try:
            import torch

            ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
            tc = torch.empty((size, size), device="cuda", dtype=ta.dtype)
            results["tilegemm.matmul (torch CUDA tensors)"] = dict(time_calls(
                lambda: tilegemm.matmul(ta, tb, out=tc), calls, sync=torch.cuda.synchronize),
                kernel=tilegemm.plan(ta, tb).kernel.name)
            results["torch.mm (torch CUDA tensors)"] = time_calls(
                lambda: torch.mm(ta, tb, out=tc), calls, sync=torch.cuda.synchronize)
        except ImportError:
            pass
    if progress:
        for name, r in results.items():
            progress(f"  overhead {name:40s} {r['median_us']:8.1f} µs per call (median of {r['calls']})")
    return dict(shape=f"{size}×{size}×{size} {dtype}", results=results)
