"""tilegemm: a GPU matrix-multiplication lab and library.

    import tilegemm
    c = tilegemm.matmul(a, b)           # NumPy, torch, CuPy or Numba arrays; returns the same kind
    tilegemm.kernels()                  # what is registered and what runs here
    print(tilegemm.explain(a, b))       # which kernel "auto" picks, and why
    c = tilegemm.gemm(a16, b16)         # tensor cores (Triton): fp16/bf16/tf32/fp8, batched, alpha/beta
"""

from . import kernels as _kernel_modules  # noqa: F401  (registers every kernel, importing no backend;
#                                           imported before the name `kernels` is rebound to the listing function)
from .api import explain, kernels, matmul, plan
from .tensorcore_api import gemm
from .errors import (
    DeviceError,
    DTypeError,
    LayoutError,
    OutOfDeviceMemory,
    ShapeError,
    TileGemmError,
    UnknownKernel,
)

__version__ = "0.1.0"

__all__ = [
    "matmul", "gemm", "explain", "kernels", "plan",
    "TileGemmError", "ShapeError", "DTypeError", "DeviceError", "LayoutError",
    "OutOfDeviceMemory", "UnknownKernel",
]
