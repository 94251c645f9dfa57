"""Tests that need a real CUDA GPU: run on the device with `pytest -m gpu`."""

import numpy as np
import pytest

import tilegemm
from tilegemm import registry, validate

pytestmark = pytest.mark.gpu

SIZES = [(128, 128, 128), (1024, 1024, 1024), (4096, 4096, 4096)]
AWKWARD = [(1, 1, 1), (5, 23, 7), (17, 33, 65), (1000, 1, 1000), (4095, 4097, 1023), (64, 64, 3)]


def gpu_kernels():
    return [k.name for k in registry.all_kernels() if k.backend == "simt" and "broken" not in k.tags
            and k.supports("float32")]


@pytest.mark.parametrize("shape", SIZES + AWKWARD, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("name", gpu_kernels())
def test_kernel_on_gpu(name, shape):
    m, n, k = shape
    a, b = validate.random_operands(m, n, k, seed=7)
    c = tilegemm.matmul(a, b, kernel=name)
    chk = validate.check(c, a, b, kernel=name)
    assert chk.ok, str(chk)


def _no_host_round_trip(monkeypatch):
    from tilegemm import arrays

    def refuse(*a, **k):
        raise AssertionError("a CUDA operand went through the host")

    monkeypatch.setattr(arrays, "host_view", refuse)


def test_torch_cuda_in_place(monkeypatch):
    torch = pytest.importorskip("torch")
    _no_host_round_trip(monkeypatch)
    a, b = validate.random_operands(300, 200, 100, seed=1)
    ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
    c = tilegemm.matmul(ta, tb)
    assert isinstance(c, torch.Tensor) and c.is_cuda and c.dtype == torch.float32
    assert validate.check(c.cpu().numpy(), a, b).ok
    out = torch.empty(300, 200, device="cuda")
    assert tilegemm.matmul(ta, tb, out=out) is out
    assert validate.check(out.cpu().numpy(), a, b).ok
    tt = ta.t()  # a non-contiguous view, used in place
    c2 = tilegemm.matmul(tt, ta)
    assert validate.check(c2.cpu().numpy(), a.T, a).ok


def test_torch_side_stream():
    torch = pytest.importorskip("torch")
    a, b = validate.random_operands(512, 512, 512, seed=2)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
        c = tilegemm.matmul(ta, tb) * 2  # ordered on s after our kernel
    torch.cuda.synchronize()
    assert validate.check(c.cpu().numpy() / 2, a, b).ok


def test_cupy_in_place(monkeypatch):
    cp = pytest.importorskip("cupy")
    _no_host_round_trip(monkeypatch)
    a, b = validate.random_operands(70, 90, 50, seed=3)
    c = tilegemm.matmul(cp.asarray(a), cp.asarray(b))
    assert isinstance(c, cp.ndarray)
    assert validate.check(cp.asnumpy(c), a, b).ok


def test_numba_in_place(monkeypatch):
    from numba import cuda

    _no_host_round_trip(monkeypatch)
    a, b = validate.random_operands(70, 90, 50, seed=4)
    c = tilegemm.matmul(cuda.to_device(a), cuda.to_device(b))
    assert validate.check(c.copy_to_host(), a, b).ok


def test_device_out_overlap_refused():
    torch = pytest.importorskip("torch")
    t = torch.ones(8, 8, device="cuda")
    with pytest.raises(tilegemm.LayoutError):
        tilegemm.matmul(t, torch.ones(8, 8, device="cuda"), out=t)


def test_device_out_interleaved_with_an_input_is_written():
    """CUDA tensors whose elements interleave (a buffer's even and odd columns) share no memory:
    matmul writes the odd ones from the even ones, on the tensor cores and the SIMT path, twice (the
    plan kept by the first call is refused by its address-range test: each call goes by the slow
    path, whose test is exact); gemm takes c there with beta (C = A·B + C, c read and written)."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    for dt in (torch.bfloat16, torch.float32):
        buf = torch.randn(64, 256, device="cuda").to(dt)
        a, out = buf[:, ::2], buf[:, 1::2]
        b = torch.randn(128, 128, device="cuda").to(dt)
        before, want = a.clone(), (a.double() @ b.double())
        for _ in range(2):
            assert tilegemm.matmul(a, b, out=out) is out
            torch.testing.assert_close(out.double(), want, rtol=2e-2, atol=2e-1)
        assert torch.equal(a, before)
    buf = torch.randn(64, 256, device="cuda", dtype=torch.bfloat16)
    a, c = buf[:, ::2], buf[:, 1::2]
    b = torch.randn(128, 128, device="cuda", dtype=torch.bfloat16)
    want = a.double() @ b.double() + c.double()
    assert tilegemm.gemm(a, b, c=c, beta=1.0, out_dtype=torch.bfloat16) is c
    torch.testing.assert_close(c.double(), want, rtol=2e-2, atol=2e-1)


def test_out_of_memory_is_a_clear_error():
    a = np.lib.stride_tricks.as_strided(np.zeros(1, np.float32), shape=(200_000, 200_000), strides=(0, 0))
    with pytest.raises(tilegemm.OutOfDeviceMemory, match="MiB free"):
        tilegemm.matmul(a, a, kernel="register_blocked")


def test_out_of_memory_on_the_tensor_cores_is_a_clear_error():
    """A 300,000² BF16 result (180 GB) from small stride-0 operands: OutOfDeviceMemory with the
    bytes needed and free, not torch's trace."""
    torch = pytest.importorskip("torch")
    a = torch.ones(1, 16, device="cuda", dtype=torch.bfloat16).expand(300_000, 16)
    with pytest.raises(tilegemm.OutOfDeviceMemory, match="MiB of device memory, .* MiB free"):
        tilegemm.matmul(a, a.t())


def test_race_on_gpu():
    from tilegemm import race

    runs = race.race(256, 256, 256, trials=3)
    assert all(r.check.ok for r in runs if r.kernel == race.CORRECT)
    assert any(not r.check.ok for r in runs if r.kernel == race.BROKEN)


def test_racecheck_flags_the_broken_kernel():
    from tilegemm import sanitize

    if not sanitize.available():
        pytest.skip("compute-sanitizer is not on the PATH")
    hazards, summary = sanitize.racecheck("broken_nosync", 32)
    assert hazards > 0, summary
    hazards_ok, summary_ok = sanitize.racecheck("smem_tiled_32", 32)
    assert hazards_ok == 0, summary_ok


def test_hold_keeps_launch_latency_out_of_event_times():
    """A 1×1×1 product (a few µs on the GPU) launched from Python (≈ 27 µs of host time on the H200):
    with the hold, the events bracket the kernel alone, well under one launch. Bare events may
    (the driver sends the first event to the GPU before the launch) or may not (it sends them
    together) take the launch in, so bare is only an upper bound here."""
    from numba import cuda

    from tilegemm.bench.timing import DeviceClock, measure

    kern = registry.get("naive")
    a = cuda.to_device(np.ones((1, 1), np.float32))
    c = cuda.device_array((1, 1), np.float32)
    bare = measure(lambda: kern.launch(a, a, c), clock=DeviceClock(hold_us=0), budget_s=0.3)
    held = measure(lambda: kern.launch(a, a, c), clock=DeviceClock(hold_us=200), budget_s=0.3)
    assert held.median_ms < 0.010 and held.median_ms <= bare.median_ms, (held.median_ms, bare.median_ms)
