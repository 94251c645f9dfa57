"""Every kernel module, imported once so that it registers itself.

SIMT (Numba CUDA) rungs are numbered by lineage; the tensor-core (Triton) kernels are registered
where Triton and torch are installed, and import them on first use.
"""

from .. import _cuda  # noqa: F401  (real GPU or simulator, decided before numba.cuda loads)
from .cpu import blas, naive  # noqa: F401
from .simt import broken_nosync, k01_naive, k02_smem_tiled, k03_bank_conflicts, k04_register_blocked, k05_interior_fastpath, k06_block_tiling_2d, k07_smem_transposed, k08_vectorized, k09_double_buffer, k10_warptile, k11_autotuned, k12_skinny_m, k13_splitk_tiles  # noqa: F401
from .simt import k20_mixed_half  # noqa: F401
from . import tensorcore  # noqa: F401
