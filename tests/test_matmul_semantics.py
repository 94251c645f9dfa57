"""`tilegemm.matmul` as NumPy, torch and the Python array API standard define `matmul`.

Covered, each against `numpy.matmul` (NumPy operands) and `torch.matmul` (torch CPU tensors), in
float32 and float64, through the automatic kernel and through a SIMT rung asked for by name (the
simulator here; one 2-D launch per batch entry):
- 1-D · 1-D (a 0-D result), 1-D · 2-D, 2-D · 1-D, 1-D against N-D on either side;
- N-D · 2-D (a batch folded into rows), N-D · N-D with equal batches, broadcast batches
  ((2, 1, ·, ·) against (5, ·, ·); (1, ·, ·) against (6, ·, ·)), four dimensions;
- empty dimensions: a zero batch, M or N zero, K zero (an empty sum: zeros);
- `out=` for N-D results; inputs untouched;
- the error cases: 0-D operands, inner dimensions that differ, batches that do not broadcast
  (ShapeError: a ValueError as NumPy raises and a RuntimeError as torch raises), dtypes no kernel
  serves (DTypeError: a TypeError and a RuntimeError), mixed dtypes, an `out` of the wrong shape.
"""

from __future__ import annotations

import numpy as np
import pytest

import tilegemm
from tilegemm.errors import DTypeError, ShapeError

torch = pytest.importorskip("torch")

SHAPES = [
    ((4,), (4,)), ((4,), (4, 3)), ((2, 4), (4,)), ((4,), (5, 4, 3)), ((5, 2, 4), (4,)),
    ((5, 2, 4), (4, 3)), ((3, 2, 4), (3, 4, 5)), ((2, 1, 3, 4), (5, 4, 2)), ((1, 3, 4), (6, 4, 2)),
    ((2, 3, 2, 4), (2, 3, 4, 2)), ((0, 3, 4), (4, 2)), ((3, 0), (0, 2)), ((2, 3, 0), (2, 0, 5)), ((2, 0, 3), (3, 4)),
]


