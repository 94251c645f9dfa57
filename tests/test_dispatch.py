"""The call path: import cost, the direct launcher's parameter packing, launch plans, and (on a GPU)
plans that compute what the slow path computes, in graphs, threads and on other streams."""

from __future__ import annotations

import ctypes
import os
import struct
import subprocess
import sys
import threading
from collections import namedtuple

import numpy as np
import pytest

from tilegemm import _cuda, dispatch, launcher

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")


def test_import_is_fast_and_imports_no_gpu_library():
    """`import tilegemm` ≤ 0.3 s (the best of three fresh processes) with neither torch, Triton nor
    Numba imported: kernels register from a table, and their backends load on first use. The time
    is the importing thread's CPU time, which on an idle machine is the wall time to a few ms (the
    import reads a few files and waits on nothing) and which the suite's other shard, busy on the
    other core, does not inflate (scripts/test.sh runs the suite in shards side by side)."""
    code = ("import sys, time; t, w = time.thread_time(), time.perf_counter(); import tilegemm; "
            "dt, wall = time.thread_time() - t, time.perf_counter() - w; "
            "heavy = [m for m in ('torch', 'triton', 'numba') if m in sys.modules]; print(dt, wall, *heavy)")
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    times, walls = [], []
    for _ in range(3):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
        dt, wall, heavy = *out.stdout.split()[:2], out.stdout.split()[2:]
        assert not heavy, f"imported at `import tilegemm`: {heavy}"
        times.append(float(dt))
        walls.append(float(wall))
    assert min(times) <= 0.3, f"CPU {times}, wall {walls}"


def test_a_numpy_product_into_out_imports_no_torch():
    """out= is written and its version counter moved on where it is a torch tensor
    (dispatch.written): the question is asked of a loaded torch only, so NumPy's products into
    out= (2-D, K = 0, a batch) import torch no more than the same products without out= (none on
    a machine without a GPU; a batch on a GPU goes through torch)."""
    def imports_torch(out: bool) -> bool:
        code = ("import sys, numpy as np, tilegemm; f = np.float32; o = lambda *s: dict(out=np.empty(s, f)) "
                f"if {out} else {{}}; "
                "tilegemm.matmul(np.ones((4, 3), f), np.ones((3, 5), f), **o(4, 5)); "
                "tilegemm.matmul(np.ones((4, 0), f), np.ones((0, 5), f), **o(4, 5)); "
                "tilegemm.matmul(np.ones((2, 4, 3), f), np.ones((3, 5), f), **o(2, 4, 5)); "
                "print('torch' in sys.modules)")
        env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
        assert run.returncode == 0 and run.stdout.split() in (["True"], ["False"]), run.stderr[-2000:]
        return run.stdout.split() == ["True"]

    with_out = imports_torch(True)
    assert with_out == imports_torch(False) and (_cuda.has_gpu() or not with_out)


# ---- the direct launcher's parameter packing (no GPU: the buffers are inspected) -----------------


class _Tensor:
    def __init__(self, ptr):
        self.ptr = ptr

    def data_ptr(self):
        return self.ptr


def test_triton_layout_follows_the_launcher_abi():
    """Non-constexpr arguments in signature order at their natural alignment; slots where the
    operands go, constants elsewhere (a persistent buffer's address kept); floats in their width,
    BF16 as the high half of the FP32 pattern; two null scratch pointers last."""
    a, b, c, keep = _Tensor(0xA000), _Tensor(0xB000), _Tensor(0xC000), _Tensor(0xD000)
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "n": "i32", "BM": "constexpr", "c_ptr": "*fp16", "alpha": "fp32",
           "w_ptr": "*i32", "big": "i64", "flag": "i1", "h": "bf16"}
    args = [a, b, 7, 128, c, 0.5, keep, 2**40, True, 1.5]
    layout, consts, pointers, descs, kept = launcher.triton_layout(sig, args, None, (a, b, c))
    assert [f for f, _ in layout.fields] == ["Q", "Q", "i", "Q", "f", "Q", "q", "b", "H", "Q", "Q"]
    assert [off for _, off in layout.fields] == [0, 8, 16, 24, 32, 40, 48, 56, 58, 64, 72]
    assert pointers == [(0, 0), (8, 1), (24, 2)] and not descs and kept == [keep]
    one = launcher.Launch(0x1234, (3,), (128,), 4096, layout, consts, pointers, descs, kept, name="k")
    one.bind((0x100, 0x200, 0x300))
    raw = one.parameters()
    assert struct.unpack_from("<QQi", raw, 0) == (0x100, 0x200, 7)
    assert struct.unpack_from("<Qf", raw, 24) == (0x300, 0.5)
    assert struct.unpack_from("<Qqb", raw, 40) == (0xD000, 2**40, 1)
    assert struct.unpack_from("<H", raw, 58)[0] == struct.unpack("<I", struct.pack("<f", 1.5))[0] >> 16
    assert struct.unpack_from("<QQ", raw, 64) == (0, 0)  # global and profile scratch
    assert one.grid == (3, 1, 1) and one.block == (128, 1, 1)
    # an argument of a kind the ABI here does not cover (a tuple) means no direct launch
    assert launcher.triton_layout({"t": ("i32", "i32")}, [(1, 2)], None, ()) is None


def test_triton_layout_expands_a_tma_descriptor(monkeypatch):
    """A TMA descriptor: 128 aligned bytes (the encoding of its slot's address), then its shape as
    i32 and its strides as i64; the encoding is redone only for an address not seen before."""
    a, c = _Tensor(0xA000), _Tensor(0xC000)
    Desc = namedtuple("Desc", "base shape strides block_shape padding")
    desc = Desc(a, [64, 32], [32, 1], [16, 16], "zero")
    meta = [dict(swizzle=3, elem_size=2, elem_type=8, block_size=[16, 16], fp4_padded=False)]
    layout, consts, pointers, descs, _ = launcher.triton_layout(
        {"a_desc": "tensordesc<bf16[16, 16]>", "c_ptr": "*bf16", "M": "i32"}, [desc, c, 64], meta, (a, None, c))
    assert [f for f, _ in layout.fields][:5] == ["tmap", "i", "i", "q", "q"]
    d = descs[0]
    assert d.slot == 0 and d.dtype == 10 and list(d.dims) == [32, 64] and list(d.strides) == [64]
    assert list(d.box) == [16, 16] and d.swizzle == 3 and d.fill == 0
    encoded = []
    monkeypatch.setattr(launcher._Descriptor, "encoded",
                        lambda self, addr: encoded.append(addr) or bytes([addr & 0xFF]) * 128)
    one = launcher.Launch(1, (1,), (32,), 0, layout, consts, pointers, descs)
    one.bind((0xA1, 0, 0xC0))
    raw = one.parameters()
    assert raw[:128] == bytes([0xA1]) * 128 and struct.unpack_from("<iiqq", raw, 128) == (64, 32, 32, 1)
    assert encoded == [0xA1]


def test_numba_layout_follows_numba_cudas_abi():
    """An array expands to meminfo, parent, size, itemsize, data, shape…, strides… (64 bits each),
    its data bound to the slot holding that address; an array that is no slot (a temporary) means
    no plan."""
    from numba.core import types

    class Arr:
        def __init__(self, ptr, shape):
            self.__cuda_array_interface__ = {"data": (ptr, False)}
            self.shape, self.dtype = shape, np.dtype(np.float32)
            self.size, self.strides = int(np.prod(shape)), (4 * shape[1], 4)

    class Fn:
        handle = 0x77

    class Kernel:
        argument_types = [types.Array(types.float32, 2, "C"), types.Array(types.float32, 2, "C"), types.int64]
        entry_name = "k"

        class _codelibrary:  # noqa: N801
            @staticmethod
            def get_cufunc():
                return Fn

    a, c = Arr(0xA000, (3, 5)), Arr(0xC000, (3, 4))
    one = launcher.numba_launch(Kernel, (2, 1, 1), (256, 1, 1), 0, [a, c, 9], (0xA000, 0xB000, 0xC000))
    one.bind((0x1, 0x2, 0x3))
    raw = one.parameters()
    assert struct.unpack_from("<9q", raw, 0) == (0, 0, 15, 4, 1, 3, 5, 20, 4)
    assert struct.unpack_from("<9qq", raw, 72) == (0, 0, 12, 4, 3, 3, 4, 16, 4, 9)
    assert launcher.numba_launch(Kernel, (1,), (1,), 0, [a, Arr(0xE000, (3, 4)), 9], (0xA000, 0xB000, 0xC000)) is None


def test_triton_versions_the_launcher_knows():
    assert launcher.triton_version_ok("3.6.0") and launcher.triton_version_ok("3.9.1")
    assert not launcher.triton_version_ok("3.5.0") and not launcher.triton_version_ok("4.0.0")


def test_launch_plan_passes_slots_and_refuses_what_it_cannot_serve(monkeypatch):
    """A plan passes (A, B, C, C, scale_a, scale_b, scratch…) to its launches, with the scales it
    made itself where the caller gave none; a stream-bound plan refuses another stream. Called with
    another GPU current (operands on cuda:1, no set_device), it launches with its own current and
    sets the caller's back: it refused, and the slow path built the plan again on every call."""
    torch = pytest.importorskip("torch")

    seen = []

    class Fake:
        def __call__(self, addresses, stream):
            seen.append((addresses, stream))

    dispatch._bind_torch()
    monkeypatch.setattr(dispatch, "_current_device", lambda: 0)
    monkeypatch.setattr(dispatch, "_raw_stream", lambda i: 77)
    monkeypatch.setattr(dispatch, "_capturing", lambda: False)
    monkeypatch.setattr(dispatch, "_empty", lambda shape, dtype, device: torch.empty(shape, dtype=dtype))
    monkeypatch.setattr(dispatch, "_empty_strided", lambda shape, strides, dtype, device:
                        torch.empty_strided(shape, strides, dtype=dtype))
    Dev = namedtuple("Dev", "index")
    scale = torch.ones(1)
    plan = dispatch.LaunchPlan([Fake(), Fake()], (4, 4), torch.float32, Dev(0), scratch=[(16, torch.float32)],
                               scales=(scale, None))
    c = plan.run(0xA0, 0xB0, None, 0, 0x5B)
    assert c.shape == (4, 4) and c.is_contiguous() and len(seen) == 2
    assert dispatch.LaunchPlan([], (2, 3, 5), torch.float32, Dev(0)).out_strides == (15, 5, 1)  # a batch's output
    assert dispatch.LaunchPlan([], (5, 0), torch.float32, Dev(0)).out_strides == torch.empty(5, 0).stride()
    addresses, stream = seen[0]
    assert addresses[:6] == (0xA0, 0xB0, c.data_ptr(), c.data_ptr(), scale.data_ptr(), 0x5B) and stream == 77
    assert len(addresses) == 7 and addresses[6] not in addresses[:6]  # the stream's arena
    bound = dispatch.LaunchPlan([Fake()], (4, 4), torch.float32, Dev(0), stream=78)
    assert bound.run(1, 2, None, 0, 0) is None  # made on stream 78, called on 77
    current, switched = [1], []

    def exchange(how):
        def to(i):
            switched.append((how, i))
            current[0], was = i, current[0]
            return was
        return to

    monkeypatch.setattr(dispatch, "_current_device", lambda: current[0])
    monkeypatch.setattr(dispatch, "_exchange_device", exchange("exchange"))
    monkeypatch.setattr(dispatch, "_maybe_exchange_device", exchange("maybe"))
    before = len(seen)
    assert plan.run(1, 2, None, 0, 0) is not None  # its GPU 0 made current for the launch, GPU 1 again after
    # (back as torch.cuda.device goes back: no context made on a GPU that has none)
    assert switched == [("exchange", 0), ("maybe", 1)] and len(seen) == before + 2 and current == [1]

    def fail(addresses, stream):
        raise RuntimeError("launch failed")

    broken = dispatch.LaunchPlan([fail], (4, 4), torch.float32, Dev(0))
    with pytest.raises(RuntimeError, match="launch failed"):
        broken.run(1, 2, None, 0, 0)
    assert current == [1] and switched[-1] == ("maybe", 1)  # the caller's GPU current again after a failure


