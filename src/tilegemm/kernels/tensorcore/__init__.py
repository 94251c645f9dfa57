"""Tensor-core kernels written in Triton (FP16/BF16/TF32/FP8). Loaded only when Triton imports."""

from __future__ import annotations

import importlib.util


def triton_status(kernel) -> tuple[bool, str]:
    """Can a Triton kernel run here? Needs torch with a CUDA GPU and Triton."""
    if importlib.util.find_spec("triton") is None or importlib.util.find_spec("torch") is None:
        return False, "needs triton and torch (pip install 'tilegemm[gpu]')"
    import torch

    if not torch.cuda.is_available():
        return False, "needs a CUDA GPU"
    if kernel.requires == "sm_90" and torch.cuda.get_device_capability() < (9, 0):
        return False, "needs a Hopper GPU (sm_90)"
    return True, ""
