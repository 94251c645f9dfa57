"""Helpers shared by the Numba CUDA kernels: one compiled kernel per dtype, grid arithmetic."""

from __future__ import annotations

import functools

import numba
import numpy as np

from ... import _cuda  # noqa: F401  (decides real GPU vs simulator before numba.cuda loads)
from ...registry import ceil_div

SIMT_DTYPES = ("float32", "float64")


def per_dtype(factory):
    """Wrap `factory(DT) -> cuda.jit kernel` so each dtype builds (and later compiles) once.

    Shared and local arrays need their element type at compile time, so the dtype is baked
    into the kernel as a closure constant rather than read from the arguments.
    """

    @functools.lru_cache(maxsize=None)
    def build(dtype_name: str):
        return factory(numba.from_dtype(np.dtype(dtype_name)))

    def get(dtype) -> object:
        return build(np.dtype(dtype).name)

    get.factory = factory
    return get


def grid_2d(m: int, n: int, rows_per_block: int, cols_per_block: int) -> tuple[int, int]:
    """Blocks over C: x runs along columns (N), y along rows (M)."""
    return ceil_div(n, cols_per_block), ceil_div(m, rows_per_block)


def configure(kernel, grid, block, stream=None):
    """kernel[grid, block(, stream)]: the stream only when one is given."""
    return kernel[grid, block] if stream is None else kernel[grid, block, stream]
