"""The checker must reject what is wrong: races, unwritten elements, NaN/Inf, small errors."""

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


def test_random_operands_are_never_zero_and_fresh():
    a1, _ = validate.random_operands(16, 16, 16)
    a2, _ = validate.random_operands(16, 16, 16)
    assert np.count_nonzero(a1) == a1.size and not np.array_equal(a1, a2)


def test_fp16_subnormal_output_rounding_passes():
    """An FP16 result below 2^-14 is stored on a fixed 2^-24 grid: that rounding is not an error."""
    a = np.array([[2.0**-13]], np.float32)
    b = np.array([[2.0**-3 + 2.0**-9]], np.float32)  # product 2^-16 + 2^-22: not on the FP16 grid there
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
