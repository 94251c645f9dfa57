"""The checker must reject what is wrong: races, unwritten elements, NaN/Inf, small errors."""

import warnings

import numpy as np
import pytest

import tilegemm
from tilegemm import validate
from tilegemm._cuda import cuda


def test_broken_kernel_is_caught():
    a, b = validate.random_operands(48, 48, 64, seed=1)
    from tilegemm.race import run_kernel

    c = run_kernel("broken_nosync", a, b)
    chk = validate.check(c, a, b, kernel="broken_nosync")
    assert not chk.ok
    assert chk.n_bad > 0 and chk.first_bad
    assert "WRONG" in str(chk) and "broken_nosync" in str(chk)


def test_correct_kernel_passes_same_inputs():
    from tilegemm.race import run_kernel

    a, b = validate.random_operands(48, 48, 64, seed=1)
    assert validate.check(run_kernel("smem_tiled_32", a, b), a, b).ok


def test_poison_catches_unwritten_elements():
    a, b = validate.random_operands(6, 5, 4, seed=2)
    c_d = cuda.device_array((6, 5), dtype=np.float32)
    validate.poison(c_d)
    host = c_d.copy_to_host()
    host[:, :4] = (a @ b)[:, :4]  # a kernel that forgot the last column
    chk = validate.check(host, a, b)
    assert not chk.ok and chk.n_nan == 6 and chk.n_bad == 6
    assert all(j == 4 for _, j, _, _ in chk.first_bad)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nonfinite_never_passes(bad):
    a, b = validate.random_operands(8, 8, 8, seed=3)
    c = (a @ b).astype(np.float32)
    c[2, 3] = bad
    chk = validate.check(c, a, b)
    assert not chk.ok and chk.n_bad == 1 and chk.first_bad[0][:2] == (2, 3)


def test_one_wrong_element_is_reported():
    a, b = validate.random_operands(30, 20, 10, seed=4)
    c = a @ b
    c[7, 11] += 0.5
    chk = validate.check(c, a, b)
    assert not chk.ok and chk.n_bad == 1 and chk.first_bad[0][:2] == (7, 11)
    assert chk.max_abs_err == pytest.approx(0.5, rel=1e-5)


def test_fp32_rounding_passes():
    a, b = validate.random_operands(64, 64, 2048, seed=5)
    assert validate.check(a @ b, a, b).ok  # BLAS's own FP32 sum order


def test_a_cancelling_dot_product_is_judged_at_its_scale():
    """A 256-term FP32 dot product that sums to near zero (the GPU property run found one): a
    summation-order error of 5.5e-7 is 1.5e-5 of |C| but within what FP32 gives at |A|·|B|'s
    scale, so it passes; the same error on a product that does not cancel, or a larger one here,
    does not."""
    rng = np.random.default_rng(7)
    a = rng.uniform(-1, 1, (1, 256)).astype(np.float32)
    b = rng.uniform(-1, 1, (256, 1)).astype(np.float32)
    b[0, 0] -= (validate.reference(a, b)[0, 0] - 0.038) / a[0, 0]  # C ≈ 0.038, |A|·|B| ≈ 64
    ref = validate.reference(a, b)
    assert validate.check(ref + 5.5e-7, a, b).ok
    assert not validate.check(ref + 5e-3, a, b).ok
    ones = np.ones((1, 256), np.float32)
    assert not validate.check(validate.reference(ones, ones.T) * (1 + 5e-5), ones, ones.T).ok


def test_the_frobenius_test_catches_a_scale_error_the_elements_hide():
    """A result 5e-5 too large everywhere (a wrong scale): each element is within its bound (the
    bound allows for K = 1024 rounding steps), but the errors all lean one way, and the Frobenius
    test, at its usual tolerance here (the product does not cancel), catches it."""
    a, b = validate.random_operands(64, 64, 1024, seed=9)
    chk = validate.check(validate.reference(a, b) * (1 + 5e-5), a, b)
    assert not chk.ok and chk.n_bad == 0 and chk.tol == pytest.approx(1e-5, rel=0.5)


def test_reference_infinities_must_match():
    a = np.array([[np.inf, 1.0]], np.float32)
    b = np.array([[1.0], [1.0]], np.float32)
    assert validate.check(np.array([[np.inf]], np.float32), a, b).ok
    assert not validate.check(np.array([[1.0]], np.float32), a, b).ok


