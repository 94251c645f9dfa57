"""tilegemm.matmul(a, b, devices=...): A's rows over the GPUs of one host (tilegemm.multigpu).

The plan's arithmetic (rows, panels, chunks) and the refusals run on CPU; the products run on
the GPU machine (`pytest -m gpu`), on every GPU it has (the 2-GPU host for the split itself)."""

import re

import numpy as np
import pytest

import tilegemm
from tilegemm import _cuda, multigpu
from tilegemm.errors import DeviceError, ShapeError


@pytest.mark.parametrize("m,n,k,gpus", [(32768, 32768, 32768, 2), (16384, 16384, 16384, 2), (1000, 1234, 777, 2),
                                        (1, 64, 64, 2), (5, 7, 3, 4), (65536, 8192, 8192, 8), (300, 300, 300, 3),
                                        (1760, 16384, 1024, 8), (1100, 100000, 64, 8)])
@pytest.mark.parametrize("home", [True, False])
def test_split_covers_every_row_once(m, n, k, gpus, home):
    rows = multigpu.split(m, n, k, gpus, 2, home, tflops=700.0, link_gbps=395.0)
    assert len(rows) == gpus + 1 and rows[0] == 0 and rows[-1] == m
    assert all(r0 <= r1 for r0, r1 in zip(rows, rows[1:]))
    if home and m >= gpus * multigpu.ROW_ALIGN:
        sizes = [r1 - r0 for r0, r1 in zip(rows, rows[1:])]
        assert sizes[0] >= max(sizes[1:])  # the home pays no copy, so it takes the most rows
        assert all(r % multigpu.ROW_ALIGN == 0 for r in sizes[1:])
    if not home:
        assert rows == [m * g // gpus for g in range(gpus + 1)]


def test_split_balances_by_the_copies():
    # 32768³ BF16 on 2 GPUs at 700 TFLOP/s and 395 GB/s: the other GPU's copies before its first
    # product and after its last take about 2.0 ms, about 1400 rows' products, so it takes ~700
    # fewer rows than the home (the two then end together)
    m = 32768
    rows = multigpu.split(m, m, m, 2, 2, True, tflops=700.0, link_gbps=395.0)
    row_s = 2 * m * m / 700e12
    lag = (m / 2 / multigpu.FIRST_CHUNKS * m + m * 4096 + m / 2 * 4096) * 2 / 395e9
    home, other = rows[1], m - rows[1]
    assert abs(home * row_s - (lag + other * row_s)) < multigpu.ROW_ALIGN * row_s
    assert 400 < home - other < 1000


def test_split_over_a_chain_counts_the_homes_links():
    # 32768³ BF16 on 4 GPUs: every other GPU's rows of A leave the home's links together before
    # its first panel's last chunk (2.6 ms at 395 GB/s, not the 1.4 ms of one GPU's first chunk),
    # and each GPU down the chain waits one more piece of B's first panel; each then ends with the
    # home, to a row tile
    m, tflops, gbps = 32768, 700.0, 395.0
    row_s = 2 * m * m / (tflops * 1e12)
    lag = multigpu.lags(m, m, m, 4, 2, row_s, gbps)
    assert 2.4e-3 < lag[0] < 3.0e-3 and lag[0] < lag[1] < lag[2]
    rows = multigpu.split(m, m, m, 4, 2, True, tflops=tflops, link_gbps=gbps)
    sizes = [r1 - r0 for r0, r1 in zip(rows, rows[1:])]
    for x, r in zip(lag, sizes[1:]):
        assert abs(sizes[0] * row_s - (x + r * row_s)) < multigpu.ROW_ALIGN * row_s
    assert multigpu.lags(m, m, m, 2, 2, row_s, gbps)[0] < lag[0]  # one other GPU shares the links with none


def test_split_without_a_rate_is_even():
    # no rate known for the shape (the model's infinite rate): the copies cannot be weighed, so no
    # GPU is given fewer rows for them
    assert multigpu.split(1000, 1000, 1000, 4, 2, True, tflops=float("inf"), link_gbps=395.0) == [0, 250, 500, 750, 1000]


def test_fp32_splits_by_the_simt_rate():
    # FP32 runs the SIMT kernels, some 20x slower than BF16's tensor cores: the same copies cost
    # fewer rows' products, so the other GPU takes half (with BF16's rate it took 256 fewer of
    # 8192 at 16384³: the home then ran 3% longer than it needed)
    m = 16384
    bf16 = multigpu.describe_split(m, m, m, (0, 1), 2, 0)
    fp32 = multigpu.describe_split(m, m, m, (0, 1), 4, 0)
    other = lambda rows: rows[1][2] - rows[1][1]  # noqa: E731
    assert other(bf16) < other(fp32) <= m // 2 and m // 2 - other(fp32) <= 2 * multigpu.ROW_ALIGN


@pytest.mark.parametrize("n", [1, 100, 1023, 1024, 4096, 8191, 8192, 32768, 100000])
def test_panels_cover_n(n):
    cuts = multigpu.panels(n)
    assert cuts[0][0] == 0 and cuts[-1][1] == n and all(a[1] == b[0] for a, b in zip(cuts, cuts[1:]))
    assert len(cuts) <= multigpu.PANELS
    assert all(j1 - j0 >= min(n, multigpu.MIN_PANEL) for j0, j1 in cuts[:-1])


@pytest.mark.parametrize("rows", [1, 511, 512, 1000, 16384])
def test_first_panel_row_chunks(rows):
    chunks = multigpu._row_chunks(rows)
    assert chunks[0] == 0 and chunks[-1] == rows and all(a < b for a, b in zip(chunks, chunks[1:]))


@pytest.mark.skipif(_cuda.has_gpu(), reason="the no-GPU refusal is for a machine without a GPU")
def test_devices_without_a_gpu_is_a_clear_error():
    a = np.ones((4, 4), np.float32)
    with pytest.raises(DeviceError, match="devices= splits the product over CUDA GPUs"):
        tilegemm.matmul(a, a, devices="all")



@pytest.mark.parametrize("a, b, devices, error, says", [
    ((4, 5), (4, 5), "all", ShapeError, "inner dimensions differ: a is 4×5, b is 4×5"),  # was 'this machine has none' before the operands
    ((2, 4, 4), (4, 4), "all", ShapeError, "devices= takes 2-D operands"),
    ((4, 4), (4, 4), 0, DeviceError, 'give "all" or a list of GPU ids'),
    ((4, 4), (4, 4), [], DeviceError, "devices= is empty"),
    ((4, 4), (4, 4), [0, 0], DeviceError, "devices names GPU 0 twice"),
    ((4, 4), (4, 4), [0, "cuda:0"], DeviceError, "devices names GPU 0 twice"),
    ((4, 4), (4, 4), [True], DeviceError, "devices has True; give GPU ids"),
    ((4, 4), (4, 4), ["cpu"], DeviceError, "devices has 'cpu'; give GPU ids"),
    ((4, 4), (4, 4), [-1], DeviceError, "devices has -1; give GPU ids"),
])
def test_devices_mistakes_are_said_on_any_machine(a, b, devices, error, says):
    """A mistake in the operands or in the form of devices= is the same error with a GPU or without
    one: it comes before the search for GPUs."""
    with pytest.raises(error, match=re.escape(says)):
        tilegemm.matmul(np.ones(a, np.float32), np.ones(b, np.float32), devices=devices)

# --- on the GPU --------------------------------------------------------------------------------

torch = pytest.importorskip("torch")
gpu = pytest.mark.gpu


def _ref(a, b):
    return (a.double() @ b.double()) if isinstance(a, torch.Tensor) else a.astype(np.float64) @ b.astype(np.float64)


def _close(c, want, rtol):
    c = c.double().cpu() if isinstance(c, torch.Tensor) else torch.from_numpy(np.asarray(c, np.float64))
    want = want.cpu() if isinstance(want, torch.Tensor) else torch.from_numpy(want)
    err = float((c - want).norm() / max(float(want.norm()), 1e-30))
    assert err < rtol, err


@gpu
@pytest.mark.parametrize("shape", [(1000, 1234, 777), (4096, 4096, 4096), (1, 64, 64), (3000, 2500, 129)])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
def test_cuda_operands(shape, dtype):
    m, n, k = shape
    g = torch.Generator(device="cuda").manual_seed(m + n + k)
    a = torch.randn(m, k, device="cuda", generator=g).to(getattr(torch, dtype))
    b = torch.randn(k, n, device="cuda", generator=g).to(getattr(torch, dtype))
    a0, b0 = a.clone(), b.clone()
    c = tilegemm.matmul(a, b, devices="all")
    assert c.device == a.device and c.dtype == a.dtype and c.shape == (m, n)
    _close(c, _ref(a, b), 2e-2 if dtype != "float32" else 1e-5)
    assert torch.equal(a, a0) and torch.equal(b, b0)


@gpu
def test_cuda_strided_out_and_repeats():
    a = torch.randn(2050, 3000, device="cuda").to(torch.bfloat16).t()  # 3000 × 2050, columns contiguous
    b = torch.randn(2050, 4100, device="cuda").to(torch.bfloat16)
    out = torch.empty(4100, 3000, device="cuda", dtype=torch.bfloat16).t()
    want = _ref(a, b)
    for _ in range(3):  # back to back: each call's streams wait for the last
        r = tilegemm.matmul(a, b, devices="all", out=out)
        assert r is out
    _close(out, want, 2e-2)


@gpu
def test_callers_device_and_streams_are_kept(monkeypatch):
    """The call sets each GPU and its stream directly at every step: afterwards (and after a copy
    that fails) the caller's current device and every GPU's current stream are what they were,
    a side stream too, and C is in the order of the caller's stream."""
    count = torch.cuda.device_count()
    a = torch.randn(3000, 2048, device="cuda:0").to(torch.bfloat16)
    b = torch.randn(2048, 2500, device="cuda:0").to(torch.bfloat16)
    want = _ref(a, b)
    side = torch.cuda.Stream(device=0)
    side.wait_stream(torch.cuda.current_stream(0))  # a and b are made
    theirs = {i: torch.cuda.default_stream(i) for i in range(count)}
    if count > 1:  # another GPU's current stream, not its default one, before the call
        assert len([r for r in multigpu.describe_split(3000, 2500, 2048, tuple(range(count)), 2, 0) if r[2] > r[1]]) > 1
        theirs[count - 1] = torch.cuda.Stream(device=count - 1)
        with torch.cuda.device(count - 1):
            torch.cuda.set_stream(theirs[count - 1])

    def unchanged(device, stream0):
        assert torch.cuda.current_device() == device
        assert [torch.cuda.current_stream(i) for i in range(count)] == [stream0] + [theirs[i] for i in range(1, count)]

    try:
        with torch.cuda.stream(side):
            c = tilegemm.matmul(a, b, devices="all")
            unchanged(0, side)
            c2 = c * 1  # on the caller's stream, after C's rows are in
        side.synchronize()
        _close(c2, want, 2e-2)
        with torch.cuda.device(count - 1):
            _close(tilegemm.matmul(a, b, devices="all"), want, 2e-2)
            unchanged(count - 1, theirs[0])
        if count > 1:
            def broken(dst, src, stream):
                raise DeviceError("a copy failed (injected)")

            monkeypatch.setattr(multigpu, "copy_2d", broken)
            with torch.cuda.stream(side), pytest.raises(DeviceError, match="injected"):
                try:
                    tilegemm.matmul(a, b, devices="all")
                finally:
                    unchanged(0, side)
            monkeypatch.undo()
            unchanged(0, theirs[0])
            _close(tilegemm.matmul(a, b, devices="all"), want, 2e-2)
    finally:
        with torch.cuda.device(count - 1):
            torch.cuda.set_stream(torch.cuda.default_stream(count - 1))


@gpu
@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2, reason="needs 2 GPUs")
def test_home_elsewhere_and_only_other_gpus():
    a = torch.randn(3001, 2048, device="cuda:1").to(torch.bfloat16)
    b = torch.randn(2048, 2049, device="cuda:1").to(torch.bfloat16)
    c = tilegemm.matmul(a, b, devices=[0, 1])
    assert c.device == a.device
    _close(c, _ref(a, b), 2e-2)
    c = tilegemm.matmul(a, b, devices=["cuda:0"])  # the home does nothing: every row goes over NVLink
    assert c.device == a.device
    _close(c, _ref(a, b), 2e-2)


