"""Decide, once and before Numba's CUDA module is imported, whether a real GPU is there.

Numba chooses between the real CUDA driver and its simulator when `numba.cuda` is first
imported, from the environment variable NUMBA_ENABLE_CUDASIM. We probe the driver with
ctypes (cuInit + cuDeviceGetCount), which needs no CUDA Python package, and switch the
simulator on when no device answers, so the lab and the library run on a laptop.

`TILEGEMM_SIMULATOR=1` forces the simulator on a GPU machine; `=0` forbids it.

Both are made on first use (`_cuda.SIMULATOR`, `_cuda.cuda`: module attributes computed by
`__getattr__`), so that `import tilegemm` neither probes the driver nor imports Numba.
"""

from __future__ import annotations

import ctypes
import os
import sys

from . import env

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
    if forced is not None and env.flag("TILEGEMM_SIMULATOR"):
        os.environ[_SIM_VAR] = "1"
        return True
    if os.environ.get(_SIM_VAR, "0") not in ("", "0"):
        return True
    if forced is None and _driver_device_count() == 0:
        os.environ[_SIM_VAR] = "1"
        return True
    return False


def __getattr__(name: str):
    """SIMULATOR (the decision) and cuda (numba.cuda, imported after it), made on first access."""
    if name == "SIMULATOR":
        value = _decide()
    elif name == "cuda":
        globals().setdefault("SIMULATOR", _decide())
        from numba import cuda as value  # must follow the decision above
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def has_gpu() -> bool:
    """A real CUDA device is usable."""
    mod = sys.modules[__name__]
    return not mod.SIMULATOR and mod.cuda.is_available()


def gpu_backend_label() -> str:
    return "Numba CUDA simulator" if sys.modules[__name__].SIMULATOR else "CUDA GPU"
