"""Test set-up: GPU tests are marked `gpu` and run on a machine with a CUDA GPU (`pytest -m gpu`).

Without a GPU, tilegemm runs its Numba kernels under Numba's CUDA simulator, so every kernel is
still exercised here on tiny shapes; only tests that need real hardware (speed, large sizes,
torch/CuPy CUDA tensors, compute-sanitizer) are skipped, and they say so.
"""

import pytest

import tilegemm._cuda as _cuda


def pytest_addoption(parser):
    parser.addoption("--shard", default="", metavar="I/N",
                     help="run only every N-th collected test, starting at I (0-based): N processes "
                          "in parallel share one GPU, and Triton's compiles spread over the CPU's cores")


def pytest_collection_modifyitems(config, items):
    shard = config.getoption("--shard")
    if shard:
        i, n = (int(x) for x in shard.split("/"))
        if not 0 <= i < n:
            raise pytest.UsageError(f"--shard {shard}: want I/N with 0 <= I < N")
        config.hook.pytest_deselected(items=[it for j, it in enumerate(items) if j % n != i])
        items[:] = [it for j, it in enumerate(items) if j % n == i]
    if _cuda.has_gpu():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run `pytest -m gpu` on a GPU machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