@gpu
@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2, reason="needs 2 GPUs")
def test_a_plan_serves_operands_on_a_gpu_that_is_not_current(monkeypatch):
    """A model moved to cuda:1 with cuda:0 current: each repeated call is served by its plan, with
    cuda:1 current for the launch and cuda:0 again after (it was refused, and the slow path built
    the plan again on every call); matmul, gemm and an FP8 gemm with scales of its own."""
    from tilegemm import dispatch

    torch.cuda.set_device(0)
    g = torch.Generator(device="cuda:1").manual_seed(3)
    a = torch.randn(256, 512, device="cuda:1", generator=g).to(torch.bfloat16)
    b = torch.randn(512, 384, device="cuda:1", generator=g).to(torch.bfloat16)
    a8, b8 = a.to(torch.float8_e4m3fn), b.t().contiguous().t().to(torch.float8_e4m3fn)
    calls = {"matmul": lambda: tilegemm.matmul(a, b), "gemm": lambda: tilegemm.gemm(a, b, alpha=0.5),
             "fp8": lambda: tilegemm.gemm(a8, b8)}
    for what, call in calls.items():
        first = call()
        built = []
        real = dispatch._build
        monkeypatch.setattr(dispatch, "_build", lambda *x, **y: built.append(1) or real(*x, **y))
        for _ in range(3):
            again = call()
            assert again.device == a.device and torch.equal(again, first), what
        monkeypatch.setattr(dispatch, "_build", real)
        assert not built and torch.cuda.current_device() == 0, what
    _close(calls["matmul"](), _ref(a, b), 2e-2)


