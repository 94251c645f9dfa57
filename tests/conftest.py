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


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """How many property cases ran and failed (tests/test_properties.py), and a JSON of it where
    TILEGEMM_PROPERTY_JSON says (the GPU profile's summary is committed from there)."""
    import sys

    cases = sys.modules.get("_cases")
    if cases is None or not cases.RAN:
        return
    ran, failed = sum(cases.RAN.values()), sum(cases.FAILED.values())
    per = ", ".join(f"{k} {v}" for k, v in sorted(cases.RAN.items()))
    terminalreporter.write_line(f"property cases: {ran} ran ({per}), {failed} failed")
    path = __import__("os").environ.get("TILEGEMM_PROPERTY_JSON")
    if path:
        import json

        from tilegemm.bench.results import environment

        doc = dict(schema="tilegemm.properties/1", environment=environment(),
                   profile=__import__("os").environ.get("TILEGEMM_PROPERTY_PROFILE", "gpu" if _cuda.has_gpu() else "ci"),
                   ran=dict(cases.RAN), failed=dict(cases.FAILED), exitstatus=int(exitstatus))
        with open(path, "w") as f:
            json.dump(doc, f, indent=1, default=str)
