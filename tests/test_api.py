"""tilegemm.matmul: the caller's kinds in and out, typed errors, edge cases, inputs untouched."""

import warnings

import numpy as np
import pytest

import tilegemm
from tilegemm import validate
from tilegemm._cuda import cuda

torch = pytest.importorskip("torch")

GPU_KERNEL = "register_blocked"  # runs under the simulator here


def ops(m=6, n=5, k=4, dtype="float32", seed=0):
    return validate.random_operands(m, n, k, dtype, seed=seed)


# ---- the caller's kind comes back --------------------------------------------------------

@pytest.mark.parametrize("kernel", ["auto", "cpu_blas", GPU_KERNEL])
def test_numpy_in_numpy_out(kernel):
    a, b = ops()
    c = tilegemm.matmul(a, b, kernel=kernel)
    assert isinstance(c, np.ndarray) and c.shape == (6, 5) and c.dtype == np.float32
    assert validate.check(c, a, b).ok


@pytest.mark.parametrize("kernel", ["auto", "cpu_naive", GPU_KERNEL])
def test_torch_cpu_in_torch_out(kernel):
    a, b = ops()
    c = tilegemm.matmul(torch.from_numpy(a), torch.from_numpy(b), kernel=kernel)
    assert isinstance(c, torch.Tensor) and c.device.type == "cpu" and c.dtype == torch.float32
    assert validate.check(c.numpy(), a, b).ok


def test_numba_device_arrays_in_and_out():
    a, b = ops(9, 7, 5)
    c = tilegemm.matmul(cuda.to_device(a), cuda.to_device(b), kernel=GPU_KERNEL)
    assert type(c).__name__ in ("DeviceNDArray", "FakeCUDAArray")
    assert validate.check(c.copy_to_host(), a, b).ok


def test_out_is_written_and_returned():
    a, b = ops()
    out = np.full((6, 5), np.nan, np.float32)
    c = tilegemm.matmul(a, b, kernel=GPU_KERNEL, out=out)
    assert c is out and validate.check(out, a, b).ok


def test_non_contiguous_inputs_are_handled():
    base_a, base_b = ops(12, 10, 8, seed=1)
    a = base_a[::2, :]  # strided rows
    b = np.asfortranarray(base_b[:, :5])  # column-major
    for kernel in ("cpu_blas", "naive", GPU_KERNEL):
        c = tilegemm.matmul(a, b, kernel=kernel)
        assert validate.check(c, a, b).ok, kernel
    ta = torch.from_numpy(base_a).t()  # a transposed view, 8×12
    tb = torch.from_numpy(base_a)  # 12×8
    c = tilegemm.matmul(ta, tb, kernel=GPU_KERNEL)
    assert validate.check(c.numpy(), ta.numpy(), tb.numpy()).ok


def test_device_copy_runs_its_threads_along_the_destination_s_contiguous_axis(monkeypatch):
    """arrays.copy_2d (a strided CUDA operand copied, or a result scattered into a strided out=):
    exact for row-major, column-major and sliced sources and destinations; a warp's threads go
    along dst's rows unless dst's columns are its contiguous axis (its writes coalesced) or it is
    one column; past CUDA's blocks along y they stride. A strided Numba device operand of matmul is
    copied so (on the simulator too)."""
    from tilegemm import arrays

    rng = np.random.default_rng(4)
    x = rng.standard_normal((37, 70)).astype(np.float32)
    whole, fortran = cuda.to_device(x), cuda.to_device(np.asfortranarray(x))
    sources = {"rows": (whole[:, :45], x[:, :45]), "columns": (fortran[:, :45], x[:, :45]),
               "sliced": (whole[:, 1:70:2], x[:, 1:70:2])}
    for name, (dsrc, src) in sources.items():
        for order in ("C", "F"):
            dst = cuda.device_array(src.shape, np.float32, order=order)
            seen = []

            def spy(kernel, grid, block, stream):
                seen.append(kernel)
                return kernel[grid, block]

            arrays.copy_2d(dsrc, dst, configure=spy)
            assert np.array_equal(dst.copy_to_host(), src), (name, order)
            assert seen == [arrays._copy_kernels[order == "F"]], (name, order)
    column = cuda.device_array((37, 1), np.float32)  # one column: its threads down it
    arrays.copy_2d(whole[:, 3:4], column, configure=spy)
    assert np.array_equal(column.copy_to_host(), x[:, 3:4]) and seen[-1] is arrays._copy_kernels[1]
    monkeypatch.setattr(arrays, "GRID_Y", 2)  # more rows (or columns) than blocks along y: they stride
    for order in ("C", "F"):
        dst = cuda.device_array((37, 45), np.float32, order=order)
        arrays.copy_2d(fortran[:, :45], dst)
        assert np.array_equal(dst.copy_to_host(), x[:, :45]), order
    b = rng.standard_normal((9, 5)).astype(np.float32)  # a strided device operand through matmul: copied
    c = tilegemm.matmul(whole[:, 1:19:2], cuda.to_device(b), kernel=GPU_KERNEL)
    assert validate.check(c.copy_to_host(), x[:, 1:19:2], b).ok


def test_non_contiguous_out():
    a, b = ops()
    big = np.zeros((6, 10), np.float32)
    out = big[:, ::2]
    tilegemm.matmul(a, b, kernel=GPU_KERNEL, out=out)
    assert validate.check(out, a, b).ok and np.all(big[:, 1::2] == 0)


def test_inputs_are_never_modified():
    a, b = ops(17, 13, 11)
    a0, b0 = a.copy(), b.copy()
    for kernel in ("cpu_blas", "cpu_naive", "naive", "smem_tiled_16", GPU_KERNEL):
        tilegemm.matmul(a, b, kernel=kernel)
    assert np.array_equal(a, a0) and np.array_equal(b, b0)


