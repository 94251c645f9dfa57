"""`tilegemm info`: what this machine offers a GEMM, from the device's own attributes.

Peak estimates are datasheet-style arithmetic: FP32 = SMs × FP32 lanes per SM × 2 (an FMA is two
FLOPs) × boost clock; DRAM = 2 (double data rate) × memory clock × bus width. `tilegemm ceilings`
measures what is actually reached.
"""

from __future__ import annotations

import os
import platform

from . import _cuda

# FP32 and FP64 lanes per SM by compute capability (CUDA C Programming Guide, arithmetic
# instruction throughput table).
FP32_LANES = {(7, 0): 64, (7, 5): 64, (8, 0): 64, (8, 6): 128, (8, 7): 128, (8, 9): 128, (9, 0): 128,
              (10, 0): 128, (12, 0): 128}
FP64_LANES = {(7, 0): 32, (7, 5): 2, (8, 0): 32, (8, 6): 2, (8, 7): 2, (8, 9): 2, (9, 0): 64, (10, 0): 64,
              (12, 0): 2}

ATTRS = [
    ("MULTIPROCESSOR_COUNT", "SMs", "{}"),
    ("MAX_THREADS_PER_BLOCK", "max threads / block", "{}"),
    ("MAX_THREADS_PER_MULTIPROCESSOR", "max threads / SM", "{}"),
    ("MAX_SHARED_MEMORY_PER_BLOCK", "shared memory / block (default)", "{:,} B"),
    ("MAX_SHARED_MEMORY_PER_BLOCK_OPTIN", "shared memory / block (opt-in)", "{:,} B"),
    ("MAX_SHARED_MEMORY_PER_MULTIPROCESSOR", "shared memory / SM", "{:,} B"),
    ("MAX_REGISTERS_PER_BLOCK", "registers / block", "{:,}"),
    ("MAX_REGISTERS_PER_MULTIPROCESSOR", "registers / SM", "{:,}"),
    ("L2_CACHE_SIZE", "L2 cache", "{:,} B"),
    ("CLOCK_RATE", "SM clock (max)", "{} kHz"),
    ("MEMORY_CLOCK_RATE", "memory clock (max)", "{} kHz"),
    ("GLOBAL_MEMORY_BUS_WIDTH", "memory bus width", "{} bit"),
    ("WARP_SIZE", "warp size", "{}"),
]


def gpu_info() -> dict:
    cuda = _cuda.cuda
    dev = cuda.get_current_device()
    info = {"name": dev.name.decode() if isinstance(dev.name, bytes) else dev.name,
            "compute capability": "%d.%d" % dev.compute_capability}
    raw = {}
    for attr, label, fmt in ATTRS:
        try:
            raw[attr] = getattr(dev, attr)
            info[label] = fmt.format(raw[attr])
        except Exception:  # noqa: BLE001  (attribute not exposed by this driver/Numba)
            info[label] = "n/a"
    free, total = cuda.current_context().get_memory_info()
    info["global memory"] = f"{total / 2**30:.1f} GiB ({free / 2**30:.1f} GiB free)"
    cc = dev.compute_capability
    sms, clk = raw.get("MULTIPROCESSOR_COUNT"), raw.get("CLOCK_RATE")
    if sms and clk and cc in FP32_LANES:
        info["peak FP32 (estimate)"] = f"{sms * FP32_LANES[cc] * 2 * clk * 1e3 / 1e12:.1f} TFLOP/s"
        info["peak FP64 (estimate)"] = f"{sms * FP64_LANES[cc] * 2 * clk * 1e3 / 1e12:.1f} TFLOP/s"
    mclk, bus = raw.get("MEMORY_CLOCK_RATE"), raw.get("GLOBAL_MEMORY_BUS_WIDTH")
    if mclk and bus:
        info["peak DRAM bandwidth (estimate)"] = f"{2 * mclk * 1e3 * bus / 8 / 1e12:.2f} TB/s"
    return info


def cpu_info() -> dict:
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    import numpy as np

    blas = "unknown"
    try:
        cfg = np.show_config(mode="dicts")
        blas = cfg.get("Build Dependencies", {}).get("blas", {}).get("name", "unknown")
    except Exception:  # noqa: BLE001  (older NumPy)
        pass
    return {"CPU": model, "cores": str(os.cpu_count()), "NumPy BLAS": blas, "NumPy": np.__version__}


def describe() -> tuple[str, dict]:
    if _cuda.has_gpu():
        return "CUDA GPU", gpu_info()
    if _cuda.SIMULATOR:
        return "Numba CUDA simulator (no GPU found)", {
            "what it is": "kernels run as Python code, one OS thread per CUDA thread",
            "good for": "checking correctness and stepping through kernels on tiny sizes",
            "not for": "timing: simulated times say nothing about GPU speed",
        }
    return "no CUDA device", {}