def test_plans_on_one_stream_share_its_scratch_arena(monkeypatch):
    """Every plan's scratch lies in its stream's arena at offsets of its own (512-byte aligned):
    the arena grows to the largest need, not the sum, so a process with many shapes keeps every
    plan's scratch in place; another stream has its own; a graph's capture, and a call past
    ARENA_MAX_BYTES, get buffers of the call's own."""
    torch = pytest.importorskip("torch")

    seen = []

    class Fake:
        def __call__(self, addresses, stream):
            seen.append(addresses[6:])

    dispatch._bind_torch()
    dispatch.reset()
    stream, capturing = [77], [False]
    monkeypatch.setattr(dispatch, "_current_device", lambda: None)  # the CPU's device index
    monkeypatch.setattr(dispatch, "_raw_stream", lambda i: stream[0])
    monkeypatch.setattr(dispatch, "_capturing", lambda: capturing[0])
    monkeypatch.setattr(dispatch, "_empty", lambda shape, dtype, device: torch.empty(shape, dtype=dtype))
    dev = torch.device("cpu")
    small = dispatch.LaunchPlan([Fake()], (4, 4), torch.float32, dev, scratch=[(100, torch.float32), (3, torch.bfloat16)])
    big = dispatch.LaunchPlan([Fake()], (4, 4), torch.float32, dev, scratch=[(3 << 20, torch.float32)])
    assert small.offsets == [0, 512] and small.need == 1024 and big.need == 12 << 20
    small.run(1, 2, None, 0, 0)
    (a0, a1), = seen
    base = dispatch._ARENAS[(None, 77)].base
    assert (a0, a1) == (base, base + 512) and dispatch._ARENAS[(None, 77)].size == 1 << 20
    big.run(1, 2, None, 0, 0)
    small.run(1, 2, None, 0, 0)
    arena = dispatch._ARENAS[(None, 77)]
    assert len(dispatch._ARENAS) == 1 and arena.size == 12 << 20  # grown to the largest need, not the sum
    assert seen[1] == (arena.base,) and seen[2] == (arena.base, arena.base + 512)
    stream[0] = 78
    small.run(1, 2, None, 0, 0)
    assert len(dispatch._ARENAS) == 2 and seen[3][0] == dispatch._ARENAS[(None, 78)].base != arena.base
    capturing[0] = True
    small.run(1, 2, None, 0, 0)
    assert seen[4][0] not in (arena.base, dispatch._ARENAS[(None, 78)].base)  # the graph's own buffers
    capturing[0] = False
    monkeypatch.setattr(dispatch, "ARENA_MAX_BYTES", 14 << 20)
    stream[0] = 79
    big.run(1, 2, None, 0, 0)  # 12 + 1 held, 12 more would pass the bound: its own buffer
    assert (None, 79) not in dispatch._ARENAS and seen[5][0] not in (arena.base,)
    dispatch.reset()
    assert not dispatch._ARENAS


def test_a_capture_takes_no_plan_that_holds_memory_of_its_own(monkeypatch):
    """Under a CUDA graph's capture, a stream-bound plan (t04's fused split-K: its tile counters, one
    set per stream, are a constant of its launch) and a plan with scales of its own (FP8 from a
    float scale, or without one) serve no call, on the stream they were built on too: the graph
    would share the stream's counters with eager calls and every other graph captured there, and
    read the plan's scale where it lay once the plan is dropped (reset, PLAN_MAX, a rebuilt key).
    The slow path gives the capture counters and scales of the graph's own pool. Outside a
    capture both serve; a plan with neither (nor scratch) asks nothing about captures."""
    torch = pytest.importorskip("torch")

    seen, asked = [], []

    class Fake:
        def __call__(self, addresses, stream):
            seen.append(addresses)

    def capturing():
        asked.append(1)
        return state[0]

    dispatch._bind_torch()
    state = [True]
    monkeypatch.setattr(dispatch, "_current_device", lambda: None)
    monkeypatch.setattr(dispatch, "_raw_stream", lambda i: 77)
    monkeypatch.setattr(dispatch, "_capturing", capturing)
    monkeypatch.setattr(dispatch, "_empty", lambda shape, dtype, device: torch.empty(shape, dtype=dtype))
    monkeypatch.setattr(dispatch, "_empty_strided", lambda shape, strides, dtype, device:
                        torch.empty_strided(shape, strides, dtype=dtype))
    dev = torch.device("cpu")
    bound = dispatch.LaunchPlan([Fake()], (4, 4), torch.float32, dev, scratch=[(64, torch.float32)], stream=77)
    own = dispatch.LaunchPlan([Fake()], (4, 4), torch.bfloat16, dev, scales=(torch.ones(1), torch.ones(1)))
    plain = dispatch.LaunchPlan([Fake()], (4, 4), torch.float32, dev)
    scratch = dispatch.LaunchPlan([Fake()], (4, 4), torch.float32, dev, scratch=[(64, torch.float32)])
    assert bound.run(1, 2, None, 0, 0) is None and own.run(1, 2, None, 0, 0) is None and not seen
    assert plain.run(1, 2, None, 0, 0) is not None and scratch.run(1, 2, None, 0, 0) is not None  # (the graph's
    assert len(seen) == 2  # own buffers for scratch, as before)
    state[0] = False
    assert bound.run(1, 2, None, 0, 0) is not None and own.run(1, 2, None, 0, 0) is not None
    assert seen[-1][4:6] == tuple(s.data_ptr() for s in own.keep)
    asked.clear()
    plain.run(1, 2, None, 0, 0)
    assert not asked  # the common plan's call costs no capture query
    dispatch.reset()


def test_call_keys_tell_layouts_and_alignment_apart():
    """Shapes, strides, dtypes, each operand's 16-byte alignment (Triton compiles for it) and its
    128-byte alignment (t03's PAD copies rows that are 16- but not 128-byte aligned)."""
    torch = pytest.importorskip("torch")
    a = torch.empty(64, 32)
    b = torch.empty(32, 48)
    dispatch.plain(a)  # (torch bound, as after any call: run alone, the test had no key to compare)
    k = dispatch.matmul_key(a, b, 0, 0)
    assert k != dispatch.matmul_key(a, b.t().contiguous().t(), 0, 0)  # strides
    assert k != dispatch.matmul_key(a.half(), b.half(), 0, 0)  # dtypes
    assert k != dispatch.matmul_key(a, b, 0, 4)  # B 16-byte aligned or not
    assert dispatch.matmul_key(a, b, 4, 0) != dispatch.matmul_key(a, b, 0, 4)  # which operand is off: two kernels
    for key in (lambda pa, pb: dispatch.matmul_key(a, b, pa, pb), lambda pa, pb: dispatch.linear_key(a, b.t(), pa, pb),
                lambda pa, pb: dispatch.gemm_key(a, b, pa, pb, "tf32", None, 1.0, 0.0, None, None, None, "auto"),
                lambda pa, pb: dispatch.gemm_key(a, b, pa, pb, "tf32", None, 1.0, 1.0, b[:, :], None, None, "auto")):
        assert key(0, 0) != key(64, 0) and key(0, 0) != key(0, 64)  # rows 128-byte aligned or not: t03's PAD copy
        assert key(0, 0) == key(256, 128) and key(64, 16) == key(64 + 1024, 16 + 512)  # (which else do not decide)
    g = dispatch.gemm_key(a, b, 0, 0, "tf32", None, 1.0, 0.0, None, None, None, "auto")  # the common call's short cut
    assert g == k + ("tf32", None, 1.0, 0.0, float, float, None, None, None, "auto", True)  # (alpha's and beta's
    # classes; fast_accum)
    assert g != dispatch.gemm_key(a, b, 0, 0, "tf32", None, 1.0, 0.0, None, None, None, "auto", False)
    assert g != dispatch.gemm_key(a, b, 0, 0, "tf32", None, 1.0, 0.0, None, 2.0, None, "auto")
    assert g != dispatch.gemm_key(a, b, 0, 0, "tf32", None, 1.0, 0.0, torch.empty(64, 48), None, None, "auto")
    assert k == dispatch.matmul_key(torch.empty(64, 32), torch.empty(32, 48), 0, 0)


def test_no_plan_for_aliased_operands():
    """A plan binds operands to slots by identity: matmul(x, x) or gemm(a, b, c=a) must not become
    the plan a later matmul(x, y) or gemm(a, b) of the same shapes is served by."""
    torch = pytest.importorskip("torch")
    from tilegemm.kernels.tensorcore import _problem as P

    x = torch.empty(64, 64, dtype=torch.float16)
    assert dispatch._build(P.Problem(x, x, torch.empty(64, 64, dtype=torch.float16), "fp16"), [], (False, False)) is None
    y = torch.empty(64, 64, dtype=torch.float16)
    assert dispatch._build(P.Problem(x, y, x, "fp16"), [], (False, False)) is None


def test_a_plan_with_scales_of_its_own_serves_only_the_stream_it_was_built_on(monkeypatch):
    """A scale tensor the API made for one call (FP8 gemm given a float scale past FIXED_SCALES_MAX
    numbers: torch.full, a fill kernel on the first call's stream) is kept by the plan and freed
    with it. A call on another stream is ordered with neither the fill nor the free (PLAN_MAX,
    reset, a rebuilt key: the memory goes back to the first stream's pool), so it read the scale
    before it was written, or after another tensor took its memory: such a plan is bound to its
    stream, as t04's are. A fixed scale (P.fixed_scale: filled once, never freed) is no slot and
    keeps nothing: a constant of the launches, as a persistent buffer is."""
    torch = pytest.importorskip("torch")
    from tilegemm.kernels.tensorcore import _problem as P

    stream = [77]
    _plans_on_the_cpu(monkeypatch, torch, stream)
    a = torch.empty(16, 32, dtype=torch.float8_e4m3fn)
    b = torch.empty(32, 16, dtype=torch.float8_e4m3fn)
    c = torch.empty(16, 16, dtype=torch.bfloat16)
    p = P.Problem(a, b, c, "fp8", scale_a=torch.ones(1), scale_b=torch.ones(1))
    own = dispatch._build(p, [], (True, True))
    assert own is not None and own.stream == 77
    assert own.run(1, 2, None, 0, 0) is not None
    stream[0] = 78
    assert own.run(1, 2, None, 0, 0) is None  # the scales were filled (and are freed) on stream 77
    theirs = dispatch._build(p, [], (False, False))  # the caller's scale tensors: the caller orders them
    assert theirs.stream is None and theirs.run(1, 2, None, 0, 0) is not None
    fixed = P.Problem(a, b, c, "fp8", scale_a=torch.ones(1), scale_b=torch.ones(1))
    monkeypatch.setattr(P, "_FIXED_IDS", {id(fixed.scale_a), id(fixed.scale_b)})  # (a CPU tensor is never fixed)
    assert dispatch._slots(fixed)[4:] == [None, None]
    made = dispatch._build(fixed, [], (True, True))
    assert made.stream is None and made.keep == (None, None) and made.direct