def test_float64():
    a, b = ops(dtype="float64")
    c = tilegemm.matmul(a, b, kernel=GPU_KERNEL)
    assert c.dtype == np.float64 and validate.check(c, a, b).ok


# ---- zero-sized dimensions ---------------------------------------------------------------

@pytest.mark.parametrize("kernel", ["auto", GPU_KERNEL])
@pytest.mark.parametrize("m,n,k", [(0, 5, 4), (6, 0, 4), (0, 0, 0)])
def test_empty_result(kernel, m, n, k):
    a, b = np.ones((m, k), np.float32), np.ones((k, n), np.float32)
    c = tilegemm.matmul(a, b, kernel=kernel)
    assert c.shape == (m, n)


@pytest.mark.parametrize("kernel", ["auto", GPU_KERNEL])
def test_k_zero_gives_zeros(kernel):
    a, b = np.ones((3, 0), np.float32), np.ones((0, 4), np.float32)
    c = tilegemm.matmul(a, b, kernel=kernel)
    assert c.shape == (3, 4) and np.all(c == 0)
    out = np.full((3, 4), 7.0, np.float32)
    assert tilegemm.matmul(a, b, out=out) is out and np.all(out == 0)
    tc = tilegemm.matmul(torch.ones(3, 0), torch.ones(0, 4), kernel=kernel)
    assert isinstance(tc, torch.Tensor) and torch.all(tc == 0)


# ---- typed errors with clear messages ----------------------------------------------------

def test_inner_dimension_mismatch():
    with pytest.raises(tilegemm.ShapeError, match=r"a is 3×4, b is 5×6"):
        tilegemm.matmul(np.ones((3, 4), np.float32), np.ones((5, 6), np.float32))


def test_beyond_2d_follows_numpy_and_a_scalar_is_refused():
    """1-D and N-D operands follow numpy.matmul (tests/test_matmul_semantics.py has the cases); a 0-D
    one is refused."""
    for shape in ((3,), (2, 4, 3)):
        a = np.ones(shape, np.float32)
        assert np.array_equal(tilegemm.matmul(a, np.ones((3, 3), np.float32)), np.matmul(a, np.ones((3, 3), np.float32)))
    with pytest.raises(tilegemm.ShapeError, match="at least one dimension"):
        tilegemm.matmul(np.ones((), np.float32), np.ones((3, 3), np.float32))


def test_mixed_dtypes():
    with pytest.raises(tilegemm.DTypeError, match="mixed dtypes a=float32, b=float64"):
        tilegemm.matmul(np.ones((2, 2), np.float32), np.ones((2, 2), np.float64))


@pytest.mark.parametrize("dtype", ["int32", "complex64", "bool"])
def test_unsupported_dtype(dtype):
    with pytest.raises(tilegemm.DTypeError, match=dtype):
        tilegemm.matmul(np.ones((2, 2), dtype), np.ones((2, 2), dtype))


def test_kernel_that_lacks_the_dtype():
    a = np.ones((2, 2), np.float16)
    with pytest.raises(tilegemm.DTypeError, match="supports float32, float64; got float16"):
        tilegemm.matmul(a, a, kernel="naive")


def test_unknown_kernel():
    with pytest.raises(tilegemm.UnknownKernel, match="no kernel named 'fastest'"):
        tilegemm.matmul(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32), kernel="fastest")


def test_not_an_array():
    with pytest.raises(tilegemm.DTypeError, match="expected a NumPy array"):
        tilegemm.matmul([[1.0]], np.ones((1, 1), np.float32))


def test_different_devices():
    with pytest.raises(tilegemm.DeviceError, match="different devices"):
        tilegemm.matmul(np.ones((2, 2), np.float32), cuda.to_device(np.ones((2, 2), np.float32)))


@pytest.mark.parametrize("shape,dtype,match", [((5, 6), "float32", "out has shape"),
                                               ((6, 5), "float64", "out has dtype")])
def test_bad_out(shape, dtype, match):
    a, b = ops()
    with pytest.raises((tilegemm.ShapeError, tilegemm.DTypeError), match=match):
        tilegemm.matmul(a, b, out=np.empty(shape, dtype))


def test_out_of_another_kind():
    a, b = ops()
    with pytest.raises(tilegemm.DTypeError, match="out is a torch array but the operands are numpy"):
        tilegemm.matmul(a, b, out=torch.empty(6, 5))


def test_out_overlapping_an_input_is_refused():
    a = np.ones((4, 4), np.float32)
    b = np.ones((4, 4), np.float32)
    with pytest.raises(tilegemm.LayoutError, match="shares memory with a"):
        tilegemm.matmul(a, b, out=a)
    ta = torch.ones(4, 4)
    with pytest.raises(tilegemm.LayoutError, match="shares memory with b"):
        tilegemm.matmul(torch.ones(4, 4), ta, out=ta[:, :])


def test_out_interleaved_with_an_input_is_written():
    """An out whose elements lie between an input's (the odd columns of the buffer whose even
    columns are a) shares no memory with it: written, as torch.matmul and np.matmul write it, the
    input untouched. An out on one of a's elements is still refused."""
    for buf in (torch.zeros(3, 8), np.zeros((3, 8), np.float32)):
        a, out = buf[:, ::2], buf[:, 1::2]
        a[...] = torch.arange(12.0).reshape(3, 4) if isinstance(buf, torch.Tensor) else np.arange(12.0).reshape(3, 4)
        b = np.arange(16, dtype=np.float32).reshape(4, 4) / 7
        b = torch.from_numpy(b) if isinstance(buf, torch.Tensor) else b
        before = a.clone() if isinstance(buf, torch.Tensor) else a.copy()
        assert tilegemm.matmul(a, b, out=out) is out
        np.testing.assert_allclose(np.asarray(out), np.asarray(before) @ np.asarray(b), rtol=1e-6)
        assert (np.asarray(a) == np.asarray(before)).all()
        with pytest.raises(tilegemm.LayoutError, match="shares memory with a"):
            tilegemm.matmul(a, b, out=buf[:, :4])


