"""tilegemm: a GPU matrix-multiplication lab and library.

    import tilegemm
    c = tilegemm.matmul(a, b)           # NumPy, torch, CuPy or Numba arrays; returns the same kind
    tilegemm.kernels()                  # what is registered and what runs here
    print(tilegemm.explain(a, b))       # which kernel "auto" picks, and why
    c = tilegemm.gemm(a16, b16)         # tensor cores (Triton): fp16/bf16/tf32/fp8, batched, alpha/beta
    with tilegemm.patch(model):         # a PyTorch model's nn.Linear layers on tilegemm
        model(x)
"""

from . import kernels as _kernel_modules  # noqa: F401  (registers every kernel, importing no backend;
#                                           imported before the name `kernels` is rebound to the listing function)
from .api import explain, kernels, matmul, plan
from .tensorcore_api import gemm
from .errors import (
    AutogradError,
    ConfigError,
    DeviceError,
    DistributedError,
    DTypeError,
    LayoutError,
    MaskedArrayError,
    OutOfDeviceMemory,
    OutOfHostMemory,
    ShapeError,
    TileGemmError,
    UnknownKernel,
)

__version__ = "0.1.0"


def patch(model, *, matmul: bool = False):
    """Route every nn.Linear of a torch model (and with matmul=True its torch.matmul, bmm and @
    calls) through tilegemm, for the dtypes and devices it serves; torch runs the rest. Returns a
    Patch: a context manager (unpatched on exit), with .undo() and .counts. See tilegemm.torchop."""
    from .torchop import patch as _patch

    return _patch(model, matmul=matmul)


__all__ = [
    "matmul", "gemm", "explain", "kernels", "plan", "patch",
    "TileGemmError", "ShapeError", "DTypeError", "DeviceError", "LayoutError", "AutogradError",
    "MaskedArrayError", "OutOfDeviceMemory", "OutOfHostMemory", "ConfigError", "UnknownKernel", "DistributedError",
]
