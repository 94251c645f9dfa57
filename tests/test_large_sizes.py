"""Products past 2^31 elements on a GPU: offsets that an int32 would wrap. Each result is checked
on sampled rows and columns, the last ones included (where a wrapped offset would land), against
cuBLAS in FP32 on the same (dequantised) operands. Each pointer path past 2^31 elements also runs
on the CPU, in Triton's interpreter (tests/test_tensorcore.py::test_interpreter_past_int32_offsets)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

INT32 = 2**31


def _sample(n: int, k: int = 48) -> "torch.Tensor":
    idx = torch.randint(0, n, (k,), device="cuda")
    return torch.cat([idx, torch.arange(max(n - 16, 0), n, device="cuda")]).unique()


def _take(x, dim, idx):
    """index_select, through a uint8 view for FP8 (torch has no FP8 index_select)."""
    if x.element_size() == 1:
        return x.view(torch.uint8).index_select(dim, idx).view(x.dtype)
    return x.index_select(dim, idx)


def _check(c, a, b, tol, what):
    """c ≈ a @ b on sampled rows and columns (the last 16 of each always among them)."""
    rows, cols = _sample(c.shape[-2]), _sample(c.shape[-1])
    ref = _take(a, -2, rows).float() @ _take(b, -1, cols).float()
    got = _take(_take(c, -2, rows), -1, cols).float()
    err = float((got - ref).norm() / ref.norm())
    assert err < tol, (what, err)


def _free_gib() -> float:
    return torch.cuda.mem_get_info()[0] / 2**30


@pytest.mark.parametrize("n,kernel", [(50000, "auto"), (65536, "auto"), (50000, "tc_persistent"),
                                      (50000, "tc_tiled")])
def test_square_bf16_past_int32(n, kernel):
    """n×n BF16 operands: n² > 2^31 elements each, so B's span is past int32 offsets (no cut of
    A's rows helps). The rungs compile their pointer arithmetic 64-bit for such a problem (WIDE):
    the rung auto picks, and t02's and t01's pointer loads and stores of every operand. (Until
    session 14 this product was refused with a ShapeError.)"""
    import tilegemm

    if _free_gib() < 3 * n * n * 2 / 2**30 + 4:
        pytest.skip(f"needs {3 * n * n * 2 / 2**30:.0f} GiB of device memory")
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    assert a.numel() > INT32
    c = tilegemm.matmul(a, b, kernel=kernel)
    _check(c, a, b, 1e-2, f"bf16 {n}³ on {kernel}")
    del a, b, c
    torch.cuda.empty_cache()


def test_fp8_with_m_times_k_past_int32():
    """FP8 e4m3 A of 65536×40960 (2.7e9 elements), B K-major, BF16 out, per-tensor scales."""
    import tilegemm

    m, k, n = 65536, 40960, 512
    a = (torch.rand(m, k, device="cuda", dtype=torch.bfloat16) - 0.5).to(torch.float8_e4m3fn)
    b = (torch.rand(n, k, device="cuda", dtype=torch.bfloat16) - 0.5).to(torch.float8_e4m3fn).t()
    assert a.numel() > INT32
    s = torch.full((1,), 0.5, device="cuda")
    c = tilegemm.gemm(a, b, scale_a=s, scale_b=s)
    _check(c.float() * 4, a, b, 2e-2, "fp8 65536×512×40960")
    del a, b, c
    torch.cuda.empty_cache()


def test_batched_whose_batch_stride_passes_int32():
    """Two 46341×46341 BF16 matrices in one tensor: the second starts past 2^31 elements."""
    import tilegemm

    n = 46341
    a = torch.randn(2, n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(2, n, 256, device="cuda", dtype=torch.bfloat16)
    assert a.stride(0) > INT32
    c = tilegemm.matmul(a, b)
    for i in range(2):
        _check(c[i], a[i], b[i], 1e-2, f"batch {i}")
    c2 = tilegemm.gemm(a, b)
    assert torch.equal(c2, c) or float((c2.float() - c.float()).norm() / c.float().norm()) < 1e-2
    del a, b, c, c2
    torch.cuda.empty_cache()


def test_fp32_simt_past_int32():
    """FP32 `matmul` (the SIMT ladder) with A of 50000×50000 (2.5e9 elements), B narrow."""
    import tilegemm

    n = 50000
    a = torch.randn(n, n, device="cuda")
    b = torch.randn(n, 64, device="cuda")
    c = tilegemm.matmul(a, b)
    _check(c, a, b, 1e-4, "fp32 50000×64×50000")
    del a, b, c
    torch.cuda.empty_cache()