def test_self_overlapping_layouts():
    """An array whose elements share memory (a broadcast view, or strides shorter than the
    dimensions inside them) cannot take a result; views that skip memory, transpose or reverse
    can, and so can an empty one. torch, NumPy and __cuda_array_interface__ layouts (strides in
    elements and in bytes) alike. The test is conservative: an interleaved layout whose elements
    are in fact distinct is refused too (its docstring says so)."""
    from tilegemm import arrays

    class CAI:  # a device array as Numba and CuPy describe theirs (strides in bytes, None: C order)
        def __init__(self, shape, strides):
            self.__cuda_array_interface__ = dict(shape=shape, strides=strides, typestr="<f4", data=(0, False),
                                                 version=3)

    x = np.zeros((6, 8), np.float32)
    st = np.lib.stride_tricks.as_strided
    for ok in (x, x.T, x[:, ::2], x[::-1], x[::-1, ::-2], x[:1], st(x, (6, 8), (32, 4)), torch.zeros(6, 8).t(),
               torch.zeros(4, 1, 3)[:, :, 1:], torch.zeros(5).expand(1, 5), torch.zeros(2, 3, 4).permute(2, 0, 1),
               torch.zeros(1, 0).expand(3, 0), CAI((3, 5), None), CAI((3, 5), (4, 12)), CAI((3, 5), (40, 4))):
        assert not arrays.self_overlapping(ok), ok.shape if hasattr(ok, "shape") else ok.__cuda_array_interface__
    for bad in (st(x, (3, 8), (0, 4)), st(x, (3, 5), (8, 4)), torch.zeros(5).expand(3, 5), torch.zeros(3, 1).expand(3, 4),
                torch.zeros(6, 8).as_strided((4, 4), (2, 1)), torch.zeros(2, 4).unsqueeze(0).expand(3, 2, 4),
                CAI((3, 5), (0, 4)), CAI((3, 5), (8, 4)), torch.zeros(20).as_strided((3, 5), (2, 3))):
        assert arrays.self_overlapping(bad), bad.shape if hasattr(bad, "shape") else bad.__cuda_array_interface__


def test_broadcast_out_is_refused():
    """torch refuses out= of a broadcast view ("more than one element of the written-to tensor
    refers to a single memory location"); so does matmul, and out is left as it was."""
    a, b = torch.ones(3, 4), torch.ones(4, 5)
    row = torch.zeros(5)
    with pytest.raises(RuntimeError):
        torch.matmul(a, b, out=row.expand(3, 5))
    with pytest.raises(tilegemm.LayoutError, match="its elements share memory"):
        tilegemm.matmul(a, b, out=row.expand(3, 5))
    assert (row == 0).all()
    tilegemm.matmul(torch.ones(3, 0), torch.ones(0, 5), out=torch.zeros(1, 5).expand(3, 5).clone())
    tilegemm.matmul(torch.ones(3, 0), torch.ones(0, 0), out=torch.zeros(1, 0).expand(3, 0))  # empty: as torch


def test_read_only_out():
    a, b = ops()
    out = np.empty((6, 5), np.float32)
    out.flags.writeable = False
    with pytest.raises(tilegemm.LayoutError, match="read-only"):
        tilegemm.matmul(a, b, out=out)


def test_errors_are_also_builtin_types():
    assert issubclass(tilegemm.ShapeError, ValueError)
    assert issubclass(tilegemm.DTypeError, TypeError)
    assert issubclass(tilegemm.OutOfDeviceMemory, MemoryError)


# ---- listing and explaining --------------------------------------------------------------

def test_kernels_lists_the_ladder():
    rows = {r["name"]: r for r in tilegemm.kernels()}
    for name in ("cpu_naive", "cpu_blas", "naive", "smem_tiled_16", "smem_tiled_32", "smem32_conflicted",
                 "smem32_padded", "register_blocked", "broken_nosync"):
        assert name in rows
    assert rows["broken_nosync"]["teaching"]
    assert rows["cpu_blas"]["runs_here"]