NO_CONTEXT_SCRIPT = r"""
import torch, tilegemm
a = torch.randn(256, 512, device="cuda:1").to(torch.bfloat16)
b = torch.randn(512, 384, device="cuda:1").to(torch.bfloat16)
for _ in range(3):  # the first by the slow path, the others by the plan
    c = tilegemm.matmul(a, b)
torch.cuda.synchronize(1)
print("CONTEXT", torch._C._cuda_hasPrimaryContext(0), torch.cuda.current_device())
"""


@gpu
@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2, reason="needs 2 GPUs")
def test_a_plan_on_another_gpu_makes_no_context_on_the_current_one():
    """A process that uses cuda:1 alone (a model moved there, cuda:0 never touched) has no CUDA
    context on GPU 0, as torch keeps it (its device guards go back without making one): the plan's
    launch goes back to GPU 0 the same way, where cudaSetDevice(0) made a context there (hundreds of
    MB of GPU 0's memory, in every process of a host that runs one a GPU this way)."""
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-c", NO_CONTEXT_SCRIPT], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "CONTEXT False 0" in run.stdout, run.stdout[-500:]


@gpu
@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 3, reason="needs 3 GPUs")
def test_chain_of_gpus_hands_b_on_and_a_failure_ends_it(monkeypatch):
    """Three or more GPUs: B leaves the home once and goes down the chain of the others (a ragged
    product, exact enough, its first panel in pieces); a copy that fails in the chain ends the
    call on every GPU with the error (no GPU left waiting), and the next call is right again."""
    g = torch.Generator(device="cuda").manual_seed(5)
    a = torch.randn(4099, 1029, device="cuda", generator=g).to(torch.bfloat16)
    b = torch.randn(1029, 9001, device="cuda", generator=g).to(torch.bfloat16)
    ids = list(range(torch.cuda.device_count()))
    assert len([r for r in multigpu.describe_split(4099, 9001, 1029, tuple(ids), 2, 0) if r[2] > r[1]]) >= 3
    want = _ref(a, b)
    _close(tilegemm.matmul(a, b, devices="all"), want, 2e-2)

    def broken(dst, src, stream):
        raise DeviceError("a copy failed (injected)")

    monkeypatch.setattr(multigpu, "copy_flat", broken)
    with pytest.raises(DeviceError, match="injected|hands B's panels on"):
        tilegemm.matmul(a, b, devices="all")
    monkeypatch.undo()
    _close(tilegemm.matmul(a, b, devices="all"), want, 2e-2)


