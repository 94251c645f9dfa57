"""Test set-up: GPU tests are marked `gpu` and run on a machine with a CUDA GPU (`pytest -m gpu`).

Without a GPU, tilegemm runs its Numba kernels under Numba's CUDA simulator, so every kernel is
still exercised here on tiny shapes; only tests that need real hardware (speed, large sizes,
torch/CuPy CUDA tensors, compute-sanitizer) are skipped, and they say so.
"""

import pytest

import tilegemm._cuda as _cuda


def pytest_collection_modifyitems(config, items):
    if _cuda.has_gpu():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run `pytest -m gpu` on a GPU machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
