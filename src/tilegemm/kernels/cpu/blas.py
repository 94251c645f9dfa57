"""cpu_blas: NumPy's matmul, which calls the BLAS library NumPy was built with (OpenBLAS or MKL).

The CPU yardstick: cache blocking, SIMD and all cores, the CPU's counterpart of cuBLAS.
Traffic is not modelled by design (BLAS blocks for the caches); we report the compulsory
(M·K + K·N + M·N)·s bytes, giving intensity 2MNK / ((MK + KN + MN)·s).
"""

import numpy as np

from ...registry import bytes_compulsory

traffic = bytes_compulsory


def launch(a, b, c, stream=None):
    np.matmul(a, b, out=c)
