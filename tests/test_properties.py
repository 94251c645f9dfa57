"""Property tests (hypothesis) of `tilegemm.matmul` against a float64 reference.

Random shapes (0, 1, primes, tile multiples ± 1, with batch dimensions that broadcast and 1-D
operands), dtypes, layouts (C and Fortran order, transposed and sliced views, negative strides),
array kinds (NumPy and torch on the CPU; torch CUDA, CuPy and Numba device arrays on a GPU) and
`out=`; every result is checked element by element against the float64 product within
`tilegemm.validate`'s bound, its kind, dtype and shape against what numpy.matmul/torch.matmul
give, and the inputs are checked unchanged. `auto` and, at simulator sizes, every SIMT kernel
by name.

Profiles (TILEGEMM_PROPERTY_PROFILE): "ci" (the default: about 2,400 cases on the CPU, seeded so
that CI is repeatable) and "gpu" (about 12,000, larger shapes, the GPU kinds);
TILEGEMM_PROPERTY_EXAMPLES sets the matmul cases of either (gemm's follow at 30%). Each run counts
its cases (tests/_cases.py; the terminal summary, and TILEGEMM_PROPERTY_JSON).
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import tilegemm
from tilegemm import _cuda, registry, validate

import _cases

torch = pytest.importorskip("torch")

PROFILE = os.environ.get("TILEGEMM_PROPERTY_PROFILE", "gpu" if _cuda.has_gpu() else "ci")
_COMMON = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
               print_blob=True)
settings.register_profile("ci", max_examples=2000, derandomize=True, **_COMMON)
settings.register_profile("gpu", max_examples=10000, **_COMMON)
settings.load_profile(PROFILE)
EXAMPLES = int(os.environ.get("TILEGEMM_PROPERTY_EXAMPLES") or settings.get_profile(PROFILE).max_examples)
GPU = _cuda.has_gpu() and PROFILE == "gpu"

SPECIAL = [0, 1, 2, 3, 5, 7, 13, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129]
LARGE = [255, 256, 257, 511, 512, 513, 1000, 1023, 1024, 1025]


def dims(large: bool = GPU):
    return st.one_of(st.sampled_from(SPECIAL + (LARGE if large else [])), st.integers(0, 200 if large else 48))


KINDS = ["numpy", "torch"] + (["torch-cuda"] + [k for k in ("cupy", "numba") if _cuda.has_gpu()] if GPU else [])
DTYPES = ["float32", "float64"] + (["float16", "bfloat16"] if GPU else [])
LAYOUTS = ["C", "F", "T", "slice", "neg"]


def _layout(rng, shape, dtype, layout):
    """A NumPy float32/float64 array of `shape`, in `layout` (values uniform in [-1, 1))."""
    vals = rng.uniform(-1.0, 1.0, size=shape).astype(dtype)
    if len(shape) < 2 and layout in ("F", "T"):
        layout = "C"
    if layout == "F":
        return np.asfortranarray(vals)
    if layout == "T":  # a transposed view of a C-ordered array
        return np.ascontiguousarray(np.swapaxes(vals, -1, -2)).swapaxes(-1, -2)
    if layout == "slice":  # every other row and column of a larger array
        big = np.zeros(tuple(2 * s for s in shape), dtype=dtype)
        view = big[tuple(slice(None, None, 2) for _ in shape)]
        view[...] = vals
        return view
    if layout == "neg":  # rows (or elements) stored reversed: a view with a negative stride
        if len(shape) >= 2:
            return np.ascontiguousarray(vals[..., ::-1, :])[..., ::-1, :]
        return np.ascontiguousarray(vals[::-1])[::-1]
    return np.ascontiguousarray(vals)


def _kind(x: np.ndarray, kind: str, dtype: str):
    """x as the array kind (the same strides where the kind allows them)."""
    if kind == "numpy":
        return x
    if kind in ("torch", "torch-cuda"):
        t = torch.from_numpy(np.ascontiguousarray(x) if any(s < 0 for s in x.strides) else x)
        if dtype == "bfloat16":
            t = t.to(torch.bfloat16)
        return t.cuda() if kind == "torch-cuda" else t
    if kind == "cupy":
        import cupy

        return cupy.asarray(x)
    from numba import cuda

    return cuda.to_device(np.ascontiguousarray(x))


def _host(x) -> np.ndarray:
    if isinstance(x, (np.ndarray, np.generic)):  # numpy.matmul of two 1-D arrays is a NumPy scalar
        return np.asarray(x)
    if hasattr(x, "detach"):
        return x.detach().float().cpu().numpy() if x.dtype == torch.bfloat16 else x.detach().cpu().numpy()
    if hasattr(x, "get"):
        return x.get()
    return x.copy_to_host()


def _base_dtype(dtype: str) -> str:
    return "float32" if dtype == "bfloat16" else dtype


@st.composite
def problems(draw, large: bool = GPU):
    """(a shape, b shape) whose product numpy.matmul defines: 2-D, batched and broadcast, 1-D."""
    m, n, k = draw(dims(large)), draw(dims(large)), draw(dims(large))
    form = draw(st.sampled_from(["2d"] * 6 + ["batch", "bcast-a", "bcast-b", "1d-a", "1d-b", "1d-both"]))
    batch = draw(st.sampled_from([1, 2, 3])) if "b" in form[:2] else 1
    if form == "2d":
        return (m, k), (k, n)
    if form == "batch":
        return (batch, m, k), (batch, k, n)
    if form == "bcast-a":  # a 2-D A against a batch of B; or a batch of one against a batch
        return draw(st.sampled_from([(m, k), (1, m, k)])), (batch, k, n)
    if form == "bcast-b":
        return (batch, m, k), draw(st.sampled_from([(k, n), (1, k, n)]))
    if form == "1d-a":
        return (k,), (k, n)
    if form == "1d-b":
        return (m, k), (k,)
    return (k,), (k,)


def _check_result(c, a, b, a_host, b_host, dtype: str, kind: str, what: str):
    want = np.matmul(a_host.astype(np.float64), b_host.astype(np.float64))
    got = _host(c)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, numpy.matmul gives {want.shape}"
    assert type(c).__module__.split(".")[0] == type(a).__module__.split(".")[0], f"{what}: returned {type(c)}"
    if kind != "numba":
        expect = {"bfloat16": "bfloat16"}.get(dtype, dtype)
        assert str(c.dtype).removeprefix("torch.") == expect, f"{what}: dtype {c.dtype}"
    # each 2-D product of the (broadcast) batch, with 1-D operands promoted as numpy.matmul does
    a3 = a_host[None, None, :] if a_host.ndim == 1 else (a_host[None] if a_host.ndim == 2 else a_host)
    b3 = b_host[None, :, None] if b_host.ndim == 1 else (b_host[None] if b_host.ndim == 2 else b_host)
    c3 = np.asarray(got, dtype=np.float64).reshape(np.broadcast_shapes(a3.shape[:-2], b3.shape[:-2])
                                                   + (a3.shape[-2], b3.shape[-1]))
    a3, b3 = np.broadcast_to(a3, c3.shape[:-2] + a3.shape[-2:]), np.broadcast_to(b3, c3.shape[:-2] + b3.shape[-2:])
    for i in range(c3.shape[0]):
        chk = validate.check(c3[i], a3[i], b3[i], dtype=dtype, kernel=what)
        assert chk.ok, f"{what}, batch {i}:\n{chk}"


def _run_case(a_shape, b_shape, dtype, kinds_layouts, out_layout, seed, kernel="auto"):
    kind, la, lb = kinds_layouts
    _cases.RAN[kernel if kernel == "auto" else "simt kernels"] += 1
    rng = np.random.default_rng(seed)
    base = _base_dtype(dtype)
    a_np, b_np = _layout(rng, a_shape, base, la), _layout(rng, b_shape, base, lb)
    a, b = _kind(a_np, kind, dtype), _kind(b_np, kind, dtype)
    a_host, b_host = _host(a).copy(), _host(b).copy()  # what the inputs hold (bfloat16: as rounded)
    out = None
    shape = np.matmul(np.zeros(a_shape), np.zeros(b_shape)).shape
    if kind == "numba" and not shape:
        out_layout = None  # Numba moves a 0-D array to the GPU as shape (1,) (seen on the H200): no out= there
    if out_layout is not None:
        if kind == "numba" or not shape or (out_layout != "C" and len(shape) < 2):
            out_layout = "C"
        o = np.full(shape, np.nan, dtype=base)
        o = _layout(rng, shape, base, out_layout) if out_layout != "C" else o
        if out_layout != "C":
            o[...] = np.nan
        out = _kind(o, kind, dtype)
        if kind in ("torch", "torch-cuda") and o.size:
            out.fill_(float("nan"))
    what = f"{kernel} {dtype} {kind} a{a_shape}:{la} b{b_shape}:{lb} out:{out_layout}"
    try:
        c = tilegemm.matmul(a, b, kernel=kernel, out=out) if out is not None else tilegemm.matmul(a, b, kernel=kernel)
        if out is not None:
            assert c is out, f"{what}: out= was not the result"
        _check_result(c, a, b, a_host, b_host, dtype, kind, what)
        assert np.array_equal(_host(a), a_host, equal_nan=True) and np.array_equal(_host(b), b_host, equal_nan=True), \
            f"{what}: an input was modified"
    except BaseException:
        _cases.FAILED[kernel if kernel == "auto" else "simt kernels"] += 1
        raise


def _kinds_layouts():
    def ok(t):
        kind, la, lb = t
        return not (kind != "numpy" and ("neg" in (la, lb)))  # torch, CuPy, Numba: no negative strides
    return st.tuples(st.sampled_from(KINDS), st.sampled_from(LAYOUTS), st.sampled_from(LAYOUTS)).filter(ok)


@settings(max_examples=EXAMPLES)
@given(shapes=problems(), dtype=st.sampled_from(DTYPES), kl=_kinds_layouts(),
       out_layout=st.sampled_from([None, None, "C", "F", "slice"]), seed=st.integers(0, 2**32 - 1))
def test_matmul_auto_matches_float64(shapes, dtype, kl, out_layout, seed):
    """matmul (kernel auto) of any shape, layout, kind and out= is the float64 product within the
    dtype's bound, in numpy.matmul's shape, the caller's kind and dtype; inputs untouched."""
    if dtype in ("float16", "bfloat16"):
        assume(kl[0] in ("torch-cuda", "cupy") and not (dtype == "bfloat16" and kl[0] == "cupy"))
    _run_case(*shapes, dtype, kl, out_layout, seed)