def test_a_tensor_core_rung_without_a_gpu_says_where_gemm_runs_it(monkeypatch):
    """Without a GPU the listing said only that the rungs need one, where under TRITON_INTERPRET=1
    tilegemm.gemm(kernel=...) runs each of them on the CPU (FP16, FP32): a learner's way in."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    from tilegemm import registry
    from tilegemm.kernels.tensorcore import triton_status

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    kern = registry.get("tc_tiled")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert triton_status(kern) == (False, "needs a CUDA GPU")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    ok, why = triton_status(kern)
    assert not ok and "tilegemm.gemm(kernel=...) runs it here, FP16 and FP32, under TRITON_INTERPRET=1" in why


def test_explain_says_what_and_why():
    a, b = ops()
    text = tilegemm.explain(a, b)
    p = tilegemm.plan(a, b)
    assert text.startswith(f"6×4 @ 4×5, float32: {p.kernel.name} (")  # (its assertion ended 'or text': never false)
    assert all(f"  - {r}" in text for r in p.reasons)


@pytest.mark.parametrize("kernel", ["cpu_naive", GPU_KERNEL])
def test_explain_refuses_a_named_kernel_where_matmul_does_for_tensors_that_require_grad(kernel):
    """matmul refuses a kernel named for tensors that require grad (its operator chooses); explain
    and plan named that kernel as the one that runs."""
    a, b = (torch.from_numpy(x) for x in ops())
    a.requires_grad_(True)
    for call in (tilegemm.matmul, tilegemm.explain, tilegemm.plan):
        with pytest.raises(tilegemm.AutogradError, match=f"kernel='{kernel}' with tensors that require grad"):
            call(a, b, kernel=kernel)
    with torch.no_grad():  # (no gradient wanted: the kernel runs, and is explained)
        assert tilegemm.explain(a, b, kernel=kernel).startswith(f"6×4 @ 4×5, float32: {kernel} (")
    assert tilegemm.explain(a, b).startswith("6×4 @ 4×5, float32: ")


@pytest.mark.parametrize("m, n, k, says", [(3, 2, 0, "K = 0, an empty sum: the result is zeros, no kernel runs"),
                                           (0, 2, 3, "nothing to multiply (M or N is 0)")])
def test_explain_says_no_kernel_runs_for_an_empty_product(m, n, k, says, monkeypatch):
    """A 2-D product with M, N or K of 0 runs no kernel (matmul makes the result); explain named the
    kernel as running it (of an N-D one it said no kernel runs)."""
    import dataclasses

    from tilegemm import registry

    kern = registry.get(GPU_KERNEL)
    monkeypatch.setitem(registry._REGISTRY, GPU_KERNEL, dataclasses.replace(kern, launch=None))  # (a launch: TypeError)
    a, b = np.ones((m, k), np.float32), np.ones((k, n), np.float32)
    assert tilegemm.explain(a, b, kernel=GPU_KERNEL).splitlines()[-1].startswith(f"  - {says}")
    assert np.array_equal(tilegemm.matmul(a, b, kernel=GPU_KERNEL), np.zeros((m, n), np.float32))


@pytest.mark.parametrize("a, b, kernel, says, product", [
    ((2, 3, 4), (4, 5), "auto", "one numpy.matmul: the CPU's BLAS", None),
    ((2, 3, 4), (4, 5), "smem_tiled_32", "A's batch folds into its rows without a copy: one 6×4 @ 4×5 product",
     "6×4 @ 4×5, float32: smem_tiled_32"),
    ((4,), (4, 5), "smem_tiled_32", "one 1×4 @ 4×5 product", "1×4 @ 4×5, float32: smem_tiled_32"),
    ((2, 3, 4), (2, 4, 5), "smem_tiled_32", "2 launches, one 2-D product 3×4 @ 4×5 per batch entry (a kernel "
     "asked for by name)", None),
    ("transposed", (4, 5), "smem_tiled_32", "3 launches, one 2-D product 2×4 @ 4×5 per batch entry (a kernel asked "
     "for by name; B, shared by every entry, is not copied)", None),  # A's batch does not fold into its rows
    ((0, 3, 4), (4, 5), "smem_tiled_32", "nothing to multiply", None),
    ((2, 3, 0), (0, 5), "smem_tiled_32", "K = 0, an empty sum: the result is zeros", None),
])
def test_explain_says_how_a_product_beyond_2d_runs(a, b, kernel, says, product):
    """explain of an N-D or 1-D product said the kernel and stopped; it says the route matmul takes
    (nd.route, which runs it too) and explains the one 2-D product it runs, where it runs one."""
    torch = pytest.importorskip("torch")
    if kernel == "auto" and tilegemm._cuda.has_gpu():  # (where there is one, auto runs host operands on the GPU)
        says = "A's batch folds into its rows without a copy: one 6×4 @ 4×5 product"
        product = f"6×4 @ 4×5, float32: {tilegemm.plan(torch.ones(6, 4), torch.ones(4, 5)).kernel.name}"
    x = torch.ones(2, 3, 4).transpose(0, 1) if a == "transposed" else torch.ones(a)
    text = tilegemm.explain(x, torch.ones(b), kernel=kernel)
    assert f"  - {says}" in text, text
    assert (f"\n    {product} (" in text) == (product is not None), text


def test_explain_routes_host_operands_bound_for_the_gpu_as_their_copies_run():
    """Host operands a GPU kernel takes are copied there first, and `.cuda()` makes a sliced,
    non-dense A contiguous, so its batch folds into its rows there: explain routed the host view
    (not foldable) and said one batched gemm where the run folds (a stand-in plan of a GPU kernel)."""
    from types import SimpleNamespace

    from tilegemm import arrays, nd

    a = np.ones((2, 4, 4), np.float32)[:, :3, :]
    A, B = arrays.describe(a, "a"), arrays.describe(np.ones((4, 5), np.float32), "b")
    said, product = nd.describe(A, B, "auto", SimpleNamespace(kernel=SimpleNamespace(backend="tensorcore")))
    assert said.startswith("A's batch folds into its rows without a copy: one 6×4 @ 4×5 product"), said
    assert [tuple(t.shape) for t in product] == [(6, 4), (4, 5)]


def test_a_large_product_in_the_simulator_is_said_before_it_runs(monkeypatch):
    """The README's `matmul(a, b, kernel="smem_tiled_32")` at 1000×700×500 ran for hours in the
    simulator on a machine without a GPU, without a word: a product past the lab's simulated
    sizes (64³) warns first, with the factor of work. (The launch is stood in for here.)"""
    from tilegemm import _cuda, dispatch

    if not _cuda.SIMULATOR:
        pytest.skip("the simulator's warning")
    monkeypatch.setattr(dispatch, "execute_matmul", lambda *args: "ran")
    a, b = np.ones((1000, 700), np.float32), np.ones((700, 500), np.float32)
    with pytest.warns(UserWarning, match=r"1000×700 @ 700×500 on smem_tiled_32 runs in Numba's CUDA simulator .* "
                                         r"1\.34e\+03× the work"):
        assert tilegemm.matmul(a, b, kernel="smem_tiled_32") == "ran"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tilegemm.matmul(a[:64, :64], b[:64, :64], kernel="smem_tiled_32") == "ran"  # the lab's sizes
        tilegemm.matmul(a, b)  # auto: the CPU's BLAS


def test_host_view_for_torch_copies_negative_strides_and_read_only():
    """torch.from_numpy takes no negative strides (seen on the GPU: a batched NumPy product with a
    reversed operand failed there); the view handed to torch is a copy then, the caller's untouched."""
    from tilegemm import arrays

    base = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    rev = base[:, ::-1]
    got = arrays.host_view(arrays.describe(rev, "a"), torch_ok=True)
    assert min(got.strides) >= 0 and np.array_equal(got, rev)
    ro = base.copy()
    ro.flags.writeable = False
    assert arrays.host_view(arrays.describe(ro, "a"), torch_ok=True).flags.writeable
    assert arrays.host_view(arrays.describe(rev, "a")) is rev  # no copy where NumPy is the consumer