def _plans_on_the_cpu(monkeypatch, torch, stream: list) -> None:
    """Launch plans run on the CPU with fake launches: no GPU current, stream[0] the current stream,
    no capture, outputs made by torch on the CPU."""
    dispatch._bind_torch()
    monkeypatch.setattr(dispatch, "_current_device", lambda: None)
    monkeypatch.setattr(dispatch, "_raw_stream", lambda i: stream[0])
    monkeypatch.setattr(dispatch, "_capturing", lambda: False)
    monkeypatch.setattr(dispatch, "_empty_strided", lambda shape, strides, dtype, device:
                        torch.empty_strided(shape, strides, dtype=dtype))


def test_a_key_keeps_each_streams_bound_plan_beside_the_first(monkeypatch):
    """A stream-bound plan refuses another stream's call; the plan the slow path then builds there
    is kept beside the key's first (`_store`: the key's held plan, or its view, keeps it in
    `others`), so calls that alternate between the two streams are each served by their stream's
    plan, where replacing the first rebuilt a plan at every switch. A view kept under its own key
    (a linear layer's, an N-D matmul's) keeps the new plan the same way; one of another kind (an
    AddBias where a ViewPlan was: another way of adding the bias) replaces it. A plan built again
    on the held plan's own stream replaces it and keeps its others; an unbound plan replaces what
    the key held, as before. Past STREAMS_MAX other streams, the oldest stream's plan goes."""
    torch = pytest.importorskip("torch")

    seen = []

    class Fake:
        def __init__(self, name):
            self.name = name

        def __call__(self, addresses, stream):
            seen.append((self.name, stream))

    stream = [77]
    dispatch.reset()
    _plans_on_the_cpu(monkeypatch, torch, stream)
    dev = torch.device("cpu")

    def bound(name, on):
        return dispatch.LaunchPlan([Fake(name)], (4, 4), torch.float32, dev, stream=on)

    first, second = bound("first", 77), bound("second", 78)
    dispatch._store("k", first)
    stream[0] = 78
    assert dispatch._PLANS["k"].run(1, 2, None, 0, 0) is None  # no plan for stream 78 yet: the slow path's
    dispatch._store("k", second)
    assert dispatch._PLANS["k"] is first and first.others == {78: second}
    for s in (78, 77, 78, 77):
        stream[0] = s
        assert dispatch._PLANS["k"].run(1, 2, None, 0, 0).shape == (4, 4)
    assert seen == [("second", 78), ("first", 77)] * 2
    view = dispatch.ViewPlan(first, (2, 8))
    dispatch._store("view", view)
    dispatch._store("view", dispatch.ViewPlan(bound("third", 79), (2, 8)))  # a view of another stream's plan
    assert dispatch._PLANS["view"] is view and set(first.others) == {78, 79}
    stream[0] = 79
    assert view.run(1, 2).shape == (2, 8) and seen[-1] == ("third", 79)
    adds = dispatch.AddBias(dispatch.ViewPlan(bound("adds", 80), (2, 8)), True)
    dispatch._store("view", adds)  # another kind of plan of the key: replaced, whatever its stream
    assert dispatch._PLANS["view"] is adds and set(first.others) == {78, 79}
    dispatch._store("view", view)
    again = bound("again", 77)
    dispatch._store("view", dispatch.ViewPlan(again, (2, 8)))  # the key's own stream again: replaced, others kept
    assert dispatch._PLANS["view"].plan is again and again.others == first.others
    stream[0] = 78
    assert dispatch._PLANS["view"].run(1, 2).shape == (2, 8) and seen[-1] == ("second", 78)
    unbound = dispatch.LaunchPlan([Fake("unbound")], (4, 4), torch.float32, dev)
    dispatch._store("k", unbound)
    assert dispatch._PLANS["k"] is unbound
    many = bound("s0", 100)
    dispatch._store("many", many)
    for i in range(1, dispatch.STREAMS_MAX + 2):
        dispatch._store("many", bound(f"s{i}", 100 + i))
    assert dispatch._PLANS["many"] is many and len(many.others) == dispatch.STREAMS_MAX
    assert 101 not in many.others and 102 in many.others and 100 + dispatch.STREAMS_MAX + 1 in many.others  # (the
    dispatch.reset()  # oldest other stream's plan went)


def test_a_float_scales_key_is_its_bits():
    """gemm's key holds a float scale's bits, as its fixed tensor does (`P.fixed_scale`): -0.0 (which
    equals 0.0) gets a plan of its own, whose C has the other sign where C is zero; NaN (equal to
    nothing) finds its plan, where each NaN call built and kept another until PLAN_MAX emptied them.
    Equal numbers made apart (another object, a NumPy float, an int) share one. On the CPU a number's
    scale tensor is made for its call (no plan runs there to keep it)."""
    torch = pytest.importorskip("torch")
    from tilegemm.kernels.tensorcore import _problem as P

    a, b = torch.empty(64, 32), torch.empty(32, 48)
    dispatch.plain(a)
    key = lambda s: dispatch.gemm_key(a, b, 0, 0, "fp8", None, 1.0, 0.0, None, s, None, "auto")  # noqa: E731
    assert key(0.0) != key(-0.0) and key(float("-0")) == key(-1 * 0.0)
    assert key(float("nan")) == key(float("inf") - float("inf"))  # (two NaN objects)
    assert key(float("0.5")) == key(0.25 * 2) == key(np.float64(0.5)) and key(2) == key(2.0) != key(2.5)
    assert key(None) != key(1.0)
    t = P.scale_tensor(0.5, torch.device("cpu"))
    assert t.item() == 0.5 and not P.is_fixed(t) and P.scale_tensor(0.5, torch.device("cpu")) is not t