def _operands(sa, sb, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return rng.uniform(-1, 1, sa).astype(dtype), rng.uniform(-1, 1, sb).astype(dtype)


@pytest.mark.parametrize("kernel", ["auto", "register_blocked"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("sa,sb", SHAPES, ids=lambda s: "x".join(map(str, s)) or "scalar")
def test_numpy_and_torch_semantics(sa, sb, dtype, kernel):
    a, b = _operands(sa, sb, dtype)
    a0, b0 = a.copy(), b.copy()
    want = np.matmul(a, b)
    got = tilegemm.matmul(a, b, kernel=kernel)
    assert type(got) is type(want) and np.shape(got) == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == "float32" else 1e-12, atol=1e-6)
    assert np.array_equal(a, a0) and np.array_equal(b, b0)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    twant = torch.matmul(ta, tb)
    tgot = tilegemm.matmul(ta, tb, kernel=kernel)
    assert isinstance(tgot, torch.Tensor) and tgot.shape == twant.shape and tgot.dtype == twant.dtype
    assert torch.allclose(tgot, twant, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("sa,sb", [((5, 2, 4), (4, 3)), ((2, 1, 3, 4), (5, 4, 2)), ((4,), (5, 4, 3))])
def test_out_for_batched_results(sa, sb):
    a, b = _operands(sa, sb, "float32", seed=3)
    want = np.matmul(a, b)
    out = np.full(want.shape, np.nan, np.float32)
    assert tilegemm.matmul(a, b, out=out) is out
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
    tout = torch.full(want.shape, float("nan"))
    assert tilegemm.matmul(torch.from_numpy(a), torch.from_numpy(b), out=tout) is tout
    assert torch.allclose(tout, torch.from_numpy(want), rtol=1e-5, atol=1e-6)
    with pytest.raises(ShapeError):
        tilegemm.matmul(a, b, out=np.empty((1,) + want.shape, np.float32))


@pytest.mark.parametrize("sa,sb,why", [
    ((), (3,), "at least one dimension"), ((3,), (), "at least one dimension"),
    ((2, 3), (4, 5), "inner dimensions"), ((3,), (4,), "inner dimensions"), ((5, 2, 3), (4, 2), "inner dimensions"),
    ((2, 2, 3), (3, 3, 4), "do not broadcast"),
])
def test_shape_errors_are_numpys_and_torchs_error_classes(sa, sb, why):
    a, b = np.ones(sa, np.float32), np.ones(sb, np.float32)
    with pytest.raises(ValueError):
        np.matmul(a, b)  # NumPy's class for it …
    with pytest.raises(ValueError, match=why):  # … is ours
        tilegemm.matmul(a, b)
    with pytest.raises(RuntimeError):
        torch.matmul(torch.from_numpy(a), torch.from_numpy(b))  # torch's …
    with pytest.raises(RuntimeError, match=why):  # … too
        tilegemm.matmul(torch.from_numpy(a), torch.from_numpy(b))
    with pytest.raises(ValueError, match=why):  # and explain, which says what matmul would do, says the same
        tilegemm.explain(a, b)


@pytest.mark.parametrize("sa,sb", SHAPES, ids=lambda s: "x".join(map(str, s)) or "scalar")
def test_explain_takes_what_matmul_takes(sa, sb):
    a, b = _operands(sa, sb, "float32")
    said = tilegemm.explain(a, b)
    assert f"→ {np.matmul(a, b).shape}" in said.splitlines()[0] if (len(sa), len(sb)) != (2, 2) else "@" in said
    square = np.ones((2, 2), np.float32)
    assert tilegemm.plan(a, b).kernel.name == tilegemm.plan(square, square).kernel.name
    with pytest.raises(DTypeError, match="pass both of one kind"):
        tilegemm.explain(a, torch.from_numpy(b))


def test_dtype_errors_name_the_dtypes():
    for dt in ("int64", "int32", "bool", "complex64"):
        a = np.ones((2, 3), dt)
        with pytest.raises(TypeError, match=dt):
            tilegemm.matmul(a, a.T)
        with pytest.raises(RuntimeError, match=dt):
            tilegemm.matmul(torch.from_numpy(a), torch.from_numpy(np.ascontiguousarray(a.T)))
    with pytest.raises(DTypeError, match="mixed dtypes"):
        tilegemm.matmul(np.ones((2, 3), np.float32), np.ones((3, 2), np.float64))
    with pytest.raises(DTypeError, match="mixed dtypes"):
        tilegemm.matmul(np.ones((2, 2, 3), np.float32), np.ones(3, np.float64))


@pytest.mark.parametrize("kernel", ["auto", "cpu_naive", "cpu_blas"])
@pytest.mark.parametrize("sa,sb", [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((4,), (4, 5))])
def test_the_other_byte_order_is_read_and_written(sa, sb, kernel):
    """Big-endian arrays (as read from a file written elsewhere) go in and out as np.matmul takes
    them, on every host kernel: the inputs read in this machine's order, out= written in its own."""
    a, b = (x.astype(x.dtype.newbyteorder(">")) for x in _operands(sa, sb, "float32", seed=4))
    want = np.matmul(a, b)
    np.testing.assert_allclose(tilegemm.matmul(a, b, kernel=kernel), want, rtol=1e-5, atol=1e-6)
    out = np.full(want.shape, np.nan, a.dtype)
    assert tilegemm.matmul(a, b, kernel=kernel, out=out) is out
    assert out.dtype.byteorder == ">" and np.allclose(out, want, rtol=1e-5, atol=1e-6)
    with pytest.raises(ShapeError):
        tilegemm.matmul(a, b, kernel=kernel, out=np.empty((7,), a.dtype))
    with pytest.raises(DTypeError, match="out is a numpy array"):  # torch operands: a NumPy out is refused
        tilegemm.matmul(torch.from_numpy(a.astype(np.float32)), torch.from_numpy(b.astype(np.float32)), out=out)


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_the_other_byte_order_goes_to_the_gpu_in_this_machines(dtype, monkeypatch):
    """The GPU's operands (arrays.to_torch_cuda, the tensor cores' and gemm's): a big-endian array
    went to torch.from_numpy as it was, and torch's raw 'given numpy array has byte order different
    from the native byte order' came out. (.cuda() stood in for: the conversion is what is tested.)"""
    from tilegemm import arrays

    monkeypatch.setattr(torch.Tensor, "cuda", lambda self: self)
    x = np.arange(12, dtype=dtype).reshape(3, 4)
    got = arrays.to_torch_cuda(arrays.describe(x.astype(x.dtype.newbyteorder(">"))[:, ::-1], "a"))
    assert torch.equal(got, torch.from_numpy(np.ascontiguousarray(x[:, ::-1])))


@pytest.mark.parametrize("kernel", ["auto", "cpu_naive", "cpu_blas"])
@pytest.mark.parametrize("sa,sb", [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((4,), (4, 5)), ((3, 4), (4,))])
def test_a_field_of_a_structured_array_is_read_as_np_matmul_reads_it(sa, sb, kernel, monkeypatch):
    """A field of a structured array has strides that are not a whole number of its elements (5
    bytes for float32 beside a uint8): the 1-D and N-D products' torch views (tilegemm.nd), the
    GPU's copy (arrays.to_torch_cuda) and explain's stand-in went to torch.from_numpy as it was, and
    torch's raw 'strides not a multiple of the element byte size' came out. (.cuda() stood in for.)"""
    from tilegemm import arrays

    rec = np.zeros(sa, dtype=[("x", "f4"), ("flag", "u1")])
    rec["x"], b = _operands(sa, sb, "float32", seed=5)
    a = rec["x"]
    assert a.strides[-1] == 5
    want = np.matmul(a, b)
    np.testing.assert_allclose(tilegemm.matmul(a, b, kernel=kernel), want, rtol=1e-5, atol=1e-6)
    assert "×" in tilegemm.explain(a, b, kernel)
    monkeypatch.setattr(torch.Tensor, "cuda", lambda self: self)
    assert torch.equal(arrays.to_torch_cuda(arrays.describe(a, "a")), torch.from_numpy(np.ascontiguousarray(a)))


def test_a_numpy_scalar_is_0d_and_a_dtype_served_only_on_a_gpu_is_a_type_error():
    with pytest.raises(ShapeError, match="at least one dimension"):
        tilegemm.matmul(np.float32(2.0), np.ones(3, np.float32))
    if tilegemm._cuda.has_gpu():
        return
    for a in (np.ones((2, 3), np.float16), torch.ones(2, 3, dtype=torch.bfloat16)):
        with pytest.raises(DTypeError, match="runs on a CUDA GPU"):
            tilegemm.matmul(a, a.T)


def test_nd_call_keeps_its_inner_calls_plan_under_its_own_key(moved):
    """After an N-D (or 1-D) matmul of torch CUDA tensors ran as one planned call on views of its
    operands, `dispatch.remember_view` keeps that plan under the call's own key with the result's
    shape, so the next such call skips nd's work: only where the inner operands start where the
    caller's do, the plan is a real one of the same output dtype and size (a stand-in plan here:
    CPU tensors have none)."""
    from tilegemm import dispatch

    class Recorder(dispatch.LaunchPlan):
        def __init__(self, out_shape, dtype=torch.float32):
            self.out_shape, self.calls = out_shape, []
            self.out_dtype, self.device = dtype, torch.device("cpu")

        def run(self, pa, pb, c, psa, psb, view=None, pi=0):
            c = torch.empty_strided(*view, dtype=self.out_dtype) if c is None else c
            self.calls.append((pa, pb, tuple(c.shape)))
            return c

    dispatch._bind_torch()
    a3, w, v = torch.randn(5, 2, 4), torch.randn(4, 3), torch.randn(4)
    cases = [(a3, w, ("mm", a3.view(-1, 4), w), (5, 2, 3), True),
             (v, w, ("mm", v.unsqueeze(0), w), (3,), True),
             (a3, v, ("mm", a3.view(-1, 4), v.unsqueeze(-1)), (5, 2), True),
             (a3, torch.randn(5, 4, 3), None, (5, 2, 3), True),
             (a3, w, ("mm", a3.view(-1, 4).clone(), w), (5, 2, 3), False)]  # a copy of the rows: no link
    for a, b, inner, shape, linked in cases:
        if inner is None:
            inner = ("gemm", a, b, "ieee")
            fake = Recorder((5, 2, 3))
            dispatch._PLANS[dispatch.gemm_key(a, b, a.data_ptr(), b.data_ptr(), "ieee", None, 1.0, 0.0, None, None,
                                              None, "auto")] = fake
        else:
            fake = Recorder((inner[1].shape[0], inner[2].shape[1]))
            dispatch._PLANS[dispatch.call_key(inner[1], inner[2])] = fake
        try:
            dispatch.remember_view(a, b, inner, torch.empty(shape, dtype=torch.float64))  # another dtype: no link
            assert dispatch.fast_matmul(a, b) is None
            dispatch.remember_view(a, b, inner, torch.empty(shape))
            a2, b2 = moved(a), moved(b)
            got = dispatch.fast_matmul(a2, b2)  # new addresses, the same key
            if linked:
                assert got.shape == shape and got.is_contiguous()
                assert fake.calls == [(a2.data_ptr(), b2.data_ptr(), shape)]
            else:
                assert got is None and not fake.calls
        finally:
            dispatch.reset()


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_gpu_repeated_nd_matmul_goes_by_a_plan(dtype, monkeypatch):
    """A repeated N-D or 1-D matmul of torch CUDA tensors runs by the plan of the call nd made
    the first time (a folded 2-D product, or one batched gemm), without nd: torch.matmul's shape,
    dtype and values on new data at new addresses."""
    from tilegemm import dispatch, nd

    def unplanned(*args, **kwargs):
        raise AssertionError("a repeated call went past its plan")

    dt = getattr(torch, dtype)
    tol = dict(rtol=2e-2, atol=2e-2) if dt == torch.bfloat16 else dict(rtol=1e-4, atol=1e-4)
    for sa, sb in [((3, 5, 64), (64, 48)), ((64,), (64, 48)), ((5, 64), (64,)), ((64,), (64,)),
                   ((4, 5, 64), (4, 64, 48)), ((2, 3, 5, 64), (1, 1, 64, 48))]:
        a, b = torch.randn(sa, device="cuda", dtype=dt), torch.randn(sb, device="cuda", dtype=dt)
        tilegemm.matmul(a, b)
        assert isinstance(dispatch._PLANS.get(dispatch.matmul_key(a, b, a.data_ptr(), b.data_ptr())),
                          dispatch.ViewPlan), (sa, sb)
        with monkeypatch.context() as mp:
            mp.setattr(nd, "matmul", unplanned)
            for _ in range(2):
                a, b = torch.randn(sa, device="cuda", dtype=dt), torch.randn(sb, device="cuda", dtype=dt)
                got, want = tilegemm.matmul(a, b), torch.matmul(a.double(), b.double()).to(dt)
                assert got.shape == want.shape and got.dtype == dt, (sa, sb)
                torch.testing.assert_close(got.double(), want.double(), **tol)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
def test_gpu_a_lazy_negation_is_multiplied_by_its_values(dtype):
    """A lazy negation (torch's neg bit: torch._neg_view(t), z.conj().imag) is a view whose memory
    holds the negated values; kernels read memory. matmul, gemm, a named rung, an N-D product and
    devices= multiply its values, on its first call and after a plain call of the same key made a
    plan (which must not serve it: its key is the memory's); a plain call after it still runs right.
    An out or c that is one is refused (LayoutError), as a torch CPU out is."""
    from tilegemm.errors import LayoutError

    dt = getattr(torch, dtype)
    tol = dict(rtol=2e-2, atol=5e-2) if dt != torch.float32 else dict(rtol=1e-4, atol=1e-4)
    torch.manual_seed(0)
    a, b = torch.randn(96, 64, device="cuda", dtype=dt), torch.randn(64, 80, device="cuda", dtype=dt)
    a3 = torch.randn(3, 96, 64, device="cuda", dtype=dt)
    neg = torch._neg_view
    calls = {"matmul": lambda x, y: tilegemm.matmul(x, y),
             "gemm": lambda x, y: tilegemm.gemm(x, y, precision="ieee" if dt == torch.float32 else "auto"),
             "devices=[0]": lambda x, y: tilegemm.matmul(x, y, devices=[0])}
    if dt == torch.float32:
        calls["register_blocked"] = lambda x, y: tilegemm.matmul(x, y, kernel="register_blocked")
    for name, call in calls.items():
        for x, y in ((a, b), (neg(a), b), (a, neg(b)), (neg(a), neg(b)), (a, b)):
            for _ in range(2):
                want = torch.matmul(x.double(), y.double())  # (.double() resolves the bit)
                torch.testing.assert_close(call(x, y).double(), want, **tol, msg=lambda m: f"{name}: {m}")
    for x in (a3, neg(a3), a3):
        torch.testing.assert_close(tilegemm.matmul(x, b).double(), torch.matmul(x.double(), b.double()), **tol)
    if dt == torch.float32:
        z = torch.randn(96, 64, device="cuda", dtype=torch.complex64)
        assert z.conj().imag.is_neg()
        torch.testing.assert_close(tilegemm.matmul(z.conj().imag, b), -z.imag @ b, **tol)
    out = torch.empty(96, 80, device="cuda", dtype=dt)
    tilegemm.matmul(a, b, out=out)  # a plan for this out's key
    with pytest.raises(LayoutError, match="lazy negation"):
        tilegemm.matmul(a, b, out=neg(out))
    with pytest.raises(LayoutError, match="lazy negation"):
        tilegemm.gemm(a, b, c=neg(out), beta=1.0, precision="ieee" if dt == torch.float32 else "auto")


def _inference_cases(dev, dt):
    """Whether matmul's out and gemm's c, inference tensors, are written outside inference mode
    (refused: AutogradError) and inside it (written, as torch writes them), on `dev`; each time
    after the same call with a normal tensor (on a GPU: a plan for its key, which an inference
    tensor's key equals)."""
    from tilegemm.errors import AutogradError

    torch.manual_seed(0)
    a, b = torch.randn(96, 64, device=dev, dtype=dt), torch.randn(64, 80, device=dev, dtype=dt)
    want = (a.double() @ b.double()).to(dt)
    prec = "ieee" if dt == torch.float32 else "auto"
    calls = {"matmul out": lambda o: tilegemm.matmul(a, b, out=o),
             "gemm c": lambda o: tilegemm.gemm(a, b, c=o, beta=0.5, precision=prec)}
    for name, call in calls.items():
        if name == "gemm c" and dev == "cpu":
            continue  # (gemm needs a GPU: the interpreter's tests hold its checks)
        for _ in range(2):
            call(torch.zeros(96, 80, device=dev, dtype=dt))  # (a plan for this key on a GPU)
        with torch.inference_mode():
            frozen = torch.zeros(96, 80, device=dev, dtype=dt)
        with pytest.raises(AutogradError, match="inference tensor"):
            call(frozen)
        assert not frozen.any(), name  # (untouched)
        with torch.inference_mode():
            for _ in range(2):
                frozen.zero_()
                got = call(frozen)
                assert got is frozen or got.data_ptr() == frozen.data_ptr(), name
                torch.testing.assert_close(frozen.double(), want.double(), rtol=2e-2, atol=5e-2)
        normal = torch.zeros(96, 80, device=dev, dtype=dt)  # (a normal tensor, written inside inference mode too)
        call(normal)
        with torch.inference_mode():
            normal.zero_()
            call(normal)
        torch.testing.assert_close(normal.double(), want.double(), rtol=2e-2, atol=5e-2)


def test_an_inference_tensor_out_is_written_only_in_inference_mode():
    """torch refuses an in-place write into an inference tensor (made under torch.inference_mode)
    outside inference mode, out= of its own products too; tilegemm did write one (its kernels are
    not torch's in-place ops, which ask). Now refused in words outside, written inside, as torch's."""
    with torch.inference_mode():
        frozen = torch.zeros(3, 5)
    with pytest.raises(RuntimeError, match="inference tensor"):
        torch.matmul(torch.ones(3, 4), torch.ones(4, 5), out=frozen)
    _inference_cases("cpu", torch.float32)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_gpu_an_inference_tensor_out_or_c_is_written_only_in_inference_mode(dtype):
    """As on the host, for matmul's out and gemm's c, by the slow path and by a plan made for a
    normal tensor of the same key."""
    _inference_cases("cuda", getattr(torch, dtype))


def _transformed_calls(dev):
    """(name, call) for matmul and gemm under each torch.func transform and on a dual tensor."""
    import torch.autograd.forward_ad as fwad

    a3, b = torch.randn(3, 4, 5, device=dev), torch.randn(5, 6, device=dev)

    def dual(f):
        with fwad.dual_level():
            return f(fwad.make_dual(a3[0], torch.ones_like(a3[0])), b)

    calls = []
    for name, f in (("matmul", tilegemm.matmul), ("gemm", lambda x, y: tilegemm.gemm(x, y, precision="ieee"))):
        calls += [(f"{name} vmap", lambda f=f: torch.func.vmap(lambda x: f(x, b))(a3)),
                  (f"{name} grad", lambda f=f: torch.func.grad(lambda x: f(x, b).sum())(a3[0])),
                  (f"{name} jvp", lambda f=f: torch.func.jvp(lambda x: f(x, b), (a3[0],), (torch.ones_like(a3[0]),))),
                  (f"{name} dual", lambda f=f: dual(f))]
    return calls, a3, b


@pytest.mark.parametrize("i", range(8))
def test_torch_func_transforms_and_dual_tensors_are_refused_in_words(i):
    """Under vmap, grad or jvp a tensor is a wrapper with no memory of its own: matmul raised
    "Cannot access data pointer" or torch's note on autograd.Function's setup_context, and gemm
    its need of a GPU. A forward-mode AD dual tensor lost its tangent with no error (the result
    had none). Each is an AutogradError naming the operand; a plain tensor in a dual level runs."""
    import torch.autograd.forward_ad as fwad
    from tilegemm.errors import AutogradError

    calls, a3, b = _transformed_calls("cpu")
    name, call = calls[i]
    with pytest.raises(AutogradError, match="torch.func transform's tensor" if "dual" not in name else "dual tensor"):
        call()
    with fwad.dual_level():
        torch.testing.assert_close(tilegemm.matmul(a3[0], b), a3[0] @ b)


@pytest.mark.gpu
def test_gpu_a_dual_tensor_is_refused_after_a_plan_was_made():
    """A dual tensor's memory is its primal's: after a plain call made its plan, the fast path must
    not serve it (the tangent would be dropped), on matmul and gemm; each call above is refused on
    the GPU too, and a plain call in a dual level still runs by its plan, right."""
    import torch.autograd.forward_ad as fwad
    from tilegemm.errors import AutogradError

    calls, a3, b = _transformed_calls("cuda")
    for name, call in calls:
        tilegemm.matmul(a3[0], b), tilegemm.gemm(a3[0], b, precision="ieee")  # their plans
        with pytest.raises(AutogradError):
            call()
    with fwad.dual_level():
        for _ in range(2):
            torch.testing.assert_close(tilegemm.matmul(a3[0], b), a3[0] @ b, rtol=1e-4, atol=1e-4)


def test_route_runs_each_product_where_the_docstring_says():
    """nd.route, which matmul and explain both go by: A's batch folded into its rows against a 2-D B
    (no copy); a B with a batch of its own, even one of 1 × batch, broadcast and not taken for 2-D;
    on a GPU one batched gemm for FP32 (exactly: "ieee"), FP16 and BF16, one product per entry for
    FP64, for a kernel asked for by name, and off the GPU."""
    from tilegemm import nd

    a3, w, b3 = torch.ones(5, 2, 4), torch.ones(4, 3), torch.ones(5, 4, 3)
    how, (x, y) = nd.route(a3, w, (5,), "auto", False)
    assert how == "mm" and x.shape == (10, 4) and x.data_ptr() == a3.data_ptr() and y.shape == (4, 3)
    assert nd.route(a3, torch.ones(1, 5, 4, 3), (1, 5), "auto", False)[0] == "each"
    for dt, precision in ((torch.float32, "ieee"), (torch.float16, "auto"), (torch.bfloat16, "auto")):
        how, ops = nd.route(a3.to(dt), b3.to(dt), (5,), "auto", True)
        assert how == "gemm" and ops[-1] == precision, dt
    assert nd.route(a3.double(), b3.double(), (5,), "auto", True)[0] == "each"
    assert nd.route(a3, b3, (5,), "register_blocked", True)[0] == "each"
    assert nd.route(a3, b3, (5,), "auto", False)[0] == "each"


def test_a_b_whose_batch_is_one_by_the_batch_broadcasts():
    a, b = _operands((5, 2, 4), (1, 5, 4, 3), "float32", seed=5)
    got = tilegemm.matmul(torch.from_numpy(a), torch.from_numpy(b), kernel="cpu_naive")
    assert got.shape == (1, 5, 2, 3)
    np.testing.assert_allclose(got.numpy(), np.matmul(a, b), rtol=1e-5, atol=1e-6)


def test_host_operands_for_a_gpu_kernel_are_said_to_run_there():
    """Host operands whose 2-D product a GPU kernel serves are copied there once and run as one
    batched gemm (a stand-in plan: on this machine the CPU serves them)."""
    from types import SimpleNamespace

    from tilegemm import arrays, nd

    a, b = np.ones((2, 3, 4), np.float32), np.ones((2, 4, 5), np.float32)
    A, B = arrays.describe(a, "a"), arrays.describe(b, "b")
    on_gpu = SimpleNamespace(kernel=SimpleNamespace(backend="simt"))
    assert nd.describe(A, B, "auto", on_gpu)[0] == ("one batched tilegemm.gemm launch of 2 products 3×4 @ 4×5, "
                                                    "precision='ieee'")
    on_cpu = SimpleNamespace(kernel=SimpleNamespace(backend="cpu"))
    assert nd.describe(A, B, "auto", on_cpu)[0].startswith("one numpy.matmul")


# ---- arrays: the checks matmul's results and out= stand on ----------------------------------


def test_a_host_result_is_refused_only_where_it_does_not_fit(monkeypatch):
    """64 MiB and up is checked against the memory available: refused one byte short, taken where
    it just fits or where the system does not say; a torch CPU result is checked as NumPy's is."""
    from tilegemm import arrays

    shape = (4096, 4096)  # float32: 64 MiB, the smallest size checked
    need = arrays.nbytes(shape, "float32")
    monkeypatch.setattr(arrays, "available_host_bytes", lambda: need)
    arrays.check_host_memory(shape, "float32")
    monkeypatch.setattr(arrays, "available_host_bytes", lambda: None)
    arrays.check_host_memory(shape, "float32")
    monkeypatch.setattr(arrays, "available_host_bytes", lambda: need - 1)
    with pytest.raises(tilegemm.OutOfHostMemory, match="4096×4096 float32"):
        arrays.check_host_memory(shape, "float32")
    with pytest.raises(tilegemm.OutOfHostMemory):
        arrays.empty_like_kind(arrays.describe(torch.ones(1), "a"), shape, "float32")
    arrays.check_host_memory((4095, 4096), "float32")  # below the size checked


def test_sizes_of_the_dtypes_numpy_does_not_have():
    from tilegemm import arrays

    assert [arrays.nbytes((3, 5), dt) for dt in ("float64", "float32", "float16", "bfloat16", "float8_e4m3fn",
                                                  "float8_e5m2")] == [120, 60, 30, 30, 15, 15]


def test_span_and_overlaps_by_address():
    """span: first byte to one past the last, for any strides (negative ones too); overlaps, where
    it goes by spans (torch tensors): views that meet but share no byte do not overlap; an object of
    unknown layout overlaps only itself."""
    from tilegemm import arrays

    x = np.zeros((3, 5), np.float32)
    p = x.__array_interface__["data"][0]
    assert arrays.span(x) == (p, p + 60) == arrays.span(x[::-1, ::-1])
    assert arrays.span(x[1:, 1:4]) == (p + 24, p + 56)
    t = torch.zeros(10)
    e = t.view(2, 5)[:0, ::2]
    assert arrays.span(e) == (e.data_ptr(), e.data_ptr())  # empty: no bytes, whatever its strides
    assert not arrays.overlaps(t[:5], t[5:]) and arrays.overlaps(t[:6], t[5:])
    assert not arrays.overlaps(t[::2], torch.zeros(10))
    thing = object()
    assert arrays.overlaps(thing, thing) and not arrays.overlaps(thing, object())


def test_overlaps_is_exact_where_the_address_ranges_meet(monkeypatch):
    """Where two layouts' address ranges meet, overlaps asks NumPy's solver whether an element is
    shared: interleaved views (a buffer's even and odd columns, its real and imaginary parts) share
    none; views that share one element do; a torch view and a NumPy array over one buffer alike; a
    broadcast past intp's extent by its memory; an empty array nothing. Where the solver gives up
    (TooHardError), they are taken to overlap."""
    from tilegemm import arrays

    buf = torch.zeros(3, 8)
    assert not arrays.overlaps(buf[:, ::2], buf[:, 1::2]) and not arrays.overlaps(buf[:, 1::2], buf[:, ::2])
    assert arrays.overlaps(buf[:, ::2], buf[:, 2::2]) and arrays.overlaps(buf[:, ::2], buf[:, :1])
    assert not arrays.overlaps(buf[::2], buf[1::2]) and arrays.overlaps(buf.t(), buf[2, 3:4])
    assert not arrays.overlaps(buf[:, ::2].flip(0), buf[:, 1::2])  # (flip copies)
    z = torch.zeros(4, dtype=torch.complex64)
    assert not arrays.overlaps(torch.view_as_real(z)[:, 0], torch.view_as_real(z)[:, 1])
    n = np.zeros((3, 8), np.float32)
    host = torch.from_numpy(n)
    assert not arrays.overlaps(host[:, ::2], n[:, 1::2]) and arrays.overlaps(host[:, ::2], n[:, 4::4])
    assert arrays.overlaps(host[:1], n[0, 7:])  # (both contiguous, their ranges meet: one element)
    odd = n[:, ::-1][:, ::2]  # (a negative stride: columns 7, 5, 3, 1)
    assert not arrays.overlaps(host[:, ::2], odd) and arrays.overlaps(host[:, 1::2], odd)

    wide = buf.as_strided((3, 2**60), (8, 0))  # (a broadcast whose extent passes intp: column 0 of each row)
    assert not arrays.overlaps(wide, buf[:, 1::2]) and arrays.overlaps(wide, buf[:, ::2])
    assert not arrays.overlaps(buf[1:1], buf) and not arrays.overlaps(buf, n[:0]) and not arrays.overlaps(buf[:, :0], buf)

    def too_hard(*args, **kwargs):
        raise arrays._TOO_HARD("stand-in")

    monkeypatch.setattr(arrays.np, "shares_memory", too_hard)
    assert arrays.overlaps(buf[:, ::2], buf[:, 1::2])
    assert not arrays.overlaps(buf[0], buf[1])  # (apart by their ranges: no solver asked)


def test_a_dimension_of_one_does_not_make_an_array_self_overlapping():
    """A stride on a dimension of length 1 is never stepped along (NumPy's broadcast_to gives it 0)."""
    from tilegemm import arrays

    row = np.lib.stride_tricks.as_strided(np.zeros(10, np.float32), (1, 5), (0, 8))  # every other element
    assert not arrays.self_overlapping(row)
    assert arrays.self_overlapping(np.lib.stride_tricks.as_strided(np.zeros(5, np.float32), (2, 5), (0, 4)))


def test_a_torch_cpu_tensor_numpy_cannot_view_is_a_dtype_error():
    from tilegemm import arrays

    with pytest.raises(DTypeError, match="no NumPy equivalent"):
        arrays.host_view(arrays.describe(torch.ones(2, 2, dtype=torch.bfloat16), "a"))


def test_fill_zero_zeroes_a_numba_device_array():
    from tilegemm import arrays, validate
    from tilegemm._cuda import cuda

    d = cuda.device_array((3, 4), dtype=np.float32)
    validate.poison(d)
    arrays.fill_zero(d)
    assert (d.copy_to_host() == 0).all()
    arrays.fill_zero(cuda.device_array((0, 4), dtype=np.float32))  # nothing to fill: no copy


@pytest.mark.skipif(not __import__("tilegemm")._cuda.SIMULATOR, reason="the simulator's device arrays")
def test_simulated_numba_arrays_beyond_two_dimensions_multiply_as_numpy_does():
    """1-D and N-D Numba device arrays in the simulator (a laptop's lab): np.matmul's shapes and
    values, a device array back, out= written (a strided view too), the inputs unchanged. They were
    refused (DeviceError: they ran as torch CUDA tensors, and torch has no GPU there)."""
    import warnings

    from tilegemm._cuda import cuda

    rng = np.random.default_rng(5)
    cases = [((3, 4), (4,)), ((4,), (4, 5)), ((4,), (4,)), ((2, 3, 4), (4, 5)), ((2, 1, 3, 4), (5, 4, 2)),
             ((3, 4), (2, 4, 5)), ((2, 3, 0), (0, 5)), ((0, 3, 4), (4, 5))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (Numba's occupancy warnings)
        for sa, sb in cases:
            a, b = (rng.uniform(-1, 1, s).astype(np.float32) for s in (sa, sb))
            da, db = cuda.to_device(a), cuda.to_device(b)
            got = tilegemm.matmul(da, db)
            want = np.matmul(a, b)
            assert type(got).__name__ == "FakeCUDAArray" and got.shape == np.shape(want), (sa, sb)
            assert np.allclose(got.copy_to_host(), want, atol=1e-5), (sa, sb)
            assert np.array_equal(da.copy_to_host(), a) and np.array_equal(db.copy_to_host(), b)
        a, b = rng.uniform(-1, 1, (2, 3, 4)).astype(np.float32), rng.uniform(-1, 1, (4,)).astype(np.float32)
        wide = cuda.to_device(np.full((2, 6), 7, np.float32))
        out = wide[:, ::2]  # a strided view of the (2, 3) result
        assert tilegemm.matmul(cuda.to_device(a), cuda.to_device(b), out=out) is out
        host = wide.copy_to_host()
        assert np.allclose(host[:, ::2], a @ b, atol=1e-5) and (host[:, 1::2] == 7).all()
        assert "simulated launches" in tilegemm.explain(cuda.to_device(a), cuda.to_device(b))


@pytest.mark.parametrize("kernel", ["auto", "cpu_naive"])
def test_a_numpy_scalar_out_is_refused_not_left_unwritten(kernel):
    """np.matmul refuses a NumPy scalar as out= (TypeError); taken for a 0-D array it was a copy that
    took the result, and the scalar came back unwritten (a silently wrong vector·vector product)."""
    v = np.ones(3)
    with pytest.raises(TypeError):
        np.matmul(v, v, out=np.float64(7))
    with pytest.raises(TypeError, match="NumPy scalar"):
        tilegemm.matmul(v, v, kernel=kernel, out=np.float64(7))
    out = np.empty(())
    assert tilegemm.matmul(v, v, kernel=kernel, out=out) is out and out == 3


def test_a_subclass_0d_result_is_wrapped_as_numpy_wraps_it(tmp_path):
    """np.matmul hands a 0-D result to the subclass's __array_wrap__ with return_scalar=True (a
    memmap gives a NumPy scalar back); so does matmul."""
    mm = np.memmap(tmp_path / "v.dat", dtype=np.float64, mode="w+", shape=(3,))
    mm[:] = 2
    for kernel in ("auto", "cpu_naive"):
        got, want = tilegemm.matmul(mm, mm, kernel=kernel), np.matmul(mm, mm)
        assert type(got) is type(want) and got == want == 12, kernel


def test_a_subclass_with_numpy_1s_array_wrap_is_wrapped_as_numpy_wraps_it():
    """An __array_wrap__(self, obj, context=None) of NumPy 1's signature: np.matmul calls it with
    two arguments and a DeprecationWarning, where matmul raised TypeError (four arguments given)."""

    class Old(np.ndarray):
        def __array_wrap__(self, obj, context=None):
            return obj.view(Old)

    a, b = np.ones((2, 3), np.float32).view(Old), np.full((3, 2), 2, np.float32)
    for x, y in ((a, b), (np.ones(3, np.float32).view(Old), np.ones(3, np.float32))):
        with pytest.warns(DeprecationWarning, match="must accept context and return_scalar") as seen:
            want = np.matmul(x, y)
        with pytest.warns(DeprecationWarning, match="must accept context and return_scalar") as got_seen:
            got = tilegemm.matmul(x, y)
        assert type(got) is type(want) is Old and np.array_equal(got, want)
        assert got_seen[0].filename == __file__ and seen[0].filename == __file__  # (at the caller's line)


def test_the_simulators_warning_is_for_the_whole_nd_product(monkeypatch):
    """A batch run as one 2-D product per entry warned per entry (the entry's work, at a line of
    tilegemm.nd), or never where each entry is small and the batch large: the warning is said once,
    for the whole product, at the caller's line. (The launches are stood in for.)"""
    import re
    import warnings

    from tilegemm import _cuda, dispatch

    if not _cuda.SIMULATOR:
        pytest.skip("the simulator's warning")

    def stand_in(kern, auto, A, B, O, out, shape, dtype):
        return torch.zeros(shape, dtype=getattr(torch, dtype))

    monkeypatch.setattr(dispatch, "execute_matmul", stand_in)
    f = np.float32
    cases = [((1000, 64, 64), (1000, 64, 64), r"1e\+03×"),  # each entry 64³: never said
             ((20, 64, 65), (20, 65, 64), r"20\.3×"),  # each entry past 64³: said 20 times, for one entry
             ((1000, 64, 64), (64, 64), r"1e\+03×"),  # folded into one 2-D product: said at tilegemm.nd's line
             ((70,), (70, 4096), r"1\.09×")]  # a 1-D operand promoted: likewise
    for sa, sb, factor in cases:
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            tilegemm.matmul(np.ones(sa, f), np.ones(sb, f), kernel="naive")
        assert len(said) == 1, (sa, sb, [str(w.message) for w in said])
        text = str(said[0].message)
        assert said[0].filename == __file__, (sa, sb, said[0].filename)
        assert f"{sa} @ {sb} on naive" in text and f"({_cuda.SIM_MAX_SIDE}³" in text, text
        assert re.search(factor, text), text
    with warnings.catch_warnings(record=True) as said:  # a 2-D product: said by api, at the caller's line
        warnings.simplefilter("always")
        tilegemm.matmul(np.ones((100, 100), f), np.ones((100, 100), f), kernel="naive")
    assert len(said) == 1 and said[0].filename == __file__
    assert "100×100 @ 100×100 on naive" in str(said[0].message) and "(64³, seconds)" in str(said[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tilegemm.matmul(np.ones((8, 32, 32), f), np.ones((8, 32, 32), f), kernel="naive")  # 8 × 32³ = 64³: no word


class _Served:
    """A stand-in launch plan, kept under a call's real key: it fails the test if it serves the
    call (for the 4×3 @ 3×5 float32 products here, its spans are A's, B's and C's bytes)."""

    spans = (48, 60, 80)

    def run(self, *args):
        raise AssertionError("a plan served the call")

    def overlaps(self, *args):
        return False


def test_an_out_or_c_that_requires_grad_is_served_by_its_plan_under_no_grad():
    """matmul's out= and gemm's c= that require grad: refused with grad mode on (the slow path's
    AutogradError), written under no_grad, as torch writes them. The fast paths refused them in
    both modes, so under no_grad every such call took the slow path and built its plan again. A
    stand-in plan under the call's key shows which path ran."""
    from tilegemm import dispatch
    from tilegemm.errors import AutogradError

    a, b = torch.randn(4, 3), torch.randn(3, 5)
    dispatch.plain(a)
    out = torch.empty(4, 5, requires_grad=True)
    served = []

    class Serves(_Served):
        def run(self, *args):
            served.append(args)
            return out

    args = dict(precision="auto", out_dtype=None, alpha=1.0, beta=1.0, scale_a=None, scale_b=None, kernel="auto")
    try:
        dispatch._PLANS[dispatch.matmul_key(a, b, a.data_ptr(), b.data_ptr()) + dispatch.out_key(out)] = Serves()
        dispatch._PLANS[dispatch.gemm_key(a, b, a.data_ptr(), b.data_ptr(), c=out, **args)] = Serves()
        with pytest.raises(AutogradError, match="out requires grad"):
            tilegemm.matmul(a, b, out=out)
        assert dispatch.fast_gemm(a, b, c=out, **args) is None  # (the slow path's AutogradError, on a GPU)
        assert not served
        with torch.no_grad():
            assert tilegemm.matmul(a, b, out=out) is out
            assert tilegemm.gemm(a, b, c=out, beta=1.0) is out
        assert len(served) == 2
    finally:
        dispatch.reset()


def test_a_nan_alpha_or_beta_is_not_planned():
    """A NaN equals nothing, so a plan kept under a key holding it is found again only for the very
    same float object: a NaN made anew each call built and kept another plan each call, until
    PLAN_MAX emptied every plan of the process. Such a call runs unplanned, and says why
    (dispatch.STATS["not_planned"])."""
    from tilegemm import dispatch
    from tilegemm.kernels.tensorcore import _problem as P

    a, b, c = torch.randn(4, 3), torch.randn(3, 5), torch.empty(4, 5)
    nan = float("nan")
    assert dispatch._plannable(P.Problem(a, b, c, "tf32", nan, 0.0)) == "alpha or beta is NaN"
    assert dispatch._plannable(P.Problem(a, b, c, "tf32", 1.0, nan, c)) == "alpha or beta is NaN"
    assert dispatch._plannable(P.Problem(a, b, c, "tf32", 1.0, 0.0)) == "not on a GPU (interpreter)"


def test_a_bool_alpha_or_scale_finds_no_plan_made_for_one():
    """True equals 1.0 and hashes as 1, so a kept gemm plan made for alpha (or a scale) 1.0 took a
    call with True, which gemm refuses. A stand-in plan under the 1.0 call's key shows which path ran."""
    from tilegemm import dispatch
    from tilegemm.errors import DTypeError

    a, b = torch.randn(4, 3), torch.randn(3, 5)
    dispatch.plain(a)  # (torch bound, as after any call)

    try:
        for one, kw in ((dict(alpha=1.0), dict(alpha=True)), (dict(scale_a=1.0), dict(scale_a=True))):
            args = dict(precision="fp8", out_dtype=None, alpha=1.0, beta=0.0, c=None, scale_a=None, scale_b=None,
                        kernel="auto")
            dispatch._PLANS[dispatch.gemm_key(a, b, a.data_ptr(), b.data_ptr(), **{**args, **one})] = _Served()
            with pytest.raises(DTypeError, match="must be a real number"):
                tilegemm.gemm(a, b, precision="fp8", **kw)
    finally:
        dispatch.reset()


def test_fast_accum_is_a_bool_and_in_the_key():
    """fast_accum=1 equals True and hashes as it, so a kept plan made for True would take it; gemm
    refuses anything but a bool in one typed line, as torch._scaled_mm's use_fast_accum takes one,
    and a plan made with fast accumulation never serves a call without it. A stand-in plan under the
    default call's key shows which path ran."""
    from tilegemm import dispatch
    from tilegemm.errors import DTypeError

    a, b = torch.randn(4, 3), torch.randn(3, 5)
    dispatch.plain(a)
    args = dict(precision="fp8", out_dtype=None, alpha=1.0, beta=0.0, c=None, scale_a=None, scale_b=None,
                kernel="auto")
    try:
        dispatch._PLANS[dispatch.gemm_key(a, b, a.data_ptr(), b.data_ptr(), **args)] = _Served()
        assert dispatch.fast_gemm(a, b, *args.values(), False) is None  # (no plan under its key)
        for wrong in (1, 0, "no", None, np.bool_(True)):
            assert dispatch.fast_gemm(a, b, *args.values(), wrong) is None
            with pytest.raises(DTypeError, match="fast_accum must be True or False"):
                tilegemm.gemm(a, b, precision="fp8", fast_accum=wrong)
    finally:
        dispatch.reset()


def test_fp8_promotes_its_partial_sums_only_without_fast_accum():
    """The K span after which an FP8 MMA's partial sum joins the FP32 accumulator: 128 (at most the
    k-step) with fast_accum=False, never with fast accumulation or for another precision; every FP8
    rung's launch carries it to its kernel (compiled for sm_90 on a GPU, where tl.dot and Gluon's
    warpgroup_mma take it as max_num_imprecise_acc)."""
    from tilegemm.kernels import tensorcore as tc
    from tilegemm.kernels.tensorcore import _problem as P
    from tilegemm.tuning import space as S

    a = torch.zeros(256, 512).to(torch.float8_e4m3fn)
    b = torch.zeros(256, 512).to(torch.float8_e4m3fn).t()
    c = torch.empty(256, 256, dtype=torch.bfloat16)
    one = torch.ones(1)
    fast, promoted = (P.Problem(a, b, c, "fp8", scale_a=one, scale_b=one, fast_accum=f) for f in (True, False))
    assert (fast.promote(256), promoted.promote(256), promoted.promote(64)) == (0, P.PROMOTE_K, 64) == (0, 128, 64)
    assert P.Problem(a.half(), b.half(), c.half(), "fp16", fast_accum=False).promote(64) == 0
    from tilegemm.tuning import cache, tuner

    assert tuner.trial_problem(promoted).promote(256) == 128  # (tuning times and checks the kernel that runs)
    assert cache.tune_key(S.T03, promoted) != cache.tune_key(S.T03, fast)
    for rung in ("tc_tiled", S.T02, S.T03, S.T04, S.T05):
        for p, want in ((fast, 0), (promoted, 128)):
            cands = S.candidates(rung, p)  # t05 promoted: the first OVERLAP form and the first implicit one
            for cfg in [cands[0]] + [c for c in cands[1:] if c.get("OVERLAP") != cands[0].get("OVERLAP")][:1]:
                for call in tc.rung_module(rung).launches(p, cfg):
                    names = list(getattr(call.fn, "arg_names", ()))
                    if "PROMOTE" in names:
                        sign = -1 if cfg.get("OVERLAP") else 1  # (t05's overlapped promotion: PROMOTE = -BK)
                        assert call.args[names.index("PROMOTE")] == sign * min(want, cfg["BK"]), (rung, cfg)
                        break
                else:
                    raise AssertionError(f"{rung}: no launch takes PROMOTE")


def test_a_scale_that_requires_grad_or_lies_in_c_finds_no_plan(monkeypatch):
    """A scale tensor's key has its dtype, device, size and alignment, not requires_grad nor its
    address: a kept gemm plan made for a plain scale apart from c took one that requires grad (the
    slow path's AutogradError) or one inside c (its LayoutError: C would overwrite the scale while
    the kernels read it). A stand-in plan under the plain call's key shows which path ran."""
    from tilegemm import dispatch
    from tilegemm.errors import AutogradError, LayoutError

    from tilegemm import _cuda

    if not _cuda.has_gpu():  # (the slow path's checks of c, on a machine without a GPU; with one, the setting
        monkeypatch.setenv("TRITON_INTERPRET", "1")  # would have triton's first import made interpreted, and every
        # later compile in the process fail)
    a, b = torch.randn(4, 3), torch.randn(3, 5)
    dispatch.plain(a)

    args = dict(precision="fp8", out_dtype="float32", alpha=1.0, beta=0.0, kernel="auto")
    try:
        s = torch.tensor([2.0])
        dispatch._PLANS[dispatch.gemm_key(a, b, a.data_ptr(), b.data_ptr(), c=None, scale_a=s, scale_b=None,
                                          **args)] = _Served()
        wants = torch.tensor([2.0], requires_grad=True)
        assert dispatch.gemm_key(a, b, a.data_ptr(), b.data_ptr(), c=None, scale_a=wants, scale_b=None, **args) \
            in dispatch._PLANS
        with pytest.raises(AutogradError, match="scale_a requires grad"):
            tilegemm.gemm(a, b, scale_a=wants, **args)
        c0, c1 = torch.empty(4, 5), torch.empty(4, 5)
        dispatch._PLANS[dispatch.gemm_key(a, b, a.data_ptr(), b.data_ptr(), c=c0, scale_a=None, scale_b=s,
                                          **args)] = _Served()
        inside = c1.view(-1)[4:5]  # (16 bytes in: aligned as a scale of its own)
        assert dispatch.gemm_key(a, b, a.data_ptr(), b.data_ptr(), c=c1, scale_a=None, scale_b=inside, **args) \
            in dispatch._PLANS, "c and the scale inside it key as the plan's c and scale apart (torch's 64-byte blocks)"
        with pytest.raises(LayoutError, match="c shares memory with scale_b"):
            tilegemm.gemm(a, b, c=c1, scale_b=inside, **args)
    finally:
        dispatch.reset()


def test_the_fast_paths_give_transforms_and_storageless_outs_to_the_slow_path():
    """torch.func.functionalize's tensors have a data_ptr (0, or a view's offset from 0) and the key
    of the tensor they stand for: a kept plan must not serve them (it would launch on address 0).
    An out with no storage (a vmap wrapper, MKL-DNN) is named by the slow path, not by data_ptr's
    RuntimeError. A stand-in plan under the call's key shows which path ran."""
    from tilegemm import dispatch
    from tilegemm.errors import AutogradError, LayoutError

    a, b = torch.randn(4, 3), torch.randn(3, 5)
    dispatch.plain(a)  # (torch bound, as after any call)

    def call(x):
        dispatch._PLANS[dispatch.matmul_key(x, b, x.data_ptr(), b.data_ptr())] = _Served()
        return tilegemm.matmul(x, b)

    try:
        with pytest.raises(AutogradError, match="transform's tensor"):
            torch.func.functionalize(call)(a)
    finally:
        dispatch.reset()
    with pytest.raises(AutogradError, match="out is a torch.func transform's tensor"):
        torch.func.vmap(lambda o: tilegemm.matmul(a, b, out=o))(torch.empty(2, 4, 5))
    with pytest.raises(LayoutError, match="out: a torch tensor of layout"):
        tilegemm.matmul(a, b, out=torch.zeros(4, 5).to_mkldnn())


def _memoryless(shape):
    """Torch tensors of `shape` whose data_ptr is no memory holding their values (0, or an offset
    from 0): a ZeroTensor, a functionalization wrapper outside its transform, a view of a storage
    resized to 0 (as FSDP frees a parameter's)."""
    whole = torch.randn(2 + shape[0] * shape[1])
    freed = whole[2:].view(shape)
    whole.untyped_storage().resize_(0)
    return {"ZeroTensor": torch._efficientzerotensor(shape), "functional": torch._to_functional_tensor(
        torch.randn(shape)), "freed": freed}


def test_a_tensor_with_no_memory_finds_no_plan_and_is_refused():
    """A ZeroTensor, a functionalization wrapper and a freed storage's view have the key of a real
    tensor (address 0 is 16-byte aligned): a kept plan launched its kernels at address 0 plus an
    offset (an illegal address on a GPU, whose context is then lost), and the slow path read
    whatever lay there (NumPy over the pointer). Both give them to the slow path, which refuses
    them in words (a patched layer's, to torch). A stand-in plan under the call's key shows which
    path ran."""
    from tilegemm import dispatch, torchop
    from tilegemm.errors import LayoutError

    a, b, w = torch.randn(4, 3), torch.randn(3, 5), torch.randn(5, 3)
    dispatch.plain(a)

    said = "ZeroTensor|functionalization wrapper|holds no memory"
    try:
        for name, x in _memoryless((4, 3)).items():
            dispatch._PLANS[dispatch.matmul_key(x, b, x.data_ptr(), b.data_ptr())] = _Served()
            with pytest.raises(LayoutError, match=said):
                tilegemm.matmul(x, b)
            dispatch._PLANS[dispatch.linear_key(x, w, x.data_ptr(), w.data_ptr())] = _Served()
            counts = {"tilegemm": 0, "torch": 0}
            try:  # (a patched layer gives it to torch)
                torchop._linear(x, w, None, counts)
            except RuntimeError as e:  # (torch's own refusal of a freed storage)
                assert name == "freed" and "not allocated" in str(e), e
            else:
                assert counts == {"tilegemm": 0, "torch": 1}, (name, counts)
            key = dispatch.gemm_key(x, b, x.data_ptr(), b.data_ptr(), "auto", None, 1.0, 0.0, None, None, None,
                                    "auto")
            dispatch._PLANS[key] = _Served()
            with pytest.raises(LayoutError, match=said):
                tilegemm.gemm(x, b)
        for name, o in _memoryless((4, 5)).items():
            dispatch._PLANS[dispatch.call_key(a, b, o)] = _Served()
            with pytest.raises(LayoutError, match=said):
                tilegemm.matmul(a, b, out=o)
    finally:
        dispatch.reset()


def test_a_nested_operand_or_out_is_refused_in_words():
    """A nested tensor of strided layout has a data_ptr but no sizes: the fast path's key raised
    torch's "NestedTensorImpl doesn't support sizes. Please file an issue." on every call, where
    the slow path says what is wrong (LayoutError)."""
    from tilegemm.errors import LayoutError

    a, b = torch.randn(4, 3), torch.randn(3, 5)
    nested = torch.nested.nested_tensor([torch.randn(4, 3), torch.randn(4, 3)])
    with pytest.raises(LayoutError, match="layout nested"):
        tilegemm.matmul(nested, b)
    with pytest.raises(LayoutError, match="out: a torch tensor of layout nested"):
        tilegemm.matmul(a, b, out=torch.nested.nested_tensor([torch.randn(4, 5), torch.randn(4, 5)]))


def test_a_view_of_a_freed_storage_at_any_offset_finds_no_plan():
    """A view into a freed flat buffer (FSDP's parameters, once their flat parameter is resized to
    0) has data_ptr 0 plus its offset, which for a parameter past the buffer's first MiB passed the
    fast paths' address test: a kept plan launched at that offset (an illegal address on a GPU) and
    a patched layer gave it to tilegemm. The storage's start, not the address, tells it. A stand-in
    plan under the call's key shows which path ran."""
    from tilegemm import dispatch, torchop
    from tilegemm.errors import LayoutError

    b, w = torch.randn(3, 5), torch.randn(5, 3)
    dispatch.plain(b)

    def freed(shape, offset=1 << 18):  # (elements: 1 MiB of float32 in)
        flat = torch.randn(offset + shape[0] * shape[1])
        x = flat[offset:].view(shape)
        flat.untyped_storage().resize_(0)
        assert x.data_ptr() >= dispatch.NO_MEMORY
        return x

    try:
        x, o = freed((4, 3)), freed((4, 5))
        dispatch._PLANS[dispatch.matmul_key(x, b, x.data_ptr(), b.data_ptr())] = _Served()
        with pytest.raises(LayoutError, match="a is a tensor whose storage holds no memory"):
            tilegemm.matmul(x, b)
        a = torch.randn(4, 3)
        dispatch._PLANS[dispatch.call_key(a, b, o)] = _Served()
        with pytest.raises(LayoutError, match="out is a tensor whose storage holds no memory"):
            tilegemm.matmul(a, b, out=o)
        dispatch._PLANS[dispatch.linear_key(x, w, x.data_ptr(), w.data_ptr())] = _Served()
        assert dispatch.fast_linear(x, w) is None and not torchop.served(x, b)
        dispatch._PLANS[dispatch.gemm_key(x, b, x.data_ptr(), b.data_ptr(), "auto", None, 1.0, 0.0, None, None, None,
                                          "auto")] = _Served()
        with pytest.raises(LayoutError, match="a is a tensor whose storage holds no memory"):
            tilegemm.gemm(x, b)
    finally:
        dispatch.reset()


def test_a_tensor_with_no_memory_is_named_by_its_argument():
    """The refusal's remedy names the argument (torch.zeros_like(a)), not a placeholder x."""
    from tilegemm.errors import LayoutError

    with pytest.raises(LayoutError, match=r"b is a ZeroTensor .*; pass torch\.zeros_like\(b\)"):
        tilegemm.matmul(torch.randn(4, 3), torch._efficientzerotensor((3, 5)))


def test_an_alpha_too_small_for_fp32_is_said_by_its_magnitude():
    """-1e-46 is not below float32's smallest number (it is above -1.4e-45): what makes it 0 in
    FP32 is its magnitude, which the refusal says."""
    from tilegemm.errors import DTypeError

    with pytest.raises(DTypeError, match=r"alpha = -1e-46 is nonzero but smaller in magnitude than float32's "
                                         r"smallest subnormal, 1\.4e-45"):
        tilegemm.gemm(torch.randn(4, 3), torch.randn(3, 5), alpha=-1e-46)


class _Writes(_Served):
    """A stand-in launch plan that serves the call as a plan does: it returns the out (or c) it
    was given, written."""

    def run(self, pa, pb, c=None, *args):
        return c


def _kernels_write(monkeypatch) -> str:
    """The device gemm's operands go on here: "cuda" where there is a GPU, whose kernels write C
    in place; else "cpu", gemm's slow path under Triton's interpreter with its launches stood in
    for by a write through NumPy's view of C's memory, as a kernel writes it (unseen by torch's
    version counter). The interpreter is read when triton is first imported: in a process that
    imported it without, its kernels cannot run (test_tensorcore runs them in a fresh process)."""
    from tilegemm import _cuda, dispatch

    if _cuda.has_gpu():
        return "cuda"

    def launches(p, *args, **kwargs):
        a, b, c = (t.detach().as_subclass(torch.Tensor) for t in (p.a, p.b, p.c))
        c.numpy()[...] = (p.alpha * (a @ b) + (p.beta * c if p.beta else 0)).numpy()
        return {}

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setattr(dispatch, "run_problem", launches)
    return "cpu"


def _saved_then_written(write, shape=(4, 5), device="cpu"):
    """A tensor a backward saved (exp saves its output), written through a detached alias of it
    under no_grad, as `write` writes it: the backward must refuse, as torch's own in-place ops
    and out= make it (its version counter moved), not compute w's gradient from the new values."""
    w = torch.randn(shape, device=device, requires_grad=True)
    h = w.exp()
    with torch.no_grad():
        write(h.detach())
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        h.sum().backward()


def test_an_out_or_c_written_in_place_moves_its_version_counter(monkeypatch):
    """matmul's out and gemm's c are written by kernels through their addresses, which torch's
    autograd does not see: a backward that saved their old values computed its gradient from the
    new ones, silently wrong. The slow paths (2-D, N-D, K = 0) and the fast paths (a stand-in plan
    under the call's key) each move the counter on."""
    from tilegemm import dispatch

    a, b = torch.randn(4, 3), torch.randn(3, 5)
    _saved_then_written(lambda o: torch.matmul(a, b, out=o))  # (what torch does)
    _saved_then_written(lambda o: tilegemm.matmul(a, b, out=o))
    _saved_then_written(lambda o: tilegemm.matmul(torch.randn(2, 4, 3), torch.randn(2, 3, 5), out=o), (2, 4, 5))
    _saved_then_written(lambda o: tilegemm.matmul(torch.randn(4, 0), torch.randn(0, 5), out=o))
    dev = _kernels_write(monkeypatch)
    ad, bd = a.to(dev), b.to(dev)
    _saved_then_written(lambda c: tilegemm.gemm(ad, bd, precision="ieee", c=c, beta=1.0), device=dev)
    dispatch.plain(a)
    try:
        def planned_matmul(o):
            dispatch._PLANS[dispatch.call_key(a, b, o)] = _Writes()
            assert tilegemm.matmul(a, b, out=o) is o

        def planned_gemm(c):
            dispatch._PLANS[dispatch.gemm_key(a, b, a.data_ptr(), b.data_ptr(), "ieee", None, 1.0, 1.0, c, None, None,
                                              "auto")] = _Writes()
            assert tilegemm.gemm(a, b, precision="ieee", c=c, beta=1.0) is c

        _saved_then_written(planned_matmul)
        _saved_then_written(planned_gemm)
    finally:
        dispatch.reset()
    with torch.inference_mode():  # (an inference tensor has no counter: written in inference mode, and left alone;
        o = torch.empty(4, 5)  # outside it refused, as torch refuses: test_an_inference_tensor_out_...)
        torch.testing.assert_close(tilegemm.matmul(a, b, out=o), a @ b)


def test_devices_refuses_an_out_that_requires_grad(monkeypatch):
    """matmul(out=w) with w requiring grad is refused (as torch.matmul refuses it: out= records no
    gradient), but devices= skipped that check and wrote the product into w, a leaf that requires
    grad, with nothing said. A stand-in for tilegemm.multigpu (which writes out through a detached
    view) on a stand-in GPU shows it on any machine."""
    from tilegemm import multigpu
    from tilegemm.errors import AutogradError

    def writes(A, B, mnk, ids, kernel, out, local):
        out.detach().copy_(A.obj @ B.obj)
        return out

    monkeypatch.setattr(multigpu, "device_ids", lambda devices: [0])
    monkeypatch.setattr(multigpu, "matmul", writes)
    a, b = torch.randn(4, 3), torch.randn(3, 5)
    w = torch.zeros(4, 5, requires_grad=True)
    with pytest.raises(AutogradError, match="out requires grad"):
        tilegemm.matmul(a, b, out=w, devices=[0])
    assert not w.detach().any()
    with torch.no_grad():  # (as without devices=: under no_grad, written)
        tilegemm.matmul(a, b, out=w, devices=[0])
    torch.testing.assert_close(w.detach(), a @ b)


def test_gemm_refuses_operands_that_require_grad_it_cannot_record(monkeypatch):
    """gemm records a gradient (through tilegemm's operator) for two plain tensors; operands of a
    tensor subclass that require grad went past that test to the kernels, and came back as a
    result with no grad_fn: their gradient through the product silently left out. A c of a
    subclass that requires grad was written in place, where a plain one is refused."""
    from tilegemm.errors import AutogradError

    class Tagged(torch.Tensor):  # (a subclass of the user's, torch's default __torch_function__)
        pass

    dev = _kernels_write(monkeypatch)  # (a CUDA subclass goes to the kernels as it is; a host one is refused there)
    a = torch.randn(4, 3, device=dev).as_subclass(Tagged).requires_grad_()
    b = torch.randn(3, 5, device=dev).as_subclass(Tagged)
    with pytest.raises(AutogradError, match="a requires grad"):
        tilegemm.gemm(a, b, precision="ieee")
    c = torch.zeros(4, 5, device=dev).as_subclass(Tagged).requires_grad_()
    with pytest.raises(AutogradError, match="c requires grad"):
        tilegemm.gemm(a.detach(), b, precision="ieee", c=c)
    assert not c.detach().any()
    with torch.no_grad():  # (nothing to record: run)
        torch.testing.assert_close(tilegemm.gemm(a, b, precision="ieee").as_subclass(torch.Tensor),
                                   (a @ b).as_subclass(torch.Tensor))


@pytest.mark.gpu
def test_gpu_a_tensor_that_requires_grad_beside_another_kind_is_refused():
    """Only two torch tensors go to the differentiable operator: a CUDA tensor that requires grad
    beside a Numba device array went to the kernels and came back with no grad_fn, its gradient
    through the product silently left out."""
    from numba import cuda

    from tilegemm.errors import AutogradError

    a = torch.randn(4, 3, device="cuda", requires_grad=True)
    b = cuda.to_device(np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32))
    with pytest.raises(AutogradError, match="a requires grad, and a product with a numba array"):
        tilegemm.matmul(a, b)
    with torch.no_grad():  # (nothing to record: run)
        torch.testing.assert_close(tilegemm.matmul(a, b), a @ torch.as_tensor(b, device="cuda"))


def test_a_trace_records_the_operator_not_a_constant(monkeypatch):
    """torch.jit.trace of a function calling tilegemm.matmul (or gemm) recorded the product as a
    constant: the trace gave the traced inputs' product for any others, with no warning. Under a
    trace the product goes through tilegemm's operator, which the trace records (a kept plan does
    not serve the traced call: a stand-in under its key), with none of the tracer's warnings of the
    checks; what the operator cannot express is refused."""
    import warnings

    from tilegemm import _cuda, dispatch
    from tilegemm.errors import AutogradError

    if not _cuda.has_gpu():  # (gemm on a machine without a GPU; refused or traced before a launch)
        monkeypatch.setenv("TRITON_INTERPRET", "1")
    a, b = torch.randn(4, 3), torch.randn(3, 5)
    dispatch.plain(a)
    gemm_args = ("auto", None, 1.0, 0.0, None, None, None, "auto")
    try:
        dispatch._PLANS[dispatch.matmul_key(a, b, a.data_ptr(), b.data_ptr())] = _Served()
        dispatch._PLANS[dispatch.gemm_key(a, b, a.data_ptr(), b.data_ptr(), *gemm_args)] = _Served()

        def asks_the_plans(x, y):
            assert dispatch.fast_matmul(x, y) is None and dispatch.fast_gemm(x, y, *gemm_args) is None
            return x

        torch.jit.trace(asks_the_plans, (a, b), check_trace=False)  # (its check runs the function untraced)
        dispatch.reset()  # (inside the operator no trace is on: a plan may serve its body)
        for f, args in ((lambda x, y: tilegemm.matmul(x, y) * 2, (a, b)),
                        (lambda x, y: tilegemm.matmul(x, y, out=torch.empty(2, 4, 5)) * 2,
                         (torch.randn(2, 4, 3), torch.randn(3, 5))),
                        (lambda x, y: tilegemm.gemm(x, y) * 2, (a, b))):
            with warnings.catch_warnings(record=True) as said:
                warnings.simplefilter("always")
                traced = torch.jit.trace(f, args, check_trace=False)
            assert "tilegemm::matmul" in str(traced.graph), traced.graph
            assert not [w for w in said if "tilegemm" in w.filename], [str(w.message)[:80] for w in said]  # (the
            # tracer's "might not generalize" of each check the call made)
            others = [torch.randn(t.shape) for t in args]
            torch.testing.assert_close(traced(*others), torch.matmul(*others) * 2)
    finally:
        dispatch.reset()
    with pytest.raises(AutogradError, match="kernel='naive' under torch.jit.trace"):
        torch.jit.trace(lambda x, y: tilegemm.matmul(x, y, kernel="naive"), (a, b))
    with pytest.raises(AutogradError, match="under torch.jit.trace only the plain product"):
        torch.jit.trace(lambda x, y: tilegemm.gemm(x, y, alpha=2.0), (a, b))


def test_a_traced_call_refuses_what_the_call_refuses(monkeypatch):
    """Under torch.jit.trace matmul and gemm went to tilegemm's operator before the call's own
    checks, and the operator's body hands what tilegemm does not serve to torch: a dtype no kernel
    takes, float16 on a machine without a GPU, an out that requires grad or overlaps an input, gemm
    on a machine without a GPU (or triton) were traced (check_trace's untraced run then failed with
    torch's TracingCheckError; without it the trace computed what the call refuses), and
    devices= was recorded as a constant. Each is refused as the call refuses it, in the trace."""
    import warnings

    from tilegemm import _cuda, multigpu
    from tilegemm.errors import AutogradError, DeviceError, LayoutError

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)  # (gemm: a GPU, or none and its refusal)
    monkeypatch.setattr(multigpu, "device_ids", lambda devices: [0])  # (a stand-in GPU: the trace's refusal
    monkeypatch.setattr(multigpu, "matmul", lambda A, B, mnk, ids, kernel, out, local: A.obj @ B.obj)  # comes first)
    a, b = torch.randn(4, 3), torch.randn(3, 5)
    i = lambda *s: torch.ones(s, dtype=torch.int64)  # noqa: E731
    cases = [((i(4, 3), i(3, 5)), {}, DTypeError, "no kernel supports dtype int64"),
             ((a, b), dict(out=torch.zeros(4, 5, requires_grad=True)), AutogradError, "out requires grad"),
             ((a, b), dict(out=torch.zeros(4, 5)[:, :1].expand(4, 5)), LayoutError, "share memory"),
             ((a, b), dict(devices=[0]), AutogradError, "devices= under torch.jit.trace")]
    if not _cuda.has_gpu():
        cases.append(((a.half(), b.half()), {}, DTypeError, "float16 runs on a CUDA GPU"))
    for (x, y), kw, error, says in cases:
        for check in (True, False):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", torch.jit.TracerWarning)
                with pytest.raises(error, match=says):
                    torch.jit.trace(lambda p, q: tilegemm.matmul(p, q, **kw), (x, y), check_trace=check)
    sq = torch.randn(4, 4)
    with pytest.raises(LayoutError, match="out shares memory with a"):
        torch.jit.trace(lambda p: tilegemm.matmul(p, p, out=p), (sq,))
    if not _cuda.has_gpu():
        for check in (True, False):
            with pytest.raises(DeviceError, match="gemm: needs a CUDA GPU"):
                torch.jit.trace(lambda p, q: tilegemm.gemm(p, q), (a, b), check_trace=check)
    w = torch.randn(4, 3, requires_grad=True)  # (and what it serves passes check_trace, whose trace again runs
    traced = torch.jit.trace(lambda p, q: tilegemm.matmul(p, q.t().t()), (w, b))  # under no_grad: the fast path
    torch.testing.assert_close(traced(a, b), a @ b)  # reads no traced size, which names its value in the graph)


def test_a_traced_call_leaves_other_threads_warnings_alone(monkeypatch):
    """A traced call's checks raised none of the tracer's warnings by warnings.catch_warnings,
    whose filters are the process's: while one thread traced a product, a TracerWarning in another
    thread (its own trace that will not generalize) was dropped, and the two threads' saved filters
    could be restored crosswise. The tracer is paused for the checks instead (its state is the
    thread's own)."""
    import threading
    import warnings

    from tilegemm import torchop

    inside, go, said = threading.Event(), threading.Event(), []
    op = torchop.matmul

    def held(*args):  # (the traced call's work, the other thread meanwhile)
        inside.set()
        go.wait(30)
        return op(*args)

    monkeypatch.setattr(torchop, "matmul", held)
    tracer = threading.Thread(target=lambda: torch.jit.trace(lambda x, y: tilegemm.matmul(x, y),
                                                             (torch.randn(4, 3), torch.randn(3, 5))))
    tracer.start()
    try:
        assert inside.wait(30)
        with warnings.catch_warnings(record=True) as said:
            warnings.warn("a trace that will not generalize", torch.jit.TracerWarning)
    finally:
        go.set()
        tracer.join(30)
    assert [str(w.message) for w in said] == ["a trace that will not generalize"]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.complex64])
def test_a_dtype_refused_without_grad_is_refused_with_it(dtype):
    """tilegemm.matmul of CPU tensors of a dtype no host kernel serves raised DTypeError, but the
    same tensors requiring grad went through the differentiable operator, whose body hands what
    tilegemm does not serve to torch (for a patched model's layers), and came back computed by
    torch. Whether an input requires grad no longer changes the answer. (With a GPU, host 16-bit
    operands are multiplied there: then both are, and agree.)"""
    from tilegemm import _cuda

    a, b = torch.ones(4, 4, dtype=dtype), torch.ones(4, 4, dtype=dtype)
    if _cuda.has_gpu() and not dtype.is_complex:
        want = tilegemm.matmul(a, b)
        got = tilegemm.matmul(a.requires_grad_(), b)
        assert got.requires_grad and torch.equal(got.detach(), want)
        return
    with pytest.raises(DTypeError) as plain:
        tilegemm.matmul(a, b)
    with pytest.raises(DTypeError) as grad:
        tilegemm.matmul(a.requires_grad_(), b)
    assert str(grad.value) == str(plain.value)


@pytest.mark.parametrize("kernel", ["auto", "naive"])
@pytest.mark.parametrize("shapes", [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((4,), (4,))])
def test_a_host_tensors_result_resizes_as_torchs(kernel, shapes):
    """A torch CPU result was made by torch.from_numpy, whose storage refuses to resize: resize_,
    torch.cat(..., out=) of another size and a storage freed to 0 bytes (offloading) raised where
    torch's own result takes them. It is a tensor of torch's storage now, holding the product."""
    g = torch.Generator().manual_seed(7)
    a, b = (torch.randn(s, generator=g) for s in shapes)
    c = tilegemm.matmul(a, b, kernel=kernel)
    torch.testing.assert_close(c, torch.matmul(a, b))
    torch.cat([torch.ones(2), torch.ones(3)], out=c)  # (out= of another size: resized to (5,))
    c.resize_(c.numel() + 3)
    c.untyped_storage().resize_(0)


@pytest.mark.gpu
def test_gpu_a_cuda_tensor_of_a_subclass_is_refused_as_a_cpu_one_is():
    """A CUDA tensor of a subclass went through its CUDA array interface (its memory multiplied, a
    result of another kind), or raised there where it requires grad; it is refused by name, as a
    CPU one of the subclass is."""
    Tagged = type("Tagged", (torch.Tensor,), {})
    b = torch.ones(4, 5, device="cuda")
    for a in (torch.ones(3, 4, device="cuda").as_subclass(Tagged),
              torch.ones(3, 4, device="cuda").as_subclass(Tagged).requires_grad_()):
        with pytest.raises(DTypeError, match="a cuda tensor of a subclass of torch.Tensor"):
            tilegemm.matmul(a, b)