def test_fp8_quantise_of_an_empty_operand_has_a_unit_scale():
    """gemm(precision="fp8") quantises with amax/finfo.max; an empty operand has no amax (the GPU
    property run found the crash), so its scale is 1."""
    torch = pytest.importorskip("torch")
    from tilegemm import tensorcore_api

    q, s, _ = tensorcore_api._convert(torch.zeros(0, 8), torch.float8_e4m3fn, None)
    assert q.shape == (0, 8) and q.dtype == torch.float8_e4m3fn and float(s) == 1.0


def test_gemm_at_alpha_zero_converts_no_operand(monkeypatch):
    """alpha = 0 computes no product (C = beta·C), so gemm converts neither operand to the
    precision's dtype: a strided one's copy (or FP8 quantisation) was made first, work and memory
    for a result that never reads it. The operands' refusals still come first; at alpha 1 both are
    converted (the count sees them)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    from tilegemm import dispatch, tensorcore_api

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    converted, convert = [], tensorcore_api._convert
    monkeypatch.setattr(tensorcore_api, "_convert", lambda t, *rest: converted.append(t.dtype) or convert(t, *rest))
    monkeypatch.setattr(dispatch, "run_problem", lambda *args, **kwargs: None)
    a, b = torch.randn(8, 6).T, torch.randn(8, 5).T.contiguous().T  # (both strided: a copy each at fp16)
    c = torch.randn(6, 5, dtype=torch.float16)
    want = c * 0.5
    for alpha in (0.0, -0.0, 0):
        got = tilegemm.gemm(a, b, precision="fp16", alpha=alpha, beta=0.5, c=c.clone())
        assert torch.equal(got, want) and converted == []
        assert not tilegemm.gemm(a, b, precision="fp16", alpha=alpha).any() and converted == []
    with pytest.raises(tilegemm.DTypeError, match="scale_a is for precision='fp8' only"):
        tilegemm.gemm(a, b, precision="fp16", alpha=0.0, scale_a=2.0)
    with pytest.raises(tilegemm.DTypeError, match="the tensor cores multiply real numbers"):
        tilegemm.gemm(a.to(torch.complex64), b, precision="fp16", alpha=0.0)
    tilegemm.gemm(a, b, precision="fp16")
    assert converted == [torch.float32, torch.float32]


def test_fp8_quantise_keeps_a_tiny_operand():
    """gemm(precision="fp8") maps amax to the e4m3 maximum; a floor of amax at 1e-12 quantised an
    operand of values near 1e-18 (well inside float32's normal range) to zeros, and the product
    with it to 0. Its scale now only stays at least float32's smallest normal (an all-zero one)."""
    torch = pytest.importorskip("torch")
    from tilegemm import tensorcore_api

    x = torch.tensor([[1e-18, -3e-18], [2e-19, 0.0]])
    q, s, _ = tensorcore_api._convert(x, torch.float8_e4m3fn, None)
    back = q.float() * s
    assert torch.allclose(back, x, rtol=2.0 ** -4, atol=0), back  # e4m3's rounding: 3 mantissa bits
    q, s, _ = tensorcore_api._convert(torch.zeros(2, 2), torch.float8_e4m3fn, None)
    assert float(s) > 0 and not (q.float() * s).any()


@pytest.mark.parametrize("bad, dtype", [(float("nan"), "float32"), (float("inf"), "float32"),
                                        (-float("inf"), "float32"), (1e39, "float64"), (-1e39, "float64")])
def test_fp8_quantise_of_an_operand_with_a_nan_or_inf_keeps_the_others(bad, dtype):
    """One NaN or Inf in an operand gemm quantises to FP8 made its amax, and so its scale, NaN or
    Inf: every element became NaN or 0, and every product with it NaN, where only the products
    with that element are (as in the float64 product). The scale is the finite amax's now, and
    the element NaN: e4m3 has no Inf (torch's cast saturates it to ±448, a finite product). A
    float64 element past float32's range is Inf once in FP32, and so the same."""
    torch = pytest.importorskip("torch")
    from tilegemm import tensorcore_api

    x = torch.tensor([[1.0, -2.0], [bad, 0.5]], dtype=getattr(torch, dtype))
    q, s, _ = tensorcore_api._convert(x, torch.float8_e4m3fn, None)
    back = q.float() * s
    assert torch.isfinite(s).all() and float(s) > 0
    assert torch.equal(back[0], x[0].float()) and back[1, 1] == 0.5 and back[1, 0].isnan()


_PAIRED = """
import torch
from tilegemm.kernels.tensorcore import _convert as conv, launch_calls
g = torch.Generator().manual_seed(1)
bits = lambda x: x.view(torch.uint8) if x.element_size() == 1 else x.view(torch.int16) if x.element_size() == 2 else x
small = torch.randn(37, 70, generator=g) * 3, (torch.randn(50, 70, generator=g) * 1e-3).t()  # one program each
small[0].view(-1)[11] = float("nan")
large = torch.randn(3, 12283, generator=g), (torch.randn(300, 16387, generator=g) * 1e-2).t()  # 9 programs; 601 of
large[1][-1, -1] = 1e3  # 2 steps each, B's largest element in its last program's second step
assert [conv.stretches(x.numel()) for x in large] == [(9, 1), (601, 2)]
for a, b in (small, large):
    ya, ca = conv.cast_calls(a, torch.float16)
    yb, cb = conv.cast_calls(b, torch.float16)
    launch_calls(ca + cb)
    want = [bits(y).clone() for y in (ya, yb)]
    for y in (ya, yb):
        y.zero_()
    calls = conv.paired(ca, cb)
    assert [c.fn for c in calls] == [conv.cast_pair], calls
    launch_calls(calls)
    assert all(torch.equal(w, bits(y)) for w, y in zip(want, (ya, yb)))
    for sa, sb, names in ((None, None, ["partial_amax_pair", "quantise_pair"]),
                          (torch.full((1,), 0.25), None, ["partial_amax", "quantise_pair"]),
                          (None, torch.full((1,), 2.0), ["partial_amax", "quantise_pair"]),
                          (torch.full((1,), 0.5), torch.full((1,), 2.0), ["quantise_pair"])):
        qa, s_a, ka = conv.fp8_calls(a, sa)
        qb, s_b, kb = conv.fp8_calls(b, sb)
        launch_calls(ka + kb)
        want = [bits(x).clone() for x in (qa, s_a, qb, s_b)]
        for x in (qa, qb):
            bits(x).zero_()
        for x, given in ((s_a, sa), (s_b, sb)):
            if given is None:
                x.zero_()
        for c in ka + kb:  # the partial maxima too: the pair quantise must fold the pair amax's, not those above
            if c.fn is conv.partial_amax:
                c.scratch[0].fill_(1e30)
        calls = conv.paired(ka, kb)
        assert [c.fn.fn.__name__ for c in calls] == names, calls
        launch_calls(calls)
        assert all(torch.equal(w, bits(x)) for w, x in zip(want, (qa, s_a, qb, s_b))), (a.shape, sa, sb)
print("PAIRED OK")
"""


def test_the_pair_kernels_convert_both_operands_as_their_own_kernels_do():
    """gemm converts both operands with one launch a kernel (_convert.paired: A's programs, then
    B's). Under Triton's interpreter (a process of its own: it must be set before Triton loads), the
    pair kernels give the bytes each operand's own kernels give: a cast to FP16, and FP8
    quantisation with the scales made, or either or both the caller's (an amax with no partner then
    runs alone, first), every output and partial maximum reset between the two; operands of one
    program each (a NaN in A) and of 9 and 601 programs of two steps each (B's amax in its last
    program: the fold over every partial maximum, B's programs' offset by A's)."""
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    import os
    import subprocess
    import sys

    src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=src + os.pathsep + os.environ.get("PYTHONPATH", ""))
    run = subprocess.run([sys.executable, "-c", _PAIRED], env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0 and "PAIRED OK" in run.stdout, run.stdout[-2000:] + run.stderr[-4000:]


def test_masked_arrays_are_refused_not_multiplied_with_their_masked_values():
    """np.ma.dot leaves masked values out; multiplying them in would be silently different, so a
    masked array (either operand, or out=) is a typed error that names the alternatives."""
    a = np.ma.masked_array(np.ones((3, 4), np.float32), mask=np.eye(3, 4, dtype=bool))
    b = np.ones((4, 2), np.float32)
    with pytest.raises(tilegemm.MaskedArrayError, match=r"a: a NumPy masked array.*np\.ma\.dot"):
        tilegemm.matmul(a, b)
    with pytest.raises(TypeError, match=r"b: a NumPy masked array"):
        tilegemm.matmul(b.T.copy(), np.ma.masked_array(b.T.copy().T))
    with pytest.raises(tilegemm.MaskedArrayError, match="out: a NumPy masked array"):
        tilegemm.matmul(np.asarray(a), b, out=np.ma.masked_array(np.zeros((3, 2), np.float32)))
    with pytest.raises(tilegemm.MaskedArrayError):
        tilegemm.gemm(a, b)
    assert np.array_equal(tilegemm.matmul(a.filled(0), b), np.ma.dot(a, b).filled(np.nan))  # what it suggests


@pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
def test_a_masked_array_beside_an_ndarray_subclass_is_refused(tmp_path):
    """Beside an ndarray subclass (np.matrix, np.memmap) the product goes through np.asarray of
    both operands, which dropped a masked array's mask: its masked values were multiplied in."""
    a = np.ma.masked_array(np.array([[1.0, 1e9], [1.0, 1.0]]), mask=[[0, 1], [0, 0]])
    mm = np.memmap(tmp_path / "b.bin", dtype=np.float64, mode="w+", shape=(2, 2))
    mm[...] = np.eye(2)
    for other in (np.asmatrix(np.eye(2)), mm):
        with pytest.raises(tilegemm.MaskedArrayError, match="a: a NumPy masked array"):
            tilegemm.matmul(a, other)
        with pytest.raises(tilegemm.MaskedArrayError, match="b: a NumPy masked array"):
            tilegemm.matmul(other, a)


@pytest.mark.skipif(not tilegemm._cuda.SIMULATOR, reason="the simulator's switch: a machine without a GPU")
@pytest.mark.parametrize("first", ["import numba", "tilegemm.kernels()",
                                   "from numba import cuda; assert type(cuda.to_device(np.ones(2))).__name__ == "
                                   "'FakeCUDAArray'"])
def test_the_simulator_runs_whatever_imported_numba_first(first):
    """Numba reads NUMBA_ENABLE_CUDASIM at its own import; the CPU kernels (which kernels() reads
    for their summaries) or the caller may import it before tilegemm decides: the simulator's
    kernels must run all the same (they raised CudaSupportError, while kernels() said they ran).
    The caller's own numba.cuda, imported after tilegemm and before its first call, is the
    simulator too (tilegemm decides just before that import: _cuda._DecideFirst)."""
    import os
    import subprocess
    import sys

    src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    code = (f"import numba, numpy as np, tilegemm; numba.config.DISABLE_JIT = True; {first}; "
            "print(tilegemm.matmul(np.ones((5, 7), np.float32), np.ones((7, 3), np.float32), kernel='naive')[0, 0], "
            "numba.config.DISABLE_JIT)")  # (the switch leaves what the caller set in numba's configuration)
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    path = src + os.pathsep + os.environ.get("PYTHONPATH", "")  # (then the caller's: a GPU machine's numpy wheel)
    run = subprocess.run([sys.executable, "-c", code], env=dict(env, PYTHONPATH=path), capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0 and run.stdout.strip() == "7.0 True", run.stderr[-2000:]


def test_numba_cuda_imported_after_tilegemm_calls_no_driver():
    """The caller's numba.cuda imported after tilegemm, before its first use: tilegemm decides then
    only where no driver call is needed (no CUDA driver library; or the environment says); where a
    driver is installed the decision waits for tilegemm's first use (a cuInit at that import would
    initialise CUDA in a process that may fork workers first). A finder run again does nothing."""
    import os
    import subprocess
    import sys

    src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_ENABLE_CUDASIM", "TILEGEMM_SIMULATOR")}
    path = src + os.pathsep + os.environ.get("PYTHONPATH", "")
    for library, decided in (("object()", False), ("None", True)):
        code = (f"import tilegemm, tilegemm._cuda as C; probes = []; C._driver_library = lambda: {library}; "
                "C._driver_device_count = lambda: probes.append(1) or 0; import importlib.util; "
                "importlib.util.find_spec('numba.cuda'); import numba.cuda; "
                "print('SIMULATOR' in vars(C), len(probes))")
        run = subprocess.run([sys.executable, "-c", code], env=dict(env, PYTHONPATH=path), capture_output=True,
                             text=True, timeout=300)
        assert run.returncode == 0, run.stderr[-2000:]
        assert run.stdout.split() == [str(decided), "1" if decided else "0"], (library, run.stdout)


@pytest.mark.skipif(not tilegemm._cuda.SIMULATOR, reason="the simulator's switch: a machine without a GPU")
def test_numba_cuda_imported_before_tilegemm_is_named_where_a_kernel_cannot_run():
    """numba.cuda imported before tilegemm, without its simulator, on a machine without a GPU: a
    simulated kernel cannot run, and the error says why and what to do (it said only that the
    simulator was off, which the caller had not asked for); the CPU's kernels run as before."""
    import os
    import subprocess
    import sys

    src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    code = ("from numba import cuda; import numpy as np, tilegemm; a = np.ones((3, 4), np.float32)\n"
            "print(tilegemm.matmul(a, a.T)[0, 0])\n"
            "try:\n    tilegemm.matmul(a, a.T, kernel='naive')\n"
            "except tilegemm.DeviceError as e:\n    print(e)")
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    path = src + os.pathsep + os.environ.get("PYTHONPATH", "")
    run = subprocess.run([sys.executable, "-c", code], env=dict(env, PYTHONPATH=path), capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    first, said = run.stdout.strip().splitlines()
    assert first == "4.0"
    assert "numba.cuda was imported without its simulator before tilegemm chose" in said and "import tilegemm first" in said


@pytest.mark.parametrize("name, says", [("budget", "not k15's own kernel here"), ("splitk_tiles", "k13's plan"),
                                        ("skinny_m", "k12's one-column kernel")])
def test_explain_names_the_route_a_rung_takes(name, says):
    """k15 and k13 hand most products to k13's plan or k12's kernel: explain says which runs."""
    a, b = np.ones((20, 8), np.float32), np.ones((8, 16), np.float32)
    assert says in tilegemm.explain(a, b, kernel=name)


def test_k_zero_into_a_strided_numba_out_writes_zeros():
    """K = 0 (an empty sum) into a strided Numba device out= (every other column of a wider
    array): zeros in its elements, the others untouched. The zeros were one host-to-device copy,
    which Numba refuses for a strided view (a raw ValueError: "non-contiguous buffer")."""
    wide = cuda.to_device(np.full((3, 10), 7, np.float32))
    out = wide[:, ::2]
    for kernel in ("auto", "naive"):
        got = tilegemm.matmul(cuda.to_device(np.ones((3, 0), np.float32)), cuda.to_device(np.ones((0, 5), np.float32)),
                              kernel=kernel, out=out)
        assert got is out
        host = wide.copy_to_host()
        assert np.all(host[:, ::2] == 0) and np.all(host[:, 1::2] == 7), kernel


def test_an_out_in_the_other_byte_order_is_checked_before_the_product(monkeypatch):
    """A big-endian out= is filled from the product in this machine's order; a wrong one (shape,
    dtype, read-only, an input's memory) is refused before the product runs, as any out is (it ran
    first: seconds to minutes in the simulator, then the error)."""
    from tilegemm import dispatch

    def ran(*args):
        raise AssertionError("the product ran before out was checked")

    monkeypatch.setattr(dispatch, "execute_matmul", ran)
    a, b = ops(6, 5, 4)
    with pytest.raises(tilegemm.ShapeError, match=r"out has shape \(5, 6\); the product needs \(6, 5\)"):
        tilegemm.matmul(a, b, kernel=GPU_KERNEL, out=np.empty((5, 6), ">f4"))
    with pytest.raises(tilegemm.DTypeError, match="out has dtype float64; the product is float32"):
        tilegemm.matmul(a, b, kernel=GPU_KERNEL, out=np.empty((6, 5), ">f8"))
    read_only = np.empty((6, 5), ">f4")
    read_only.flags.writeable = False
    with pytest.raises(tilegemm.LayoutError, match="read-only"):
        tilegemm.matmul(a, b, kernel=GPU_KERNEL, out=read_only)
    sq = np.ones((4, 4), ">f4")
    with pytest.raises(tilegemm.LayoutError, match="shares memory with a"):
        tilegemm.matmul(sq, sq, kernel=GPU_KERNEL, out=sq)
    monkeypatch.undo()
    out = np.empty((6, 5), ">f4")  # (a right one is still filled)
    assert tilegemm.matmul(a, b, kernel=GPU_KERNEL, out=out) is out and validate.check(out, a, b).ok


@pytest.mark.skipif(not tilegemm._cuda.SIMULATOR, reason="the simulator runs one launch at a time")
def test_simulated_products_from_several_threads_take_turns():
    """numba-cuda's simulator keeps one kernel context per process: a launch from a second host
    thread while another runs was taken for a device function's call inside the first and raised
    AttributeError ('Thread' object has no attribute 'blockIdx'). Each product is right."""
    from concurrent.futures import ThreadPoolExecutor

    pairs = [ops(4, 3, 5, seed=i) for i in range(6)]

    def one(i):
        a, b = pairs[i]
        return validate.check(tilegemm.matmul(cuda.to_device(a), cuda.to_device(b), kernel="naive").copy_to_host(),
                              a, b).ok

    with ThreadPoolExecutor(3) as pool:
        assert all(pool.map(one, range(6)))


def test_nd_numpy_on_a_named_kernel_without_torch_says_so(monkeypatch):
    """torch is an optional dependency: a 1-D or N-D NumPy product on a named kernel (its views
    are torch's) raised ModuleNotFoundError without it; it is a DTypeError naming the ways out,
    for matmul and explain alike. kernel='auto' on the CPU needs no torch."""
    import importlib.util
    import sys

    monkeypatch.setitem(sys.modules, "torch", None)  # (import torch fails, and find_spec says it is not there)
    assert importlib.util.find_spec("torch") is None
    a, x = np.ones((3, 4), np.float32), np.ones(4, np.float32)
    for call in (tilegemm.matmul, tilegemm.explain):
        with pytest.raises(tilegemm.DTypeError, match=r"2-D and 1-D NumPy operands on 'naive' run as torch tensors, "
                                                      r"and torch is not installed .* or kernel='auto'"):
            call(a, x, kernel="naive")
    if not tilegemm._cuda.has_gpu():
        assert np.array_equal(tilegemm.matmul(np.ones((2, 3, 4), np.float32), a.T), np.full((2, 3, 3), 4, np.float32))


def test_validate_check_takes_vectors_and_refuses_in_words():
    """validate.check of a matrix-vector product (as matmul gives it) is checked as one column;
    a batch, inner dimensions that differ or a dtype it has no tolerance for raised IndexError,
    ValueError (NumPy's gufunc words) or KeyError: 'int32'; each is tilegemm's error, in words."""
    a, b = ops(5, 3, 6)
    x = b[:, 0]
    assert validate.check(a @ x, a, x).ok and validate.check(x @ a.T, x, a.T).ok and validate.check(x @ x, x, x).ok
    assert not validate.check(a @ x + 1, a, x).ok
    with pytest.raises(tilegemm.ShapeError, match=r"got shapes \(2, 5, 6\) and \(6, 3\) \(check a batch one product"):
        validate.check(np.stack([a @ b] * 2), np.stack([a, a]), b)
    with pytest.raises(tilegemm.ShapeError, match=r"got shapes \(5, 6\) and \(5, 3\)"):
        validate.check(a @ b, a, b[:5])
    with pytest.raises(tilegemm.DTypeError, match="no tolerance for dtype 'int32'; known: float64, float32"):
        validate.check((a @ b).astype(np.int32), a.astype(np.int32), b.astype(np.int32))
    with pytest.raises(ValueError, match=r"result shape \(3, 5\) differs from the reference's \(5, 3\)"):
        validate.check((a @ b).T, a, b)


def test_a_call_while_another_thread_imports_torch(monkeypatch):
    """While one thread's `import torch` is under way, sys.modules holds the partly made module
    (no torch.Tensor yet): a NumPy product in another thread asked isinstance(x, torch.Tensor) of
    it and raised AttributeError ("partially initialized module 'torch'"). A stand-in for that
    module shows it."""
    import sys
    import types

    monkeypatch.setitem(sys.modules, "torch", types.ModuleType("torch"))
    a, b = ops(4, 3, 5)
    assert validate.check(tilegemm.matmul(a, b), a, b).ok


def test_a_host_result_past_2_to_the_64_bytes_is_refused_by_size():
    """The result's size in bytes was NumPy's int64 product, which wraps at 2⁶⁴: 2³² × 2³² float64
    came to 0 bytes, went unchecked, and NumPy or torch raised its own error (or, past a check
    that passed, allocated). It is counted in Python's integers now, and refused by name."""
    from tilegemm import arrays
    from tilegemm.errors import OutOfHostMemory

    assert arrays.nbytes((2**32, 2**32), "float64") == 2**67
    v = np.broadcast_to(np.ones((1, 1)), (2**32, 1))  # (no memory of its own: one element)
    if tilegemm._cuda.has_gpu():
        pytest.skip("what a machine without a GPU does")
    with pytest.raises(OutOfHostMemory, match="GiB of host memory"):
        tilegemm.matmul(v, v.T)
