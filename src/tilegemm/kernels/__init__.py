"""Every kernel, registered from one table without importing its module or its backend.

SIMT (Numba CUDA) rungs are numbered by lineage; the CPU baselines sit beside them; the
tensor-core (Triton) rungs are registered by `kernels.tensorcore` where Triton and torch are
installed. A row names the kernel's module and the suffix of its members there: the module
defines `launch<suffix>`, `traffic<suffix>` and, for the GPU kernels, `jit_kernels<suffix>` (the
Numba dispatchers it compiles, for the SASS and resource tables). They are imported on first use,
so `import tilegemm` loads neither Numba nor torch.
"""

from __future__ import annotations

from ..registry import Kernel, lazy, register

_F32_F64 = ("float32", "float64")
_F32 = ("float32",)

# name: (module under tilegemm.kernels, member suffix, backend, dtypes, label, rung, auto rank, options)
_TABLE = {
    "cpu_naive": ("cpu.naive", "", "cpu", _F32_F64, "CPU naive", 0, 0, {}),
    "cpu_blas": ("cpu.blas", "", "cpu", _F32_F64, "CPU BLAS", 0, 1, {}),
    "naive": ("simt.k01_naive", "", "simt", _F32_F64, "GPU naive", 1, 1, {}),
    "smem_tiled_16": ("simt.k02_smem_tiled", "_16", "simt", _F32_F64, "GPU tiled-16", 2, 2, {}),
    "smem_tiled_32": ("simt.k02_smem_tiled", "_32", "simt", _F32_F64, "GPU tiled-32", 2, 3, {}),
    "broken_nosync": ("simt.broken_nosync", "", "simt", _F32_F64, "GPU broken (no sync)", 2, 0,
                      dict(teaching=True, tags=("broken",))),
    "smem32_conflicted": ("simt.k03_bank_conflicts", "_conflicted", "simt", _F32_F64, "GPU tiled-32 conflicted", 3, 0,
                          dict(teaching=True)),
    "smem32_padded": ("simt.k03_bank_conflicts", "_padded", "simt", _F32_F64, "GPU tiled-32 padded", 3, 0,
                      dict(teaching=True)),
    "register_blocked": ("simt.k04_register_blocked", "", "simt", _F32_F64, "GPU register-blocked", 4, 4, {}),
    "interior_fastpath": ("simt.k05_interior_fastpath", "", "simt", _F32_F64, "GPU 4x4 + interior fast path", 5, 5,
                          {}),
    "block_tiling_2d": ("simt.k06_block_tiling_2d", "", "simt", _F32_F64, "GPU 8x8 block-tiled", 6, 6, {}),
    "smem_transposed": ("simt.k07_smem_transposed", "", "simt", _F32_F64, "GPU 8x8 A-transposed LDS.128", 7, 7, {}),
    "vectorized": ("simt.k08_vectorized", "", "simt", _F32, "GPU 8x8 LDG.128", 8, 8, dict(needs_contiguous=True)),
    "double_buffer": ("simt.k09_double_buffer", "", "simt", _F32, "GPU 8x8 double-buffered", 9, 9,
                      dict(needs_contiguous=True)),
    "warptile": ("simt.k10_warptile", "", "simt", _F32, "GPU warp-tiled", 10, 10, dict(needs_contiguous=True)),
    "autotuned": ("simt.k11_autotuned", "", "simt", _F32, "GPU warp-tiled, autotuned", 11, 11,
                  dict(needs_contiguous=True)),
    "skinny_m": ("simt.k12_skinny_m", "", "simt", _F32, "GPU k11 + skinny-M split-K", 12, 12,
                 dict(needs_contiguous=True)),
    "splitk_tiles": ("simt.k13_splitk_tiles", "", "simt", _F32, "GPU k12 + split-K tiles", 13, 13,
                     dict(needs_contiguous=True)),
    "unrolled": ("simt.k14_unrolled", "", "simt", _F32, "GPU warp-tiled, generated straight-line", 14, 0,
                 dict(needs_contiguous=True)),  # never auto: k15 is the same kernel with one block per SM
    "budget": ("simt.k15_register_budget", "", "simt", _F32, "GPU k14 + register budget (1 block/SM)", 15, 15,
               dict(needs_contiguous=True)),
    "big_tile": ("simt.k16_big_tile", "", "simt", _F32, "GPU k15 + 16x8 a thread, BK 16", 16, 16,
                 dict(needs_contiguous=True)),
    "splitk_unrolled": ("simt.k17_splitk_unrolled", "", "simt", _F32, "GPU k16 + split-K generated tiles", 17, 17,
                        dict(needs_contiguous=True, reads_wt=True)),
    "mixed_half": ("simt.k20_mixed_half", "", "simt", ("float16",), "GPU FP16-in FP32-acc", 20, 2, {}),
}


def _register() -> None:
    for name, (module, suffix, backend, dtypes, label, rung, rank, options) in _TABLE.items():
        path = f"{__name__}.{module}"
        jit = lazy(f"{path}:jit_kernels{suffix}") if backend == "simt" else None
        register(Kernel(name=name, backend=backend, dtypes=dtypes, launch=lazy(f"{path}:launch{suffix}"),
                        traffic=lazy(f"{path}:traffic{suffix}"), label=label, rung=rung, module=path,
                        auto_rank=rank, jit_kernels=jit, **options))


_register()

from . import tensorcore  # noqa: E402,F401  (registers the Triton rungs; imports neither torch nor Triton)
