"""The SIMT ladder: Numba CUDA kernels, one file per rung (k01_naive.py …), plus the deliberately
broken one. Importing this package makes `tilegemm._cuda`'s choice (a real GPU or Numba's
simulator) before any rung imports numba.cuda."""

from ... import _cuda

_cuda.cuda  # noqa: B018  (the decision, then numba.cuda bound to it)
