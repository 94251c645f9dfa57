"""No device memory kept across 10,000 repeated calls, per path: torch's allocator (what tilegemm
allocates through torch) and the driver's free memory (Numba's allocations, plans, descriptors,
Triton's modules) before and after, once warm. TILEGEMM_LEAK_JSON writes the figures. The driver's
figure is the whole GPU's: run this module with no other process on the GPU (beside other test
shards it failed on their allocations, 106 MiB, while torch's figure held)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

CALLS = 10_000
RECORDS: list = []


def _paths():
    import tilegemm

    dev = "cuda"
    t = lambda *s, dt=torch.bfloat16: torch.randn(*s, device=dev).to(dt)  # noqa: E731
    s = torch.full((1,), 0.5, device=dev)
    fp8 = lambda *sh: (torch.rand(*sh, device=dev) - 0.5).to(torch.float8_e4m3fn)  # noqa: E731
    host = np.ones((64, 64), np.float32)
    return {
        "matmul bf16 512³ (plan)": (tilegemm.matmul, (t(512, 512), t(512, 512)), {}),
        "matmul fp16 777×1234×4321 (realigned, plan)": (tilegemm.matmul, (t(777, 4321, dt=torch.float16),
                                                                          t(4321, 1234, dt=torch.float16)), {}),
        "matmul fp32 256³ (SIMT)": (tilegemm.matmul, (t(256, 256, dt=torch.float32), t(256, 256, dt=torch.float32)), {}),
        "matmul bf16 batched (4,128,256)@(256,64)": (tilegemm.matmul, (t(4, 128, 256), t(256, 64)), {}),
        "gemm tf32 300×520×256": (tilegemm.gemm, (t(300, 256, dt=torch.float32), t(256, 520, dt=torch.float32)),
                                  dict(precision="tf32")),
        "gemm fp8 16×4096×4096 (split-K)": (tilegemm.gemm, (fp8(16, 4096), fp8(4096, 4096).t()),
                                            dict(scale_a=s, scale_b=s)),
        "matmul numpy host 64³ (copies)": (tilegemm.matmul, (host, host), {}),
    }


def _memory():
    torch.cuda.synchronize()
    return torch.cuda.memory_allocated(), torch.cuda.mem_get_info()[0]


PATHS = ["matmul bf16 512³ (plan)", "matmul fp16 777×1234×4321 (realigned, plan)", "matmul fp32 256³ (SIMT)",
         "matmul bf16 batched (4,128,256)@(256,64)", "gemm tf32 300×520×256", "gemm fp8 16×4096×4096 (split-K)",
         "matmul numpy host 64³ (copies)"]


@pytest.mark.parametrize("path", PATHS)
def test_no_device_memory_kept_over_10000_calls(path):
    fn, args, kw = _paths()[path]
    for _ in range(100):  # warm: compiles, plans, the caching allocator's blocks
        fn(*args, **kw)
    alloc0, free0 = _memory()
    for _ in range(CALLS):
        fn(*args, **kw)
    alloc1, free1 = _memory()
    rec = dict(path=path, calls=CALLS, torch_allocated_before=alloc0, torch_allocated_after=alloc1,
               driver_free_before=free0, driver_free_after=free1)
    RECORDS.append(rec)
    out = os.environ.get("TILEGEMM_LEAK_JSON")
    if out:
        from tilegemm.bench.results import environment, write_json

        write_json(out, json.dumps(dict(schema="tilegemm.leaks/1", environment=environment(), records=RECORDS),
                                   indent=1))
    assert alloc1 == alloc0, rec
    assert free0 - free1 < 2**20 * 8, rec  # the driver's view: under 8 MiB (its own bookkeeping)