@gpu
@pytest.mark.parametrize("kind", ["numpy", "torch-cpu"])
def test_host_operands_through_small_staging_buffers(kind, monkeypatch):
    monkeypatch.setattr(multigpu, "STAGE_BYTES", 1 << 16)  # many chunks: every slot of the ring reused
    rng = np.random.default_rng(7)
    a = rng.standard_normal((1500, 1100)).astype(np.float32)
    b = rng.standard_normal((1100, 2300)).astype(np.float32)[:, ::1]
    a_t = np.asfortranarray(a)  # strided host rows are staged as they are
    want = _ref(a, b)
    x, y = (a_t, b) if kind == "numpy" else (torch.from_numpy(a), torch.from_numpy(b))
    c = tilegemm.matmul(x, y, devices="all")
    assert type(c) is type(x) and (kind == "numpy" or c.device.type == "cpu")
    _close(c, want, 1e-5)


@gpu
def test_numpy_fp16_and_empty_and_zero_k():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((777, 512)).astype(np.float16)
    b = rng.standard_normal((512, 3000)).astype(np.float16)
    _close(tilegemm.matmul(a, b, devices="all"), _ref(a, b), 2e-2)
    assert tilegemm.matmul(a[:0], b, devices="all").shape == (0, 3000)
    z = tilegemm.matmul(a[:, :0], b[:0], devices="all")
    assert z.shape == (777, 3000) and not z.any()