def test_a_numbers_fixed_scale_is_made_once_on_a_stream_of_its_own(monkeypatch):
    """`P.fixed_scale` on a CUDA device (torch.cuda's stream calls stood in for): made once per
    (device, the number's bits), filled in a thread of its own (a pool the caller's thread
    allocates to, torch.cuda.use_mem_pool's, never holds it) on a new stream whose fill alone
    that thread waits for (the caller's current stream is never asked for, let alone
    synchronised), and kept (`is_fixed`). Made for the call alone, in the caller's thread and not
    kept, under a capture, under a dispatch mode (a fake tensor's), where torch gives a tensor
    subclass; past FIXED_SCALES_MAX numbers, made apart on the call's stream. An error in the fill
    is the caller's. Memory made apart on the caller's stream (P.made_apart's other form) is filled
    there, not waited for; in the caller's thread where that stream is CUDA's per-thread default."""
    torch = pytest.importorskip("torch")
    import contextlib
    import threading

    from torch.utils._python_dispatch import TorchDispatchMode

    from tilegemm.kernels.tensorcore import _problem as P

    events, capturing, current, threads = [], [False], [None], []

    class Stream:
        cuda_stream = 77

        def synchronize(self):
            events.append(("wait", self))

    @contextlib.contextmanager
    def on(stream):
        current[0], was = stream, current[0]
        try:
            yield
        finally:
            current[0] = was

    real_full, kind = torch.full, [torch.Tensor]

    def full(shape, v, dtype, device):
        events.append(("fill", current[0]))
        threads.append(threading.get_ident())
        if v == 7.0:
            raise torch.OutOfMemoryError("CUDA out of memory (a stand-in)")
        t = real_full(shape, v, dtype=dtype)
        return t if kind[0] is torch.Tensor else torch.nn.Parameter(t, requires_grad=False)

    monkeypatch.setattr(P, "_FIXED", {})
    monkeypatch.setattr(P, "_FIXED_IDS", set())
    monkeypatch.setattr(torch, "full", full)
    monkeypatch.setattr(torch.cuda, "device", lambda d: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "Stream", Stream)
    monkeypatch.setattr(torch.cuda, "stream", on)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: capturing[0])
    relaxed = []
    monkeypatch.setattr(P, "_relax_capture_mode", lambda: relaxed.append(threading.get_ident()))
    dev = torch.device("cuda", 0)
    one = P.fixed_scale(1.0, dev)
    assert relaxed == threads  # (the filling thread's capture mode relaxed: its sync fails no capture elsewhere)
    (fill, own), (wait, waited) = events
    assert fill == "fill" and isinstance(own, Stream) and (wait, waited) == ("wait", own)  # its own stream's fill
    assert one.item() == 1.0 and P.is_fixed(one) and P.fixed_scale(1.0, dev) is one and len(events) == 2
    assert threads[-1] != threading.get_ident()  # (not the caller's thread: not its pool)
    assert P.scale_tensor(1, dev) is one and P.scale_tensor(np.float64(1.0), dev) is one  # (a number, any kind)
    zero, negative = P.fixed_scale(0.0, dev), P.fixed_scale(-0.0, dev)
    assert zero is not negative and bool(torch.signbit(negative)) and not bool(torch.signbit(zero))
    assert P.fixed_scale(float("nan"), dev) is P.fixed_scale(float("inf") - float("inf"), dev)
    capturing[0] = True
    made = P.fixed_scale(3.0, dev)
    assert events[-1] == ("fill", None) and not P.is_fixed(made)  # on the capture's stream, for the call
    assert threads[-1] == threading.get_ident()
    assert P.fixed_scale(1.0, dev) is one  # (a number kept before: the same tensor, under a capture too)
    capturing[0] = False
    kind[0] = torch.nn.Parameter
    assert not P.is_fixed(P.fixed_scale(5.0, dev))
    kind[0] = torch.Tensor

    class Passing(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    with Passing():
        moded = P.fixed_scale(4.0, dev)
    assert not P.is_fixed(moded) and threads[-1] == threading.get_ident() and events[-1] == ("fill", None)
    with pytest.raises(torch.OutOfMemoryError, match="a stand-in"):
        P.fixed_scale(7.0, dev)
    assert threads[-1] != threading.get_ident() and all(k[1] != (7.0).hex() for k in P._FIXED)
    callers = Stream()  # an arena's or t04's counters: made apart, on the caller's stream, which is not waited for
    monkeypatch.setattr(torch.cuda, "current_stream", lambda d: callers)
    made = P.made_apart(lambda: full((1,), 2.0, torch.float32, dev), dev, on_callers_stream=True)
    assert made.item() == 2.0 and events[-1] == ("fill", callers) and threads[-1] != threading.get_ident()
    monkeypatch.setattr(P, "FIXED_SCALES_MAX", len(P._FIXED))
    past = P.fixed_scale(6.0, dev)  # (the call's own, which its plan keeps: apart too, on the call's stream)
    assert not P.is_fixed(past) and events[-1] == ("fill", callers) and threads[-1] != threading.get_ident()
    assert P.fixed_scale(6.0, dev) is not past and P.fixed_scale(1.0, dev) is one
    callers.cuda_stream = P.PER_THREAD_STREAM  # (cudaStreamPerThread: in another thread, another stream)
    P.made_apart(lambda: full((1,), 2.0, torch.float32, dev), dev, on_callers_stream=True)
    assert events[-1] == ("fill", None) and threads[-1] == threading.get_ident()  # (the caller's, as it stands)


def test_the_capture_mode_exchange_is_looked_up_once_a_process(monkeypatch):
    """_relax_capture_mode runs in every thread that makes memory apart (a past-cap scale: every
    call): the driver's function is looked up once, not dlopened each time; no driver, no call."""
    pytest.importorskip("torch")
    import ctypes

    from tilegemm import _cuda
    from tilegemm.kernels.tensorcore import _problem as P

    opened, modes = [], []

    class Driver:
        def __init__(self, name):
            opened.append(name)
            self.cuThreadExchangeStreamCaptureMode = lambda mode: modes.append(mode._obj.value) or 0

    monkeypatch.setattr(ctypes, "CDLL", Driver)
    _cuda.driver_entry.cache_clear()
    try:
        P._relax_capture_mode()
        P._relax_capture_mode()
        assert opened == ["libcuda.so.1"] and modes == [P.CAPTURE_MODE_RELAXED] * 2
    finally:
        _cuda.driver_entry.cache_clear()
    monkeypatch.setattr(ctypes, "CDLL", lambda name: (_ for _ in ()).throw(OSError(name)))
    try:
        P._relax_capture_mode()  # (no driver: nothing to relax, no error)
    finally:
        _cuda.driver_entry.cache_clear()


def test_a_planned_gemm_still_refuses_a_c_over_its_inputs(monkeypatch):
    """gemm(a, b, c=c) keeps a plan for c's shape, strides and alignment; gemm(a, b, c=a) with
    those finds it, and ran it (C written over A as it was read) where the slow path's overlap
    check was never reached: the plan is refused then, for the slow path to name the problem."""
    torch = pytest.importorskip("torch")
    ran = []

    class Plan:
        spans = tuple(dispatch.spans_of(*(torch.empty(8, 8) for _ in range(3))))

        def overlaps(self, pa, pb, pc):
            return dispatch.LaunchPlan.overlaps(self, pa, pb, pc)

        def run(self, pa, pb, c, psa, psb):
            ran.append(c)
            return c

    dispatch._bind_torch()
    a, b, c = (torch.empty(8, 8) for _ in range(3))
    key = dispatch.gemm_key(a, b, a.data_ptr(), b.data_ptr(), "auto", None, 1.0, 1.0, c, None, None, "auto")
    assert key == dispatch.gemm_key(a, b, a.data_ptr(), b.data_ptr(), "auto", None, 1.0, 1.0, a, None, None, "auto")
    monkeypatch.setitem(dispatch._PLANS, key, Plan())
    args = ("auto", None, 1.0, 1.0)
    assert dispatch.fast_gemm(a, b, *args, c, None, None, "auto") is c
    assert dispatch.fast_gemm(a, b, *args, a, None, None, "auto") is None
    assert dispatch.fast_gemm(a, b, *args, b, None, None, "auto") is None
    assert ran == [c]


# ---- on a GPU ------------------------------------------------------------------------------------

TOL = {"bf16": 1e-2, "fp16": 3e-3, "fp32": 1e-5, "tf32": 3e-3, "fp8": 2e-2}


def _cases(torch):
    """(name, make operands, call, float64 reference) for every path a plan serves."""
    dev = torch.device("cuda")

    def mk(dt, m, n, k, bt=False):
        def make():
            a = (torch.rand(m, k, device=dev) * 2 - 1).to(dt)
            b = (torch.rand(n, k, device=dev) * 2 - 1).to(dt).t() if bt else (torch.rand(k, n, device=dev) * 2 - 1).to(dt)
            return a, b
        return make

    def fp8(m, n, k):
        def make():
            a = (torch.rand(m, k, device=dev) * 2 - 1).to(torch.float8_e4m3fn)
            b = (torch.rand(n, k, device=dev) * 2 - 1).to(torch.float8_e4m3fn).t()
            return a, b
        return make

    import tilegemm

    mm = lambda a, b: tilegemm.matmul(a, b)  # noqa: E731
    ref = lambda a, b: a.double() @ b.double()  # noqa: E731
    out = []
    for dt, name in ((torch.bfloat16, "bf16"), (torch.float16, "fp16"), (torch.float32, "fp32")):
        for shape in ((64, 64, 64), (1, 1024, 4096), (16, 4096, 4096), (1000, 1000, 1000), (130, 264, 24)):
            out.append((f"matmul {name} {shape}", mk(dt, *shape), mm, ref, TOL[name]))
    out.append(("gemm bf16 x@W.T", mk(torch.bfloat16, 512, 1024, 4096, bt=True), lambda a, b: tilegemm.gemm(a, b), ref, 1e-2))
    # rows not 16-byte aligned: a realigning copy in the plan, then TMA (t03), in every layout
    out.append(("matmul bf16 unaligned", mk(torch.bfloat16, 777, 1234, 4321), mm, ref, 1e-2))
    # decode: t04's fused split-K, whose stream-bound plan keeps its scratch between calls
    out.append(("matmul bf16 decode", mk(torch.bfloat16, 16, 1024, 8192), mm, ref, 1e-2))
    into = lambda a, b: tilegemm.matmul(a, b, out=a.new_empty(a.shape[0], b.shape[1]))  # noqa: E731  (a new out each call)
    out.append(("matmul bf16 out=", mk(torch.bfloat16, 300, 520, 256), into, ref, 1e-2))
    out.append(("matmul fp32 out= (SIMT)", mk(torch.float32, 300, 520, 256), into, ref, 1e-5))
    out.append(("gemm tf32 decode", mk(torch.float32, 16, 1024, 4096), lambda a, b: tilegemm.gemm(a, b, precision="tf32"),
                ref, 3e-3))
    out.append(("gemm bf16 x@W.T unaligned", mk(torch.bfloat16, 600, 1030, 1023, bt=True), lambda a, b: tilegemm.gemm(a, b),
                ref, 1e-2))
    out.append(("gemm tf32 unaligned", mk(torch.float32, 300, 517, 255), lambda a, b: tilegemm.gemm(a, b, precision="tf32"),
                ref, 3e-3))
    def sliced():  # views whose bases are 2 bytes off 16 (and rows 514, 641 elements apart)
        a, b = mk(torch.float16, 513, 641, 514)()
        return a[:, 1:], b[1:, 1:]
    out.append(("matmul fp16 sliced views", sliced, mm, ref, 3e-3))
    out.append(("gemm tf32", mk(torch.float32, 300, 520, 256), lambda a, b: tilegemm.gemm(a, b, precision="tf32"), ref, 3e-3))
    s = torch.full((1,), 0.5, device=dev)
    out.append(("gemm fp8 tensor scales", fp8(16, 4096, 4096), lambda a, b: tilegemm.gemm(a, b, scale_a=s, scale_b=s),
                lambda a, b: 0.25 * ref(a, b), 2e-2))
    out.append(("gemm fp8 float scales", fp8(256, 512, 512), lambda a, b: tilegemm.gemm(a, b, scale_a=0.5, scale_b=2.0),
                ref, 2e-2))
    out.append(("gemm fp8 unaligned", fp8(300, 520, 1000), lambda a, b: tilegemm.gemm(a, b, scale_a=0.5, scale_b=2.0),
                ref, 2e-2))
    # FP8 quantised by gemm each call (_convert's kernels in the plan, ahead of the GEMM's): B a BF16 weight's
    # transpose, a decode shape (t04's stream-bound plan), FP32 with the caller's scales (a tensor, a float)
    q8 = lambda a, b: tilegemm.gemm(a, b, precision="fp8")  # noqa: E731
    out.append(("gemm fp8 quantised bf16 x@W.T", mk(torch.bfloat16, 256, 512, 1024, bt=True), q8, ref, 8e-2))
    out.append(("gemm fp8 quantised bf16 decode", mk(torch.bfloat16, 16, 4096, 4096), q8, ref, 8e-2))
    given = torch.full((1,), 1 / 256, device=dev)
    out.append(("gemm fp8 quantised fp32 scales", mk(torch.float32, 130, 264, 72),
                lambda a, b: tilegemm.gemm(a, b, precision="fp8", scale_a=given, scale_b=1 / 128), ref, 8e-2))
    out.append(("gemm fp16 batched", lambda: (torch.rand(3, 100, 64, device=dev).half(), torch.rand(64, 80, device=dev).half()),
                lambda a, b: tilegemm.gemm(a, b), lambda a, b: a.double() @ b.double(), 3e-3))
    return out


@pytest.mark.gpu
def test_gpu_plans_compute_what_the_slow_path_computes():
    """Every path: the first call of a shape takes the slow path and keeps a plan; the next calls,
    on the same operands, on new ones (new addresses) and on changed contents, are served by the
    plan (no slow call) and match float64."""
    torch = pytest.importorskip("torch")
    for name, make, call, ref, tol in _cases(torch):
        a, b = make()
        before = dispatch.STATS["slow_calls"]
        results = [call(a, b)]
        slow = dispatch.STATS["slow_calls"] - before
        results.append(call(a, b))
        a2, b2 = make()  # new addresses, new values
        results.append(call(a2, b2))
        a1 = a.clone()
        a.copy_(make()[0])  # same addresses, new contents
        results.append(call(a, b))
        torch.cuda.synchronize()
        assert dispatch.STATS["slow_calls"] - before == slow <= 1, f"{name}: repeated calls took the slow path"
        for got, (x, y) in zip(results, ((a1, b), (a1, b), (a2, b2), (a, b))):
            r = ref(x, y)
            err = float((got.double() - r).norm() / r.norm())
            assert err < tol, (name, err)


@pytest.mark.gpu
@pytest.mark.parametrize("m, n, k", [(64, 64, 64), (16, 4096, 4096), (300, 520, 1000), (2048, 2048, 1024)])
@pytest.mark.parametrize("b_layout", ["(N, K) transposed", "(K, N)"])
@pytest.mark.parametrize("conversion", ["fp8 from bfloat16", "bf16 from float32", "fp16 from float64"])
def test_gpu_a_converting_gemm_is_planned_and_exact(m, n, k, b_layout, conversion, monkeypatch):
    """gemm(a, b, precision=...) on operands of another dtype converts both on every call
    (_convert's kernels: FP8 quantisation, two an operand; a cast, one). Its plan replays the
    conversion ahead of the GEMM, with the converted operands (and the scales) in its scratch: from
    the second call no slow call; C bit for bit what gemm gives on the operands converted by hand
    (_convert.fp8, their scales passed; torch's cast), and what Triton's own launcher gives
    (TILEGEMM_FAST_LAUNCH=0, no plans); new contents at the same addresses (3x, a NaN) give their
    own product, so nothing of an earlier call's conversion is kept. A CUDA graph captured of the
    call replays the conversion of what a holds at the replay. B as a weight's transpose, and
    row-major (where a rung may copy it K-major on the host's call: after the conversion ran)."""
    torch = pytest.importorskip("torch")
    import tilegemm
    from tilegemm.kernels.tensorcore import _convert as conv

    precision, dtype = conversion.split(" from ")
    g = torch.Generator(device="cuda").manual_seed(3)
    a = torch.randn(m, k, device="cuda", generator=g).to(getattr(torch, dtype))
    b = torch.randn(n, k, device="cuda", generator=g).to(getattr(torch, dtype))
    b = b.t() if b_layout.endswith("transposed") else b.reshape(k, n)
    call = lambda: tilegemm.gemm(a, b, precision=precision)  # noqa: E731

    def by_hand():
        if precision == "fp8":
            (qa, sa), (qb, sb) = conv.fp8(a), conv.fp8(b)
            return tilegemm.gemm(qa, qb, scale_a=sa, scale_b=sb)
        want = {"bf16": torch.bfloat16, "fp16": torch.float16}[precision]
        return tilegemm.gemm(a.to(want), b.to(want))

    first = call()  # (the slow path's: the conversion launched ahead of the rung's, the new plan's launches after it)
    assert _same_bits(first, by_hand())
    slow = dispatch.STATS["slow_calls"]
    for change in (None, lambda: a.mul_(3), lambda: a.view(-1)[5].fill_(float("nan"))):
        if change:
            change()
        got = call()
        assert dispatch.STATS["slow_calls"] == slow, "a repeated converting call took the slow path"
        assert _same_bits(got, by_hand()), change
        with monkeypatch.context() as mp:
            mp.setenv("TILEGEMM_FAST_LAUNCH", "0")
            mp.setattr(dispatch, "_PLANS", {})
            slow = dispatch.STATS["slow_calls"]
            assert _same_bits(got, call()) and dispatch.STATS["slow_calls"] == slow + 1
            assert not dispatch._PLANS
        slow = dispatch.STATS["slow_calls"]
    assert got[0].isnan().all() and not got[1:].isnan().any() and not _same_bits(first, got)
    a.copy_(torch.randn(m, k, device="cuda", generator=g))
    graph, out = _captured(torch, call)
    a.copy_(torch.randn(m, k, device="cuda", generator=g))
    graph.replay()
    assert _same_bits(out, by_hand())


@pytest.mark.gpu
@pytest.mark.parametrize("call", ["matmul bf16", "gemm bf16", "gemm tf32", "gemm fp8 from bf16"])
def test_gpu_a_product_of_an_operand_with_itself_is_planned(call, monkeypatch):
    """matmul(x, x) and gemm(x, x) keep a launch plan: the API gives B a view of its own (a plan
    binds its operand slots by identity). From the second call no slow call, and C bit for bit
    what Triton's own launcher gives (TILEGEMM_FAST_LAUNCH=0, no plans); the same plan serves
    (x, y), (y, y) and (y, x) of the key with their own values. (FP32 matmul's SIMT plans bind
    by address, and a product of x with itself stays on the slow path there.)"""
    torch = pytest.importorskip("torch")
    import tilegemm

    fn = {"matmul bf16": tilegemm.matmul, "gemm bf16": tilegemm.gemm,
          "gemm tf32": lambda a, b: tilegemm.gemm(a, b, precision="tf32"),
          "gemm fp8 from bf16": lambda a, b: tilegemm.gemm(a, b, precision="fp8")}[call]
    g = torch.Generator(device="cuda").manual_seed(5)
    x, y = (torch.randn(384, 384, device="cuda", generator=g).to(torch.float32 if "tf32" in call else torch.bfloat16)
            for _ in range(2))

    def unplanned(a, b):
        with monkeypatch.context() as mp:
            mp.setenv("TILEGEMM_FAST_LAUNCH", "0")
            mp.setattr(dispatch, "_PLANS", {})
            return fn(a, b)

    monkeypatch.setattr(dispatch, "_PLANS", {})  # (no plan an earlier test built from two tensors serves the first call)
    built = dispatch.STATS["plans_built"]
    first = fn(x, x)
    assert dispatch.STATS["plans_built"] == built + 1, f"{call}: no plan built of (x, x)"
    for a, b in ((x, x), (x, y), (y, y), (y, x)):
        slow = dispatch.STATS["slow_calls"]
        got = fn(a, b)
        assert dispatch.STATS["slow_calls"] == slow, f"{call}: a repeated call took the slow path"
        assert torch.equal(got, unplanned(a, b)), (call, a is x, b is x)
    assert torch.equal(first, fn(x, x))


@pytest.mark.gpu
@pytest.mark.parametrize("case", ["fp16 from float32 and bfloat16", "fp8 from float32 and bfloat16",
                                  "fp8, scale_a given", "fp8, scale_b given", "fp8, both scales given"])
def test_gpu_unlike_conversions_of_the_two_operands_pair_exactly(case, monkeypatch):
    """The pair kernels (_convert.paired) where gemm converts the operands unlike each other: from
    two dtypes (one a transposed weight, of another size), and FP8 with the caller's scale for one
    operand (its partner's amax then runs alone, first; the pair quantise takes GIVEN for one and
    not the other) or for both (no amax). C bit for bit what gemm gives on the operands converted
    one by one (_convert.fp8 with the same scales; torch's cast), on the first call, the planned
    calls after it (no slow call), and Triton's own launcher (TILEGEMM_FAST_LAUNCH=0, no plans);
    new contents of the operands and the scale tensors, at the same addresses, give their own product."""
    torch = pytest.importorskip("torch")
    import tilegemm
    from tilegemm.kernels.tensorcore import _convert as conv

    g = torch.Generator(device="cuda").manual_seed(7)
    precision = case[:4].rstrip(" ,")
    a = torch.randn(300, 1000, device="cuda", generator=g)
    b = (torch.randn(520, 1000, device="cuda", generator=g) * 1e-2).to(torch.bfloat16).t()
    if "from" not in case:
        b = b.float()
    sa = torch.full((1,), 0.05, device="cuda") if case.endswith(("a given", "both scales given")) else None
    sb = torch.full((1,), 2e-4, device="cuda") if case.endswith(("b given", "both scales given")) else None
    call = lambda: tilegemm.gemm(a, b, precision=precision, scale_a=sa, scale_b=sb)  # noqa: E731
    changes = (None, None, lambda: a.mul_(3), lambda: b[7, 3].fill_(-0.08),  # (B's amax now, in range of sb)
               lambda: [s.mul_(1.5) for s in (sa, sb) if s is not None])  # (a plan reads the caller's scale tensors)

    def by_hand():
        if precision == "fp8":
            (qa, s_a), (qb, s_b) = conv.fp8(a, sa), conv.fp8(b, sb)
            return tilegemm.gemm(qa, qb, scale_a=s_a, scale_b=s_b)
        return tilegemm.gemm(a.half(), b.half())

    monkeypatch.setattr(dispatch, "_PLANS", {})
    for i, change in enumerate(changes):
        if change:
            change()
        slow = dispatch.STATS["slow_calls"]
        got = call()
        assert dispatch.STATS["slow_calls"] == slow + (i == 0), f"{case}: a repeated call took the slow path"
        assert _same_bits(got, by_hand()), (case, i)
        with monkeypatch.context() as mp:
            mp.setenv("TILEGEMM_FAST_LAUNCH", "0")
            mp.setattr(dispatch, "_PLANS", {})
            assert _same_bits(got, call()), (case, i)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_gpu_a_planned_out_still_refuses_its_own_input(dtype):
    """matmul(a, b, out=c) keeps a plan for c's shape, strides and alignment; an out with those
    that shares memory with a (here a itself, square) finds that plan and is still refused with
    the slow path's LayoutError, a unchanged."""
    torch = pytest.importorskip("torch")
    import tilegemm
    from tilegemm.errors import LayoutError

    a, b = (torch.rand(256, 256, device="cuda").to(getattr(torch, dtype)) for _ in range(2))
    c = torch.empty_like(a)
    tilegemm.matmul(a, b, out=c)
    before = dispatch.STATS["slow_calls"]
    assert tilegemm.matmul(a, b, out=c) is c and dispatch.STATS["slow_calls"] == before
    keep = a.clone()
    with pytest.raises(LayoutError, match="shares memory with a"):
        tilegemm.matmul(a, b, out=a)
    assert torch.equal(a, keep)


@pytest.mark.gpu
def test_gpu_a_planned_gemm_c_still_refuses_its_own_input():
    """gemm(a, b, c=c, beta=1) keeps a plan; gemm(a, b, c=a, beta=1) of c's shape, strides and
    alignment finds it and is refused with the slow path's LayoutError, a unchanged."""
    torch = pytest.importorskip("torch")
    import tilegemm
    from tilegemm.errors import LayoutError

    a, b, c = (torch.rand(256, 256, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    tilegemm.gemm(a, b, c=c, beta=1.0)
    before = dispatch.STATS["slow_calls"]
    tilegemm.gemm(a, b, c=c, beta=1.0)
    assert dispatch.STATS["slow_calls"] == before  # planned
    keep = a.clone()
    with pytest.raises(LayoutError, match="shares memory"):
        tilegemm.gemm(a, b, c=a, beta=1.0)
    assert torch.equal(a, keep)


@pytest.mark.gpu
def test_gpu_a_stream_bound_plan_keeps_its_scratch():
    """t04's fused split-K (16×1024×8192 BF16 on the shipped H100 and H200 databases): its plan is
    bound to the stream and makes its partials' buffer once; calls after the first, queued back to
    back with new operands, reuse it and compute their own products."""
    torch = pytest.importorskip("torch")
    import tilegemm

    a1, a2 = (torch.rand(16, 8192, device="cuda").bfloat16() for _ in range(2))
    b = torch.rand(8192, 1024, device="cuda").bfloat16()
    said = tilegemm.explain(a1, b)
    assert "tc_splitk" in said and "FUSED=True" in said, said
    dispatch.reset()  # whatever other tests built: this plan's first call is the slow path's
    tilegemm.matmul(a1, b)
    plan = dispatch._PLANS[dispatch.matmul_key(a1, b, a1.data_ptr(), b.data_ptr())]
    assert plan.stream is not None and plan.need and not dispatch._ARENAS  # the slow path's own buffer
    tilegemm.matmul(a1, b)
    (arena,) = dispatch._ARENAS.values()
    kept = arena.base
    c1, c2 = tilegemm.matmul(a1, b), tilegemm.matmul(a2, b)
    assert list(dispatch._ARENAS.values()) == [arena] and arena.base == kept and arena.size >= plan.need
    for c, x in ((c1, a1), (c2, a2)):
        r = x.double() @ b.double()
        assert float((c.double() - r).norm() / r.norm()) < 1e-2


@pytest.mark.gpu
def test_gpu_calls_that_alternate_between_streams_build_each_streams_plan_once():
    """Calls of one key alternating between the current stream and a side stream. t04's fused
    split-K (16×1024×8192 BF16: a plan bound to its stream by the tile counters), by matmul and by a
    patched nn.Linear with its bias (a view kept under the layer's key): one slow call on the side
    stream, whose plan is kept beside the first, then none. FP8 gemm with no scales or float ones
    (fixed scales: filled once, never freed) and FP8 quantised by gemm: a plan bound to a stream
    only where its rung is t04's fused split-K, else one plan serving both streams with no slow
    call. Every product is right, and (but split-K's, whose slices may sum in any order) each stream's
    calls give the first call's bits."""
    torch = pytest.importorskip("torch")
    import tilegemm
    from tilegemm.kernels.tensorcore import _problem as P

    x = torch.rand(16, 8192, device="cuda").bfloat16()
    w = torch.rand(8192, 1024, device="cuda").bfloat16()
    assert "FUSED=True" in tilegemm.explain(x, w)
    lin = torch.nn.Linear(8192, 1024, device="cuda", dtype=torch.bfloat16)
    f8a = (torch.rand(256, 512, device="cuda") * 2 - 1).to(torch.float8_e4m3fn)
    f8b = (torch.rand(256, 512, device="cuda") * 2 - 1).to(torch.float8_e4m3fn).t()
    q = torch.randn(16, 4096, device="cuda").bfloat16(), torch.randn(4096, 4096, device="cuda").bfloat16()
    f8 = f8a.double() @ f8b.double()
    cases = [  # name, call, float64 reference, tolerance, is t04's (bound to its stream)
        ("t04 matmul", lambda: tilegemm.matmul(x, w), x.double() @ w.double(), 1e-2, True),
        ("t04 patched linear", lambda: lin(x), torch.nn.functional.linear(x.double(), lin.weight.double(),
                                                                         lin.bias.double()), 1e-2, True),
        ("fp8 no scales", lambda: tilegemm.gemm(f8a, f8b), f8, 2e-2, None),
        ("fp8 float scales", lambda: tilegemm.gemm(f8a, f8b, scale_a=0.5, scale_b=-2.0), -f8, 2e-2, None),
        ("fp8 quantised", lambda: tilegemm.gemm(*q, precision="fp8"), q[0].double() @ q[1].double(), 8e-2, None),
    ]
    side = torch.cuda.Stream()
    main = torch.cuda.current_stream()
    with tilegemm.patch(lin), torch.no_grad():
        for name, call, ref, tol, t04 in cases:
            dispatch.reset()
            first = call()
            call()  # (a linear's first call keeps the layer's view plan, its second finds it)
            plans = [dispatch._bound(p) for p in dispatch._PLANS.values()]
            fused = any("splitk_fused" in one.name for p in plans for one in p.launches)
            bound = any(p.stream is not None for p in plans)
            assert plans and bound == fused and (fused or not t04), f"{name}: bound {bound}, t04's fused {fused}"
            if name.startswith("fp8") and "quantised" not in name:  # (gemm's scales: 1, or the floats given)
                assert all(s is None for p in plans for s in p.keep), f"{name}: a plan keeps scales of its own"
            side.wait_stream(main)
            before = dispatch.STATS["slow_calls"]
            got = []
            for i in range(6):
                with torch.cuda.stream(side if i % 2 == 0 else main):
                    got.append(call())
                if i == 1:  # the side stream's first call, and the current stream's
                    slow_first = dispatch.STATS["slow_calls"] - before
            torch.cuda.synchronize()
            slow = dispatch.STATS["slow_calls"] - before
            assert slow_first == slow == int(bound), f"{name}: {slow} slow calls over 6 alternating (bound: {bound})"
            for c in [first, *got]:
                err = float((c.double() - ref).norm() / ref.norm())
                assert err < tol, f"{name}: error {err:.2e}"
                assert fused or torch.equal(c, first), f"{name}: a stream's call gave another product"
    assert P.fixed_scale(-0.0, x.device) is not P.fixed_scale(0.0, x.device)
    assert P.fixed_scale(0.5, x.device) is P.fixed_scale(0.5, x.device)
    # a plan with fixed scales holds nothing a graph must not take: it serves a capture too
    scaled = lambda: tilegemm.gemm(f8a, f8b, scale_a=0.5, scale_b=-2.0)  # noqa: E731
    scaled()
    slow = dispatch.STATS["slow_calls"]
    graph, out = _captured(torch, scaled)
    assert dispatch.STATS["slow_calls"] == slow, "the capture of an FP8 call with float scales took the slow path"
    f8a.copy_((torch.rand(256, 512, device="cuda") * 2 - 1).to(torch.float8_e4m3fn))
    graph.replay()
    torch.cuda.synchronize()
    ref = -(f8a.double() @ f8b.double())
    assert float((out.double() - ref).norm() / ref.norm()) < 2e-2
    dispatch.reset()


@pytest.mark.gpu
def test_gpu_memory_tilegemm_keeps_is_never_in_the_callers_mem_pool():
    """First calls inside torch.cuda.use_mem_pool, on a stream of their own, of what makes memory
    tilegemm keeps for the process: an FP8 gemm with a number scale (its fixed tensor), a BF16
    product with a realigning copy (100×12345×678: the stream's arena) and t04's fused split-K
    (16×1024×8192: the stream's tile counters). Each is made outside the pool (P.made_apart), so
    once the calls' results are freed the pool holds no block (its memory can go, or be given up
    and mapped again without losing a scale or the counters' zeros); the products are the pool's,
    and right, and later calls outside it, on the same stream, are right too."""
    torch = pytest.importorskip("torch")
    import tilegemm
    from tilegemm.kernels.tensorcore import _problem as P
    from tilegemm.kernels.tensorcore import t04_splitk

    f8a = torch.randn(64, 128, device="cuda").to(torch.float8_e4m3fn)
    f8b = torch.randn(96, 128, device="cuda").to(torch.float8_e4m3fn).T
    v = 0.3125 + len(P._FIXED) / 1024  # (a number no earlier test kept)
    ra, rb = torch.rand(100, 678, device="cuda").bfloat16(), torch.rand(678, 12345, device="cuda").bfloat16()
    sa, sb = torch.rand(16, 8192, device="cuda").bfloat16(), torch.rand(8192, 1024, device="cuda").bfloat16()
    assert "FUSED=True" in tilegemm.explain(sa, sb)
    calls = [(lambda: tilegemm.gemm(f8a, f8b, scale_a=v), v * (f8a.double() @ f8b.double()), 2e-2),
             (lambda: tilegemm.matmul(ra, rb), ra.double() @ rb.double(), 1e-2),
             (lambda: tilegemm.matmul(sa, sb), sa.double() @ sb.double(), 1e-2)]
    dispatch.reset()
    side, pool = torch.cuda.Stream(), torch.cuda.MemPool()  # (torch hands out pooled streams: an earlier test's
    t04_splitk._COUNTERS.pop((f8a.device, side.cuda_stream), None)  # counters there would be found, not made)
    assert (f8a.device, v.hex()) not in P._FIXED and len(P._FIXED) < P.FIXED_SCALES_MAX
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        with torch.cuda.use_mem_pool(pool):  # (twice: the plan's first call uses a scratch buffer of its own,
            got = [(call(), ref, tol) for call, ref, tol in calls for _ in range(2)]  # its second the arena)
        got += [(call(), ref, tol) for call, ref, tol in calls]
    torch.cuda.synchronize()
    for c, ref, tol in got:
        assert float((c.double() - ref).norm() / ref.norm()) < tol
    kept = [P._FIXED[(f8a.device, v.hex())], dispatch._ARENAS[(f8a.device.index, side.cuda_stream)].buf,
            t04_splitk._COUNTERS[(f8a.device, side.cuda_stream)]]
    held = lambda: [blk for seg in pool.snapshot() for blk in seg["blocks"]  # noqa: E731
                    if blk["state"] == "active_allocated"]
    assert held(), "the results were not the pool's: the check below would prove nothing"
    del got, c
    torch.cuda.synchronize()
    assert not held(), f"the pool still holds {held()} once the calls' results are freed"
    assert all(t.is_cuda for t in kept)
    dispatch.reset()


@pytest.mark.gpu
def test_gpu_a_numbers_first_scale_during_another_threads_capture_fails_neither():
    """A thread captures a CUDA graph in torch's default mode (global: an unsafe CUDA call from any
    thread fails the capture) while another makes a number's first scale (P.fixed_scale: filled on
    a stream of its own, which its filling thread, in relaxed capture mode, synchronises): the
    scale is kept and right, the graph captured, and its replay right."""
    torch = pytest.importorskip("torch")
    import threading

    from tilegemm.kernels.tensorcore import _problem as P

    x = torch.randn(64, 64, device="cuda")
    y = torch.zeros_like(x)
    v = 0.40625 + len(P._FIXED) / 1024  # (a number no earlier test kept)
    assert (x.device, v.hex()) not in P._FIXED and len(P._FIXED) < P.FIXED_SCALES_MAX
    started, made, box = threading.Event(), threading.Event(), {}

    def other():
        started.wait(30)
        try:
            box["scale"] = P.fixed_scale(v, x.device)
        except BaseException as e:
            box["error"] = e
        made.set()

    worker = threading.Thread(target=other)
    worker.start()
    graph = torch.cuda.CUDAGraph()
    torch.cuda.synchronize()
    with torch.cuda.graph(graph):  # (capture_error_mode="global", torch's default)
        y.copy_(x * 2)
        started.set()
        made.wait(30)
        y.add_(1)
    worker.join()
    assert "error" not in box, box["error"]
    y.zero_()
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(y, x * 2 + 1)
    assert P.is_fixed(box["scale"]) and box["scale"].item() == v


@pytest.mark.gpu
def test_gpu_a_realigning_plan_keeps_its_copies_buffers():
    """100×12345×678 BF16 (rows of 1,356 and 24,690 bytes: both operands copied for TMA, 16.9 MB
    of buffers): the copies' buffers lie in the arena of the stream of its calls, so later calls on
    new operands find them in place and compute their own products; calls on another stream are
    served by the same plan in that stream's arena, and are right too; a second plan with scratch
    (777×1234×4321) shares the arena, and calls of the two interleaved are right."""
    torch = pytest.importorskip("torch")
    import tilegemm

    a1, a2 = (torch.rand(100, 678, device="cuda").bfloat16() for _ in range(2))
    b = torch.rand(678, 12345, device="cuda").bfloat16()
    said = tilegemm.explain(a1, b)
    assert "tc_tma_persistent" in said and "16-byte aligned rows" in said, said
    dispatch.reset()
    tilegemm.matmul(a1, b)
    plan = dispatch._PLANS[dispatch.matmul_key(a1, b, a1.data_ptr(), b.data_ptr())]
    assert plan.stream is None and plan.need > 8 << 20
    tilegemm.matmul(a1, b)
    (arena,) = dispatch._ARENAS.values()
    kept = arena.base
    c1, c2 = tilegemm.matmul(a1, b), tilegemm.matmul(a2, b)
    assert list(dispatch._ARENAS.values()) == [arena] and arena.base == kept
    x, y = torch.rand(777, 4321, device="cuda").bfloat16(), torch.rand(4321, 1234, device="cuda").bfloat16()
    tilegemm.matmul(x, y)
    other = dispatch._PLANS[dispatch.matmul_key(x, y, x.data_ptr(), y.data_ptr())]
    assert other.need and len(dispatch._ARENAS) == 1  # the same arena (grown, if it had to)
    pairs = [(tilegemm.matmul(a1, b), a1, b), (tilegemm.matmul(x, y), x, y), (tilegemm.matmul(a2, b), a2, b)]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    slow = dispatch.STATS["slow_calls"]
    with torch.cuda.stream(side):
        tilegemm.matmul(a1, b)
        c3 = tilegemm.matmul(a2, b)
    torch.cuda.current_stream().wait_stream(side)
    assert dispatch.STATS["slow_calls"] == slow and len(dispatch._ARENAS) == 2
    for c, x_, y_ in [(c1, a1, b), (c2, a2, b), (c3, a2, b), *pairs]:
        r = x_.double() @ y_.double()
        assert float((c.double() - r).norm() / r.norm()) < 1e-2


@pytest.mark.gpu
def test_gpu_unaligned_operands_run_t03_after_a_realigning_copy_in_the_plan():
    """777×1234×4321 BF16 (rows of 8,642 and 2,468 bytes): t03 with the realigning copy, said by
    explain; the second call is served by the plan (the copy and the GEMM replayed)."""
    torch = pytest.importorskip("torch")
    import tilegemm

    a = torch.rand(777, 4321, device="cuda").bfloat16()
    b = torch.rand(4321, 1234, device="cuda").bfloat16()
    said = tilegemm.explain(a, b)
    assert "tc_tma_persistent" in said and "16-byte aligned rows" in said, said
    tilegemm.matmul(a, b)
    before = dispatch.STATS["slow_calls"]
    c = tilegemm.matmul(a, b)
    assert dispatch.STATS["slow_calls"] == before
    r = a.double() @ b.double()
    assert float((c.double() - r).norm() / r.norm()) < 1e-2


@pytest.mark.gpu
@pytest.mark.parametrize("rung", ["tc_tma_persistent", "tc_warp_specialized"])
@pytest.mark.parametrize("pad", ["b", "ab"])
def test_gpu_pad_copies_run_in_the_plan(rung, pad):
    """A PAD configuration on t03 and t05 (BF16 1000×1000×1000: rows of 2,000 bytes, 16- but not
    128-byte aligned): its copies (A's and B's in one launch) write plan scratch, and the plan's
    calls on new operands compute their own products."""
    torch = pytest.importorskip("torch")
    from tilegemm.kernels.tensorcore import _problem as P
    from tilegemm.kernels.tensorcore import t03_tma_persistent as t03
    from tilegemm.tuning import space

    def operands():
        return torch.rand(1000, 1000, device="cuda").bfloat16(), torch.rand(1000, 1000, device="cuda").bfloat16()

    a, b = operands()
    p = P.problem_2d(a, b, torch.empty(1000, 1000, device="cuda", dtype=torch.bfloat16))
    cfg = dict(space.candidates(rung, p)[0], PAD=pad)
    copies = t03.operands(p, cfg)[2]
    assert t03.padded(p, cfg) == pad and len(copies) == 1 and len(copies[0].scratch) == len(pad)
    key = ("pad-test", rung, pad)
    dispatch.run_problem(p, rung, key=key, config=cfg)
    plan = dispatch._PLANS[key]
    assert len(plan.launches) == 2 and len(plan.scratch) == len(pad)
    r = a.double() @ b.double()
    assert float((p.c.double() - r).norm() / r.norm()) < 1e-2
    for x, y in (operands(), operands()):
        c = plan.run(x.data_ptr(), y.data_ptr(), None, 0, 0)
        r = x.double() @ y.double()
        assert float((c.double() - r).norm() / r.norm()) < 1e-2


@pytest.mark.gpu
def test_gpu_plan_alpha_beta_c_and_scales_change_with_the_call():
    """alpha, beta and float scales are part of a call's key; c (given) is written in place."""
    torch = pytest.importorskip("torch")
    import tilegemm

    a = torch.rand(128, 256, device="cuda").half()
    b = torch.rand(256, 192, device="cuda").half()
    r = a.double() @ b.double()
    c = torch.rand(128, 192, device="cuda").half()
    c0 = c.clone()
    for alpha, beta in ((1.0, 0.0), (2.0, 0.0), (0.5, 1.0), (2.0, 0.0)):
        c.copy_(c0)
        got = tilegemm.gemm(a, b, alpha=alpha, beta=beta, c=c)
        assert got is c
        want = alpha * r + beta * c0.double()
        assert float((c.double() - want).norm() / want.norm()) < 3e-3, (alpha, beta)


def _same_bits(x, y) -> bool:
    """x and y of one 16-bit dtype, bit for bit (torch.equal has NaN unequal to itself)."""
    import torch

    return x.dtype == y.dtype and torch.equal(x.view(torch.int16), y.view(torch.int16))


def _captured(torch, call, warm: int = 1, on_side: bool = False):
    """call() run `warm` times on a side stream, then captured in a CUDA graph (on that stream where
    on_side): the graph, and what the captured call returned."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(warm):
            call()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s if on_side else None):
        out = call()
    return g, out


@pytest.mark.gpu
def test_gpu_graph_capture_replays_a_plan():
    torch = pytest.importorskip("torch")
    import tilegemm

    for dt in (torch.bfloat16, torch.float32):
        a = torch.rand(512, 512, device="cuda").to(dt)
        b = torch.rand(512, 512, device="cuda").to(dt)
        tilegemm.matmul(a, b)  # the plan exists before the capture
        g, out = _captured(torch, lambda: tilegemm.matmul(a, b))
        a.copy_(torch.rand_like(a))
        g.replay()
        torch.cuda.synchronize()
        r = a.double() @ b.double()
        assert float((out.double() - r).norm() / r.norm()) < 1e-2


@pytest.mark.gpu
def test_gpu_fp32_copies_for_k16_through_a_plan_and_a_graph():
    """FP32 at 4095×4097×1023 (rows off 16 bytes): `matmul` runs k16 on copies of A and B padded
    to whole tiles, into C's padded rows, copied out; the plan replays the three copies and the
    kernel, its scratch made by torch's allocator for each call; a later call on new values, and a
    replay of a graph captured with new values, compute their own products."""
    torch = pytest.importorskip("torch")
    import tilegemm

    a = torch.rand(4095, 1023, device="cuda")
    b = torch.rand(1023, 4097, device="cuda")

    def err(c):
        r = a.double() @ b.double()
        return float((c.double() - r).norm() / r.norm())

    assert err(tilegemm.matmul(a, b)) < 1e-5
    plan = dispatch._PLANS[dispatch.call_key(a, b)]
    assert len(plan.launches) == 4 and [dt for _, dt in plan.scratch] == [torch.float32] * 3
    assert [n for n, _ in plan.scratch] == [4096 * 1024, 1024 * 4224, 4095 * 4224]  # A, B and C in whole tiles
    a.copy_(torch.rand_like(a)), b.copy_(torch.rand_like(b))
    slow = dispatch.STATS["slow_calls"]
    assert err(tilegemm.matmul(a, b)) < 1e-5 and dispatch.STATS["slow_calls"] == slow  # the plan's replay
    g, out = _captured(torch, lambda: tilegemm.matmul(a, b), on_side=True)
    a.copy_(torch.rand_like(a)), b.copy_(torch.rand_like(b))
    g.replay()
    torch.cuda.synchronize()
    assert err(out) < 1e-5


@pytest.mark.gpu
@pytest.mark.parametrize("sa,sb,ta,tb", [((64, 4096), (4096, 4096), False, True), ((256, 384), (384, 200), True, False),
                                         ((100, 300), (300, 130), True, True)])
def test_gpu_fp32_strided_operands_are_copied_in_the_plan(sa, sb, ta, tb):
    """FP32 with a transposed operand: a transposed A's contiguous copy (k17's transposing tile) is
    a recorded kernel into the call's scratch, so the call keeps a plan that repeats it at the
    operand's address; a
    transposed B (x @ W.t()) is read in place by the FP32 auto rung (W's rows, no copy: its
    `brows` tiles, 16-byte loads or, N = 130, one element at a time). A later call on new values
    computes its own product without the slow path, and so does a captured graph's replay."""
    torch = pytest.importorskip("torch")
    import tilegemm

    def operands():  # new tensors each time: a plan must read them at their own addresses
        a = torch.rand(sa[::-1] if ta else sa, device="cuda")
        b = torch.rand(sb[::-1] if tb else sb, device="cuda")
        return (a.t() if ta else a), (b.t() if tb else b)

    def err(c, a, b):
        r = a.double() @ b.double()
        return float((c.double() - r).norm() / r.norm())

    a, b = operands()
    assert err(tilegemm.matmul(a, b), a, b) < 1e-5
    plan = dispatch._PLANS[dispatch.call_key(a, b)]
    assert isinstance(plan, dispatch.LaunchPlan) and len(plan.launches) >= 1 + ta
    names = [launch.name for launch in plan.launches]
    assert sum("transpose" in name for name in names) == ta and any("brows" in name for name in names) == tb, names
    slow = dispatch.STATS["slow_calls"]
    a2, b2 = operands()
    assert err(tilegemm.matmul(a2, b2), a2, b2) < 1e-5 and dispatch.STATS["slow_calls"] == slow  # the plan's replay
    g, out = _captured(torch, lambda: tilegemm.matmul(a, b), on_side=True)
    a.copy_(torch.rand_like(a)), b.copy_(torch.rand_like(b))
    g.replay()
    torch.cuda.synchronize()
    assert err(out, a, b) < 1e-5


@pytest.mark.gpu
def test_gpu_fp32_a_sliced_a_and_a_transposed_out_are_copied_along_their_contiguous_axes():
    """FP32, a sliced A (rows contiguous, every other column): copied along its rows by a recorded
    `arrays.copy_2d` in the plan, a replay on new values right; a transposed out=: the product
    computed contiguous and scattered into it along its columns."""
    torch = pytest.importorskip("torch")
    import tilegemm
    from tilegemm import arrays

    def err(c, a, b):
        r = a.double() @ b.double()
        return float((c.double() - r).norm() / r.norm())

    big, b = torch.rand(300, 1000, device="cuda"), torch.rand(500, 260, device="cuda")
    a = big[:, ::2]
    assert err(tilegemm.matmul(a, b), a, b) < 1e-5
    names = [launch.name for launch in dispatch._PLANS[dispatch.call_key(a, b)].launches]
    assert sum("along_rows" in name for name in names) == 1, names
    big.copy_(torch.rand_like(big))
    slow = dispatch.STATS["slow_calls"]
    assert err(tilegemm.matmul(a, b), a, b) < 1e-5 and dispatch.STATS["slow_calls"] == slow
    out = torch.full((260, 300), float("nan"), device="cuda").t()
    seen = []
    real = arrays.copy_2d
    arrays.copy_2d = lambda src, dst, *args, **kw: seen.append(dst.strides) or real(src, dst, *args, **kw)
    try:
        assert tilegemm.matmul(a, b, out=out) is out
    finally:
        arrays.copy_2d = real
    assert err(out, a, b) < 1e-5 and (4, 4 * 300) in seen, seen


@pytest.mark.gpu
def test_gpu_fp32_decode_rows_run_the_decode_form_in_each_of_its_forms():
    """FP32 x @ W.t() at M = 1 to 16 (16-byte rows): k17's decode form, x's steps staged in shared
    memory, in every (warps, columns) form of GEMV_FORMS; exact on small integers for each M, with
    K's tail past its 256-element steps and N not a multiple of a block's columns, through the
    public API (the plan's launch is the decode form's) and a patched layer's bias; a captured
    graph replays it on new values."""
    torch = pytest.importorskip("torch")
    import tilegemm
    from tilegemm.kernels.simt import k17_splitk_unrolled as k17

    def ints(*shape):
        return torch.randint(-4, 5, shape, device="cuda").float()

    n, k = 2100, 1284  # (2100 columns: blocks of 16 and 32 columns run past N; K = 5 · 256 + 4)
    w = ints(n, k)
    for m in range(1, 17):
        x = ints(m, k)
        got = tilegemm.matmul(x, w.t())
        assert torch.equal(got.double(), x.double() @ w.double().t()), m
        names = [launch.name for launch in dispatch._PLANS[dispatch.call_key(x, w.t())].launches]
        assert names and all("gemv" in name for name in names), (m, names)
    c = torch.empty(16, n, device="cuda")
    x = ints(16, k)
    from tilegemm import _cuda
    dx, dw, dc = (_cuda.cuda.as_cuda_array(t) for t in (x, w, c))
    for rows, forms in k17.GEMV_FORMS.items():
        for form in forms:
            c.fill_(float("nan"))
            k17.launch_gemv(dx[:rows], dw, dc[:rows], form)
            torch.cuda.synchronize()
            assert torch.equal(c[:rows].double(), x[:rows].double() @ w.double().t()), (rows, form)
    lin = torch.nn.Linear(k, n).cuda()
    lin.weight.data.copy_(w), lin.bias.data.copy_(ints(n))
    with torch.no_grad(), tilegemm.patch(lin):
        x = ints(12, k)
        assert torch.equal(lin(x).double(), x.double() @ w.double().t() + lin.bias.double())
        key = dispatch.linear_key(x, lin.weight, x.data_ptr(), lin.weight.data_ptr())
        plan = dispatch._PLANS[key + dispatch.bias_key(lin.bias, lin.bias.data_ptr())]
        plan = getattr(plan, "plan", plan)  # (a view plan's launches are its plan's)
        assert isinstance(plan, dispatch.LaunchPlan), type(plan)  # the bias in the kernel, not added by torch
        assert [("gemv" in launch.name) for launch in plan.launches] == [True]
        g, out = _captured(torch, lambda: lin(x), on_side=True)
        x.copy_(ints(12, k))
        g.replay()
        torch.cuda.synchronize()
        assert torch.equal(out.double(), x.double() @ w.double().t() + lin.bias.double())


@pytest.mark.gpu
def test_gpu_fp32_a_large_product_copies_the_weight_first():
    """FP32 x @ W.t() where the product is large enough that reading W's rows costs more than a
    copy (`k17.copy_pays`: 1024 × 4096 × 4096): the plan copies W into B's layout (the transposing
    kernel) and runs the plain tiles; with a bias (a patched layer) the bias is added in their
    epilogue. Right on new values, by the plan."""
    torch = pytest.importorskip("torch")
    import tilegemm
    from tilegemm.kernels.simt import k17_splitk_unrolled as k17

    assert k17.copy_pays(k17.linear_plan(1024, 4096, 4096, True), 4096, 4096)
    x, w = torch.rand(1024, 4096, device="cuda"), torch.rand(4096, 4096, device="cuda")
    for _ in range(2):
        x.copy_(torch.rand_like(x))
        r = x.double() @ w.double().t()
        assert float((tilegemm.matmul(x, w.t()).double() - r).norm() / r.norm()) < 1e-5
    names = [launch.name for launch in dispatch._PLANS[dispatch.call_key(x, w.t())].launches]
    assert any("transpose" in name for name in names) and not any("brows" in name for name in names), names
    lin = torch.nn.Linear(4096, 4096).cuda()
    lin.bias.data.uniform_(-4, 4)
    with torch.no_grad(), tilegemm.patch(lin):
        for _ in range(2):
            x.copy_(torch.rand_like(x))
            r = x.double() @ lin.weight.double().t() + lin.bias.double()
            assert float((lin(x).double() - r).norm() / r.norm()) < 1e-5
    key = dispatch.linear_key(x, lin.weight, x.data_ptr(), lin.weight.data_ptr())
    key += dispatch.bias_key(lin.bias, lin.bias.data_ptr())
    assert type(dispatch._PLANS[key]) is dispatch.ViewPlan


@pytest.mark.gpu
def test_gpu_a_captured_graph_owns_its_scratch():
    """A plan with its copies' buffers in the stream's arena (BF16 100×12345×678), warmed on a
    stream and then captured there: the graph gets buffers of its own pool, so after every plan
    and arena is dropped (the arenas back with torch's allocator, and taken by new tensors) a
    replay writes nothing but its result, and the result is right."""
    torch = pytest.importorskip("torch")
    import tilegemm

    a = torch.rand(100, 678, device="cuda").bfloat16()
    b = torch.rand(678, 12345, device="cuda").bfloat16()
    g, out = _captured(torch, lambda: tilegemm.matmul(a, b), warm=3, on_side=True)
    dispatch.reset()
    torch.cuda.synchronize()
    fills = [torch.full((n,), 7, dtype=torch.bfloat16, device="cuda") for n in (70400, 8374656, 70400, 8374656)]
    a.copy_(torch.rand_like(a))
    g.replay()
    torch.cuda.synchronize()
    assert all(bool((f == 7).all()) for f in fills)
    r = a.double() @ b.double()
    assert float((out.double() - r).norm() / r.norm()) < 1e-2


@pytest.mark.gpu
def test_gpu_threads_and_streams():
    """Eight threads calling the same plans at once, each on its own stream, get their own products."""
    torch = pytest.importorskip("torch")
    import tilegemm

    shapes = [(64, 64, 64), (16, 4096, 4096), (300, 500, 700)]
    for dt in (torch.bfloat16, torch.float32):
        for m, n, k in shapes:  # plans built first, so the threads share them
            tilegemm.matmul(torch.rand(m, k, device="cuda").to(dt), torch.rand(k, n, device="cuda").to(dt))
    errors = []

    def work(seed):
        g = torch.Generator(device="cuda").manual_seed(seed)
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            for _ in range(20):
                for dt in (torch.bfloat16, torch.float32):
                    for m, n, k in shapes:
                        a = torch.rand(m, k, device="cuda", generator=g).to(dt)
                        b = torch.rand(k, n, device="cuda", generator=g).to(dt)
                        c = tilegemm.matmul(a, b)
                        s.synchronize()
                        r = a.double() @ b.double()
                        err = float((c.double() - r).norm() / r.norm())
                        if err > 1e-2:
                            errors.append((seed, dt, m, n, k, err))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:5]


@pytest.mark.gpu
def test_gpu_explain_says_where_the_configuration_comes_from():
    torch = pytest.importorskip("torch")
    import tilegemm

    a = torch.rand(3000, 7000, device="cuda").bfloat16()
    b = torch.rand(7000, 5000, device="cuda").bfloat16()
    text = tilegemm.explain(a, b)
    assert "tensor-core rung tc_" in text and "configuration from" in text
    # the first line names the rung that runs, not the registry's entry for the tensor cores
    rung = text.split("tensor-core rung ")[1].split(":")[0]
    assert text.splitlines()[0].split(": ")[1].startswith(f"{rung} ("), text
    said = tilegemm.explain(a[:16], b, kernel="tc_gemv")  # M = 16 is past t06: t04 runs it
    assert said.splitlines()[0].split(": ")[1].startswith("tc_splitk ("), said
    assert "asked for tc_gemv; this shape runs on tc_splitk" in said, said


def test_ctypes_structure_matches_culaunchconfig():
    """CUlaunchConfig: seven 32-bit fields, then the stream at offset 32 (8-byte aligned), the
    attribute pointer and their count."""
    assert launcher._Config.hStream.offset == 32 and launcher._Config.attrs.offset == 40
    assert launcher._Config.numAttrs.offset == 48 and ctypes.sizeof(launcher._Config) == 56


def test_an_out_of_memory_error_states_what_was_needed_and_what_is_free(monkeypatch):
    """torch, CuPy and Numba each raise their own out-of-memory type: every one becomes
    OutOfDeviceMemory (a MemoryError) with the bytes needed and free; other errors pass through."""
    import tilegemm

    monkeypatch.setattr(dispatch, "_device_memory", lambda: (3 * 2**20, 80 * 2**30))
    with pytest.raises(tilegemm.OutOfDeviceMemory, match=r"the result: needs 512\.0 MiB of device memory, 3\.0 MiB free"):
        with dispatch.memory_for("the result", 2**29):
            raise RuntimeError("CUDA out of memory. Tried to allocate 512.00 MiB")
    with pytest.raises(tilegemm.OutOfDeviceMemory):
        with dispatch.memory_for("x", 1):
            raise Exception("[CUresult.CUDA_ERROR_OUT_OF_MEMORY] Call to cuMemAlloc results in CUDA_ERROR_OUT_OF_MEMORY")
    with pytest.raises(ValueError, match="unrelated"):
        with dispatch.memory_for("x", 1):
            raise ValueError("unrelated")


def test_check_free_memory_reads_the_one_reader(monkeypatch):
    """The up-front check of host operands' copies and the out-of-memory message read the same
    (free, total) reader."""
    import tilegemm
    from tilegemm import _cuda

    monkeypatch.setattr(_cuda, "SIMULATOR", False)
    monkeypatch.setattr(dispatch, "_device_memory", lambda: (3 * 2**20, 80 * 2**30))
    dispatch.check_free_memory(2**20)
    with pytest.raises(tilegemm.OutOfDeviceMemory, match=r"needs 4\.0 MiB of device memory, 3\.0 MiB free of 81920\.0 MiB"):
        dispatch.check_free_memory(4 * 2**20)