def test_tolerance_table_gives_reasons():
    for name, tol in validate.TOLERANCES.items():
        assert tol.why and 0 < tol.rel_fro < 0.1, name
    assert validate.TOLERANCES["float64"].rel_fro < validate.TOLERANCES["float32"].rel_fro


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "int8", "uint8"])
def test_random_operands_are_never_zero_and_fresh(dtype):
    """Of every dtype: integer ones were uniform [-1, 1) values cast, all 0 or -1."""
    a1, b1 = validate.random_operands(16, 16, 16, dtype)
    a2, _ = validate.random_operands(16, 16, 16, dtype)
    assert a1.dtype == b1.dtype == np.dtype(dtype)
    assert np.count_nonzero(a1) == a1.size and np.count_nonzero(b1) == b1.size and not np.array_equal(a1, a2)
    assert len(np.unique(a1)) >= (3 if dtype == "uint8" else 6)


def test_fp16_subnormal_output_rounding_passes():
    """An FP16 result below 2^-14 is stored on a fixed 2^-24 grid: that rounding is not an error.
    (The product was 2^-16 + 2^-22 = 260·2^-24, on the grid: stored exactly, it passed without
    eta_out too. 2^-16 + 2^-25 + 2^-27 is 0.625 of a step past 2^-16: stored 0.375·2^-24 off,
    more than u_out·|C| ≈ 2^-26 allows.)"""
    a = np.array([[2.0**-13]], np.float32)
    b = np.array([[2.0**-3 + 2.0**-12 + 2.0**-14]], np.float32)  # product 2^-16 + 2^-25 + 2^-27: off the grid
    c = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float16)
    assert validate.check(c, a, b, dtype="float16").ok
    assert not validate.check(c + np.float16(2.0**-20), a, b, dtype="float16").ok


def test_a_mismatch_prints_the_digits_that_tell_the_values_apart_and_no_warning():
    import warnings

    rng = np.random.default_rng(0)
    a, b = rng.random((3, 4)), rng.random((4, 2))
    c = a @ b
    c[0, 0] += 1e-9  # past float64's bound, below .6g's digits
    said = str(validate.check(c, a, b, dtype="float64"))
    want, got = said.splitlines()[1].split("expected ")[1].split(", got ")
    assert want != got, said
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a result never written (all NaN) is reported, not warned about
        assert validate.check(np.full((3, 2), np.nan), a, b, dtype="float64").n_nan == 6


@pytest.mark.parametrize("cancels", [False, True], ids=["one-sign", "cancelling"])
@pytest.mark.parametrize("dtype,out_dtype,k", [
    ("float64", None, 100), ("float32", None, 100), ("float32", None, 1024), ("tf32", None, 64),
    ("float16", None, 64), ("bfloat16", None, 300), ("float8_e4m3fn", None, 2048),
    ("float8_e5m2", None, 16384), ("float32", "float16", 64), ("float32", "bfloat16", 4096)])
def test_an_element_is_judged_by_the_documented_bound(dtype, out_dtype, k, cancels):
    """One element off by 0.9 of the bound the module's docstring gives passes, by 1.1 of it fails:
    γ = max(min(K, 16·sqrt(K)), K·ρ/2)·u_acc / max(1 − K·u_acc, 1/2) + 2·u_in + u_in², bound =
    γ·(|A||B|) + u_out·|ref| + eta_out, ρ = |ref| / |A||B|. All ones: every element is K, ρ = 1,
    K/2 where that is above 16·sqrt(K); cancelling: the element's column of B alternates ±1, its ref is 0, ρ = 0, the
    probabilistic 16·sqrt(K). FP8's accumulator is not a full FP32 one: ρ is not counted. (One element
    in 4096 keeps the Frobenius test out of it.)"""
    a, b = np.ones((64, k)), np.ones((k, 64))
    if cancels:
        b[1::2, 7] = -1.0
    tol = validate.tolerance_for(dtype, out_dtype)
    u = tol.u_acc
    full = u <= 2.0**-24  # (FP8's ~14-bit accumulator: ρ not counted)
    growth = min(k, 16 * np.sqrt(k)) if cancels or not full else max(min(k, 16 * np.sqrt(k)), k / 2)
    gamma = growth * u / max(1 - k * u, 0.5) + 2 * tol.u_in + tol.u_in**2
    ref = 0.0 if cancels else k
    bound = gamma * k + tol.u_out * ref + tol.eta_out
    for f, ok in ((0.9, True), (1.1, False)):
        c = validate.reference(a, b)
        c[5, 7] += f * bound
        chk = validate.check(c, a, b, dtype=dtype, out_dtype=out_dtype)
        assert (chk.ok, chk.n_bad) == (ok, int(not ok)), (f, chk)