@gpu
def test_bad_devices_are_clear_errors():
    a = torch.ones(4, 4, device="cuda")
    with pytest.raises(DeviceError, match="this host's GPUs are 0 to"):
        tilegemm.matmul(a, a, devices=[99])
    with pytest.raises(DeviceError, match="twice"):
        tilegemm.matmul(a, a, devices=[0, 0])
    with pytest.raises(DeviceError, match="give \"all\" or a list"):
        tilegemm.matmul(a, a, devices=0)
    with pytest.raises(ShapeError, match="2-D"):
        tilegemm.matmul(a[None], a, devices="all")


@gpu
def test_numpy_out_with_negative_strides_is_written():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((300, 200)).astype(np.float32)
    b = rng.standard_normal((200, 100)).astype(np.float32)
    out = np.zeros((300, 100), np.float32)[::-1]
    assert tilegemm.matmul(a, b, devices="all", out=out) is out
    _close(out, _ref(a, b), 1e-5)


def test_host_operands_torch_cannot_view_are_copied_for_it():
    """The host operands' torch views (torch.from_numpy): the other byte order and a field of a
    structured array (strides of part of an element) raised torch's raw ValueError; now a copy in
    this machine's order, as matmul without devices= reads them."""
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    rec = np.zeros((3, 4), dtype=[("x", "f4"), ("flag", "u1")])
    rec["x"] = x
    for y in (x.astype(">f4"), rec["x"], x[:, ::-1].astype(">f4")):
        got = multigpu._torch_view(tilegemm.arrays.describe(y, "a"))
        assert np.array_equal(got.numpy(), y)
    assert tilegemm.arrays.torch_views(x) and not tilegemm.arrays.torch_views(x.astype(">f4"))


@gpu
def test_host_operands_and_out_torch_cannot_view():
    rng = np.random.default_rng(5)
    a = rng.standard_normal((300, 200)).astype(np.float32)
    b = rng.standard_normal((200, 100)).astype(np.float32)
    rec = np.zeros((200, 100), dtype=[("x", "f4"), ("flag", "u1")])
    rec["x"] = b
    _close(tilegemm.matmul(a.astype(">f4"), rec["x"], devices="all"), _ref(a, b), 1e-5)
    out = np.zeros((300, 100), ">f4")
    assert tilegemm.matmul(a, b, devices="all", out=out) is out
    _close(out.astype(np.float32), _ref(a, b), 1e-5)


@gpu
def test_broadcast_operand_and_parameters_under_no_grad():
    b = torch.randn(1, 3000, device="cuda").to(torch.bfloat16).expand(2048, 3000)  # rows of stride 0
    a = torch.nn.Parameter(torch.randn(4096, 2048, device="cuda").to(torch.bfloat16))
    with torch.no_grad():
        c = tilegemm.matmul(a, b, devices="all")
    _close(c, _ref(a.detach(), b), 2e-2)
    with pytest.raises(tilegemm.AutogradError, match="devices= records no gradient"):
        tilegemm.matmul(a, b, devices="all")


def test_device_ids_read_an_iterator_once(monkeypatch):
    """The range check walked devices again after the ids were read from it: a generator was used
    up by then, and an id past the host's GPUs passed unchecked."""
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(_cuda, "has_gpu", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert multigpu.device_ids(i for i in ["cuda:1", 0]) == [1, 0]
    for given in ([5], (i for i in [5])):
        with pytest.raises(DeviceError, match="devices has 5; this host's GPUs are 0 to 1"):
            multigpu.device_ids(given)
