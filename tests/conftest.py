"""Test set-up: GPU tests are marked `gpu` and run on a machine with a CUDA GPU (`pytest -m gpu`).

Without a GPU, tilegemm runs its Numba kernels under Numba's CUDA simulator, so every kernel is
still exercised here on tiny shapes; only tests that need real hardware (speed, large sizes,
torch/CuPy CUDA tensors, compute-sanitizer) are skipped, and they say so.
"""

from collections import defaultdict
from pathlib import Path

import pytest

import _shards
import tilegemm._cuda as _cuda


def pytest_addoption(parser):
    parser.addoption("--shard", default="", metavar="I/N",
                     help="run shard I (0-based) of N, the tests dealt by their recorded time "
                          "(tests/durations.json, CPU runs; a test not in it counts as the median, as "
                          "every GPU test does) so the shards take about as long: N processes side by "
                          "side share the CPU's cores (or one GPU)")
    parser.addoption("--record-durations", default="", metavar="PATH",
                     help="merge each test's time (set-up, call, tear-down) into PATH, the JSON "
                          "that --shard deals by; safe from shards side by side")


DURATIONS = Path(__file__).with_name("durations.json")


@pytest.hookimpl(trylast=True)  # after -m and -k have deselected: deal only what runs
def pytest_collection_modifyitems(config, items):
    shard = config.getoption("--shard")
    if shard:
        try:
            i, n = (int(x) for x in shard.split("/"))
        except ValueError:
            raise pytest.UsageError(f"--shard {shard}: want I/N, two integers") from None
        if not 0 <= i < n:
            raise pytest.UsageError(f"--shard {shard}: want I/N with 0 <= I < N")
        dealt = _shards.deal(_shards.times(DURATIONS, [it.nodeid for it in items]), n)
        config.hook.pytest_deselected(items=[it for it, s in zip(items, dealt) if s != i])
        items[:] = [it for it, s in zip(items, dealt) if s == i]
    if _cuda.has_gpu():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run `pytest -m gpu` on a GPU machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


_TIMES = defaultdict(float)


def pytest_runtest_logreport(report):
    _TIMES[report.nodeid] += report.duration


def pytest_sessionfinish(session):
    """--record-durations PATH: this process's test times merged into PATH."""
    path = session.config.getoption("--record-durations")
    if path:
        _shards.record(path, _TIMES, session.config.rootpath)


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


@pytest.fixture
def moved():
    """moved(x): a copy of contiguous x at a new address whose address mod 128 is x's (a call key
    holds it, dispatch.ALIGNS), so that a plan made for x serves the copy. torch's CPU allocator
    aligns to 64 bytes only, where a clone on a GPU starts 512-byte aligned as x did."""
    def move(x):
        import torch

        pad = 256 // x.element_size()
        buf = torch.empty(x.numel() + pad, dtype=x.dtype, device=x.device)
        shift = (x.data_ptr() - buf.data_ptr()) % 128 // x.element_size()
        y = buf[shift:shift + x.numel()].view(x.shape)
        y.copy_(x)
        assert y.data_ptr() != x.data_ptr() and (y.data_ptr() - x.data_ptr()) % 128 == 0
        return y

    return move
