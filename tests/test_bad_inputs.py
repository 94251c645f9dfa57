"""Every row of the bad-input table (tests/_bad_inputs.py, docs/bad-input.md): a typed error
naming the problem, or what NumPy/torch give; never a crash, and the inputs never modified."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import _bad_inputs as T
from tilegemm import _cuda

torch = pytest.importorskip("torch")


def _plain(x):
    """What an input's values are, as plain tensors where it is a layer (its state) or a masked tensor
    (its data and mask), whose own equality torch does not define."""
    if isinstance(x, torch.nn.Module):
        return [t.detach() for t in x.state_dict().values()]
    if isinstance(x, torch.masked.MaskedTensor):
        return [x.get_data().detach(), x.get_mask()]
    return None


def _snapshot(x):
    if _plain(x) is not None:
        return [t.clone() for t in _plain(x)]
    if isinstance(x, torch.Tensor):
        return x.detach().clone() if x.device.type != "meta" else None
    if isinstance(x, np.ndarray):
        return np.array(x, copy=True, subok=False) if x.dtype != object else copy.deepcopy(x)
    return copy.deepcopy(x)


def _same(a, b):
    if _plain(a) is not None:
        return all(_same(x, y) for x, y in zip(_plain(a), b, strict=True))
    if isinstance(a, torch.Tensor) and a.layout is not torch.strided:  # (a sparse tensor: its values)
        a, b = a.to_dense(), b.to_dense()
    if isinstance(a, torch.Tensor):
        return b is None or torch.equal(a.detach(), b) or bool(torch.isnan(a).all() and torch.isnan(b).all())
    if isinstance(a, np.ndarray):
        return np.array_equal(np.asarray(a), b, equal_nan=a.dtype.kind == "f")
    return a == b


def test_the_table_has_forty_cases_and_every_group():
    assert len(T.CASES) >= 40
    assert {c.group for c in T.CASES} >= {"shapes", "empty", "kinds", "dtypes", "out", "autograd", "kernels",
                                           "gemm", "memory", "values", "environment"}


@pytest.mark.parametrize("case", [c for c in T.CASES if c.env is None], ids=lambda c: c.what[:60])
def test_case(case):
    if case.cpu_only and _cuda.has_gpu():
        pytest.skip("what a machine without a GPU does")
    fn, args, kw = case.run()
    case_run = case.run
    case.run = lambda: (fn, args, kw)  # the same objects, so that they can be checked afterwards
    try:
        before = [_snapshot(x) for x in (*args, *kw.values())]
        got, _ = T.outcome_here(case)
    finally:
        case.run = case_run
    for x, b in zip((*args, *kw.values()), before):
        if kw.get("out") is not x:
            assert _same(x, b), f"{case.what}: an input was modified"
    if case.error:
        assert got.raised == case.error, (case.what, got)
        assert case.match in got.message, (case.what, got.message)
        return
    assert got.raised is None, (case.what, got)
    want = case.like(args, kw)
    if case.like is T._grad_fn:
        assert got.value.grad_fn is not None
        return
    assert type(got.value) is type(want), (case.what, type(got.value), type(want))
    assert np.shape(got.value) == np.shape(want) and np.asarray(got.value).dtype == np.asarray(want).dtype
    np.testing.assert_allclose(np.asarray(got.value, np.float64), np.asarray(want, np.float64), rtol=1e-5, atol=1e-6,
                               equal_nan=True)
    if case.match:
        assert case.match in got.warned, (case.what, got.warned)
    if "out" in kw:
        assert got.value is kw["out"]


@pytest.mark.parametrize("case", [c for c in T.CASES if c.env is not None], ids=lambda c: c.what[:60])
def test_case_in_a_fresh_process(case, tmp_path):
    if case.cpu_only and _cuda.has_gpu():
        pytest.skip("what a machine without a GPU does")
    got = T.outcome_fresh(case, str(tmp_path))
    assert got.raised == case.error, (case.what, got)
    assert case.match in (got.message if case.error else got.warned), (case.what, got)
