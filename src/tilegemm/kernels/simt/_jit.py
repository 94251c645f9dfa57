"""`cuda.jit` options that only the real compiler knows, dropped under the simulator.

    @kernel(launch_bounds=(256, 2))   # registers capped so that 2 blocks of 256 fit an SM
    @inline_device                    # a device function inlined at the NVVM IR level

The simulator's `cuda.jit` accepts neither `launch_bounds`, `max_registers` nor `forceinline`;
it runs the Python function as written, so leaving them out there changes no result.
"""

from __future__ import annotations

from ... import _cuda
from numba import cuda


def kernel(**opts):
    if _cuda.SIMULATOR:
        return cuda.jit
    opts = {k: v for k, v in opts.items() if v is not None}
    return cuda.jit(**opts) if opts else cuda.jit


def inline_device(fn):
    """A device function the kernels call, inlined at the NVVM IR level (`forceinline`).
    Under the simulator it is the plain Python function."""
    if _cuda.SIMULATOR:
        return fn
    return cuda.jit(device=True, forceinline=True)(fn)
