"""Decide, once and before Numba's CUDA module is imported, whether a real GPU is there.

Numba chooses between the real CUDA driver and its simulator when `numba.cuda` is first
imported, from the environment variable NUMBA_ENABLE_CUDASIM. We probe the driver with
ctypes (cuInit + cuDeviceGetCount), which needs no CUDA Python package, and switch the
simulator on when no device answers, so the lab and the library run on a laptop.

`TILEGEMM_SIMULATOR=1` forces the simulator on a GPU machine; `=0` forbids it.
"""

from __future__ import annotations

import ctypes
import os
import sys

_SIM_VAR = "NUMBA_ENABLE_CUDASIM"


def _driver_device_count() -> int:
    for name in ("libcuda.so.1", "libcuda.so", "nvcuda.dll", "libcuda.dylib"):
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        try:
            if lib.cuInit(0) != 0:
                return 0
            count = ctypes.c_int(0)
            if lib.cuDeviceGetCount(ctypes.byref(count)) != 0:
                return 0
            return count.value
        except AttributeError:
            return 0
    return 0


def _decide() -> bool:
    """Return True when the simulator is (or will be) in use."""
    forced = os.environ.get("TILEGEMM_SIMULATOR")
    if "numba.cuda" in sys.modules:  # someone imported it first: live with their choice
        from numba import config

        return bool(config.ENABLE_CUDASIM)
    if forced is not None and forced.strip() not in ("", "0"):
        os.environ[_SIM_VAR] = "1"
        return True
    if os.environ.get(_SIM_VAR, "0") not in ("", "0"):
        return True
    if forced is None and _driver_device_count() == 0:
        os.environ[_SIM_VAR] = "1"
        return True
    return False


SIMULATOR: bool = _decide()

from numba import cuda  # noqa: E402  (must follow the decision above)


def has_gpu() -> bool:
    """A real CUDA device is usable."""
    return not SIMULATOR and cuda.is_available()


def gpu_backend_label() -> str:
    return "Numba CUDA simulator" if SIMULATOR else "CUDA GPU"