def _simt_kernels():
    return sorted(k.name for k in registry.all_kernels()
                  if k.backend == "simt" and k.name != "broken_nosync" and "float32" in k.dtypes)


@settings(max_examples=max(150, EXAMPLES // 16))
@given(m=st.integers(0, 12), n=st.integers(0, 12), k=st.integers(0, 12), name=st.sampled_from(_simt_kernels()),
       la=st.sampled_from(LAYOUTS), lb=st.sampled_from(LAYOUTS), out_layout=st.sampled_from([None, "C"]),
       seed=st.integers(0, 2**32 - 1))
def test_every_simt_kernel_matches_float64(m, n, k, name, la, lb, out_layout, seed):
    """Each SIMT rung by name (the simulator on a CPU), on awkward small shapes and layouts."""
    ok, _ = registry.get(name).runnable()
    assume(ok)
    _run_case((m, k), (k, n), "float32", ("numpy", la, lb), out_layout, seed, kernel=name)


def test_gemm_matches_float64():
    """gemm's property cases (tests/_gemm_properties.py) in a process of their own: under Triton's
    interpreter on a CPU (FP16 and FP32: it computes BF16 and FP8 wrongly), as is on a GPU."""
    import json
    import subprocess
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    src = os.path.join(os.path.dirname(here), "src")
    env = dict(os.environ, PYTHONPATH=src + os.pathsep + os.environ.get("PYTHONPATH", ""), TILEGEMM_AUTOTUNE="0")
    if not _cuda.has_gpu():
        env["TRITON_INTERPRET"] = "1"
    examples = 600 if PROFILE == "ci" else max(600, EXAMPLES * 3 // 10)
    run = subprocess.run([sys.executable, os.path.join(here, "_gemm_properties.py"), str(examples)], env=env,
                         capture_output=True, text=True, timeout=1800)
    line = [ln for ln in run.stdout.splitlines() if ln.startswith("GEMM-PROPERTIES ")]
    assert run.returncode == 0 and line, run.stdout[-2000:] + run.stderr[-3000:]
    got = json.loads(line[0].split(" ", 1)[1])
    _cases.RAN["gemm"] += got["ran"]
    _cases.FAILED["gemm"] += got["failed"]
    assert got["ran"] >= examples and got["failed"] == 0, got.get("last") or got.get("first")
