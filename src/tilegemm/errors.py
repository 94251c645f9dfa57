"""Typed errors. Each names the problem and the values that caused it.

Each is also what NumPy and torch raise in the same case, so code written for `np.matmul` or
`torch.matmul` catches it: a bad shape is a ValueError (NumPy, the array API) and a RuntimeError
(torch); a dtype not served is a TypeError (NumPy) and a RuntimeError (torch)."""


class TileGemmError(Exception):
    """Base class for every error tilegemm raises on purpose."""


class ShapeError(TileGemmError, ValueError, RuntimeError):
    """0-D operands, inner dimensions that differ, batch dimensions that do not broadcast, an `out`
    of the wrong shape."""


class DTypeError(TileGemmError, TypeError, RuntimeError):
    """A dtype the chosen kernel does not support, or operands of different dtypes."""


class MaskedArrayError(TileGemmError, TypeError):
    """A NumPy masked array: its masked values would be multiplied in, where np.ma.dot leaves them
    out; refused rather than silently different."""


class DeviceError(TileGemmError, ValueError):
    """Operands on different devices, a GPU kernel asked for where no GPU (or simulator) exists."""


class LayoutError(TileGemmError, ValueError):
    """Memory layout that cannot be handled (overlapping `out`, unsupported strides)."""


class AutogradError(TileGemmError, RuntimeError):
    """A call that would have to record a gradient and cannot (as torch: `out=` with tensors that
    require grad; `gemm` with alpha, beta, c, scales or TF32/FP8 precision)."""


class ConfigError(TileGemmError, ValueError):
    """An environment variable (tilegemm.env) or a file tilegemm reads holds a value it does not understand."""


class OutOfDeviceMemory(TileGemmError, MemoryError):
    """The operation needs more device memory than is free."""


def says_out_of_memory(e: BaseException) -> bool:
    """Does e report a device allocation that failed for want of memory (torch's, CuPy's and
    Numba's errors are each their own type; their messages say it)?"""
    return "out of memory" in str(e).lower() or "OUT_OF_MEMORY" in str(e)


class OutOfHostMemory(TileGemmError, MemoryError):
    """A host result larger than the memory available (refused before Linux's overcommit lets the
    allocation succeed and the first write has the process killed)."""


class DistributedError(TileGemmError, RuntimeError):
    """A distributed product that cannot run (shards or arguments that disagree, named by rank)
    or that failed (a collective broke: a rank died or the group's timeout passed)."""


class UnknownKernel(TileGemmError, KeyError):
    """No kernel of that name is registered."""

    def __str__(self):  # KeyError quotes its message; we want it plain.
        return str(self.args[0]) if self.args else ""