def test_a_correct_sum_of_one_sign_passes_and_a_missing_term_does_not():
    """A sequential FP32 sum (as one thread of a naive kernel accumulates) of K equal products that
    FP32 cannot hold exactly drifts one way: at K = 4096 on 0.1 it is 2.1e-5 off, past the FP32
    Frobenius tolerance 1e-5 a random-sign sum stays under, and at K = 65536 past 16·sqrt(K)·u.
    Both are right to FP32, so both pass; the same sums with one product left out do not."""
    for k in (4096, 65536):
        a, b = np.full((2, k), 0.1, np.float32), np.full((k, 2), 0.1, np.float32)
        terms = a[0] * b[:, 0]
        c = np.full((2, 2), np.cumsum(terms, dtype=np.float32)[-1], np.float32)
        assert validate.check(c, a, b, dtype="float32").ok, k
        c[1, 1] = np.cumsum(terms[:-k // 64], dtype=np.float32)[-1]  # K/64 products short
        assert not validate.check(c, a, b, dtype="float32").ok, k
    rng = np.random.default_rng(1)  # one sign, not constant: a tile of 32 products left out of K = 4096 (0.8%)
    a, b = rng.random((4, 4096), dtype=np.float32), rng.random((4096, 4), dtype=np.float32)
    c = a @ b
    assert validate.check(c, a, b, dtype="float32").ok
    c[2, 3] -= a[2, 64:96] @ b[64:96, 3]
    assert not validate.check(c, a, b, dtype="float32").ok


def test_an_output_dtype_brings_its_rounding_and_tolerance():
    """FP32 inputs with a BF16 (or FP16) output: the output's rounding, its subnormal spacing and its
    Frobenius tolerance are allowed for, the accumulation's stays FP32's."""
    t = validate.tolerance_for("float32", "bfloat16")
    f32, bf16, f16 = (validate.TOLERANCES[n] for n in ("float32", "bfloat16", "float16"))
    assert (t.rel_fro, t.u_acc, t.u_in, t.u_out) == (bf16.rel_fro, f32.u_acc, f32.u_in, bf16.u_out)
    assert validate.tolerance_for("float32", "float16").eta_out == f16.eta_out > 0
    assert validate.tolerance_for("float32", "float32") == f32
    a, b = validate.random_operands(32, 32, 64, seed=11)
    u = validate.reference(a, b).astype(np.float32).view(np.uint32)
    c = ((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000).view(np.float32)  # rounded to BF16's 8 bits
    assert validate.check(c, a, b, out_dtype="bfloat16").ok
    assert not validate.check(c, a, b).ok  # as an FP32 result it is wrong


def test_the_dtype_defaults_to_the_inputs():
    """No dtype given: a float64 product is judged at float64's tolerance, not FP32's."""
    rng = np.random.default_rng(12)
    a, b = rng.random((8, 16)), rng.random((16, 8))
    c = a @ b
    c[1, 2] *= 1 + 1e-9
    chk = validate.check(c, a, b)
    assert chk.dtype == "float64" and not chk.ok and chk.n_bad == 1


def test_a_result_of_the_wrong_shape_is_an_error():
    a, b = validate.random_operands(6, 5, 4, seed=13)
    with pytest.raises(ValueError, match="shape"):
        validate.check((a @ b)[:1], a, b)  # one row: it would broadcast against the reference
    with pytest.raises(ValueError, match="shape"):
        validate.check((a @ b).T, a, b)


def test_an_infinity_of_the_wrong_sign_fails():
    a = np.array([[np.inf, 1.0]], np.float32)
    b = np.array([[1.0], [1.0]], np.float32)
    chk = validate.check(np.array([[-np.inf]], np.float32), a, b)
    assert not chk.ok and chk.n_bad == 1


def test_the_report_says_expected_then_got_and_stops_at_max_report():
    a, b = validate.random_operands(10, 10, 4, seed=14)
    ref = validate.reference(a, b)
    c = ref.copy()
    c[3, 4] = 123.0
    c[6, :] = -7.0  # 10 more wrong elements: 11 of 100
    chk = validate.check(c, a, b, max_report=3)
    assert chk.n_bad == 11 and len(chk.first_bad) == 3
    assert chk.first_bad[0] == (3, 4, pytest.approx(ref[3, 4]), 123.0)
    said = str(chk)
    assert "11 of 100 elements outside the bound (11.0%)" in said
    assert f"C[3, 4]: expected {ref[3, 4]:.6g}, got 123" in said
    assert len(said.splitlines()) == 1 + 3


def test_a_nonfinite_result_has_an_infinite_error():
    a, b = validate.random_operands(4, 4, 4, seed=15)
    c = validate.reference(a, b)
    c[0, 0] = np.nan
    chk = validate.check(c, a, b)
    assert chk.rel_err == float("inf") and chk.max_abs_err == float("inf")


def test_max_abs_err_leaves_out_where_the_reference_is_infinite():
    """Where the reference is ±Inf the elementwise test asks for the same Inf; the largest |error|
    reported is that of the finite elements."""
    a = np.array([[np.inf, 1.0], [1.0, 1.0]])
    b = np.ones((2, 2))
    with np.errstate(invalid="ignore"):  # BLAS may multiply the Inf by a zero of its padding
        ref = validate.reference(a, b)
    c = ref.copy()
    c[1, 0] += 0.25
    c[0, 0] = 5.0  # where ref is +Inf
    chk = validate.check(c, a, b, dtype="float64", ref=ref)
    assert not chk.ok and chk.n_bad == 2 and chk.max_abs_err == pytest.approx(0.25)
    with warnings.catch_warnings():  # the check makes its own reference without NumPy's 'invalid value' warning
        warnings.simplefilter("error")
        assert validate.check(c, a, b, dtype="float64").n_bad == 2


def test_poison_fills_a_numpy_array_with_nan():
    x = np.zeros((3, 4), np.float32)
    validate.poison(x)
    assert np.isnan(x).all()


def test_operands_are_as_documented():
    a, b = validate.random_operands(64, 64, 64, seed=16)
    assert a.min() < -0.9 and a.max() > 0.9 and b.min() < -0.9 and np.abs(a).max() <= 1
    ai, bi = validate.integer_operands(64, 64, 64, seed=17)
    assert set(np.unique(ai)) == set(np.unique(bi)) == set(range(-3, 4))


def test_a_long_fp32_sum_is_judged_at_its_length():
    """A correct sequential FP32 kernel (cpu_naive: one accumulator, K FMAs in order) at K = 2^20:
    every element is within its bound, and its rel. Frobenius error (about 2e-5, sqrt(K)·u's
    growth) was judged against FP32's fixed 1e-5 and called WRONG (`tilegemm bench --kernels
    cpu_naive --sizes 8x8x1048576`). A scale error four times as large still fails."""
    a, b = validate.random_operands(8, 8, 2**20, seed=0)
    c = tilegemm.matmul(a, b, kernel="cpu_naive")
    chk = validate.check(c, a, b, kernel="cpu_naive")
    assert chk.n_bad == 0 and chk.rel_err > 1e-5 and chk.ok, str(chk)
    assert not validate.check(validate.reference(a, b) * (1 + 2e-4), a, b).ok


@pytest.mark.parametrize("tiny", [1e-20, 1e-22, 1e-30])
def test_a_product_that_underflows_correctly_rounded_passes(tiny):
    """A product of tiny operands lands in the output's subnormal range, or below it: NumPy's own
    product, correctly rounded (2e-40 → a subnormal 1 spacing away; 2e-60 → 0), was WRONG in FP32
    ("rel. Frobenius error 1", 4 of 4 elements outside the bound): the bound was all relative.
    Off by more than the spacing there is still wrong."""
    a = np.full((2, 2), tiny, np.float32)
    b = np.full((2, 2), tiny, np.float32)
    c = a @ b
    assert validate.check(c, a, b).ok, str(validate.check(c, a, b))
    spacing = np.finfo(np.float32).smallest_subnormal
    assert not validate.check(c + 8 * spacing, a, b).ok
    assert not validate.check(c * 2 + 8 * spacing, a, b).ok
