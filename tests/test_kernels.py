"""Every registered SIMT and CPU kernel, under the simulator on CPU (real GPU on the device).

Awkward shapes first: 1×1×1, a shape that is a multiple of no tile, K smaller than a tile,
non-square; then an exact small-integer test, where any wrong element is a bug, not rounding.
"""

import itertools
import threading

import numpy as np
import pytest

import tilegemm
from tilegemm import _cuda, registry, validate

cuda = _cuda.cuda  # a module global: the simulator swaps `cuda` in a kernel's globals

AWKWARD = [(1, 1, 1), (5, 23, 7), (17, 33, 65), (20, 12, 3), (40, 9, 70)]


def correct_kernels(backends=("simt", "cpu")):
    return [k.name for k in registry.all_kernels()
            if k.backend in backends and "broken" not in k.tags and k.supports("float32")]


@pytest.mark.parametrize("shape", AWKWARD, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("name", correct_kernels())
def test_awkward_shapes(name, shape):
    m, n, k = shape
    a, b = validate.random_operands(m, n, k, seed=m * 1000 + n)
    c = tilegemm.matmul(a, b, kernel=name)
    chk = validate.check(c, a, b, kernel=name)
    assert chk.ok, str(chk)


@pytest.mark.parametrize("name", correct_kernels())
def test_exact_small_integers(name):
    a, b = validate.integer_operands(19, 21, 37, seed=3)
    c = tilegemm.matmul(a, b, kernel=name)
    assert np.array_equal(c, (a.astype(np.int64) @ b.astype(np.int64)).astype(np.float32))


@pytest.mark.parametrize("name", [n for n in correct_kernels() if registry.get(n).supports("float64")])
def test_float64(name):
    a, b = validate.random_operands(9, 18, 33, "float64", seed=5)
    c = tilegemm.matmul(a, b, kernel=name)
    assert c.dtype == np.float64
    chk = validate.check(c, a, b, kernel=name)
    assert chk.ok, str(chk)


def test_every_kernel_declares_its_cost():
    for k in registry.all_kernels():
        s = 4
        assert k.flops(64, 32, 16) == 2 * 64 * 32 * 16
        traffic = k.traffic(64, 32, 16, s)
        assert traffic >= registry.bytes_compulsory(64, 32, 16, s), k.name
        assert k.intensity(64, 32, 16, s) > 0
        assert k.doc, f"{k.name} has no module docstring"


def test_traffic_formulas_order_the_rungs():
    """Design traffic falls rung by rung: naive 2MNK, tiled 2MNK/16 and /32, blocked 2MNK/64."""
    m = n = k = 1024
    t = {name: registry.get(name).traffic(m, n, k, 4) for name in
         ("naive", "smem_tiled_16", "smem_tiled_32", "register_blocked")}
    assert t["naive"] > t["smem_tiled_16"] > t["smem_tiled_32"] > t["register_blocked"]
    assert t["naive"] / t["smem_tiled_16"] == pytest.approx(16, rel=0.05)


def test_broken_kernel_is_registered_but_never_auto():
    k = registry.get("broken_nosync")
    assert k.teaching and k.auto_rank == 0
    for dt in ("float32", "float64"):
        a = np.ones((4, 4), dt)
        assert tilegemm.plan(a, a).kernel.name != "broken_nosync"


@pytest.mark.skipif(not _cuda.SIMULATOR, reason="the simulator's shared arrays; a GPU has real ones")
def test_every_thread_of_a_simulated_block_shares_one_array(monkeypatch):
    """The simulator hands a block's shared array to each thread by its declaring line. Here
    two threads are made to miss together: the allocation (np.empty of the array's shape)
    waits until both are inside it. Both must still end with the one array that landed first
    (numba-cuda 0.30 alone keeps each thread's own: the cause of a rare wrong row in CI)."""
    empty = np.empty
    both_inside = threading.Barrier(2, timeout=30)
    arrivals = itertools.count()

    def empty_meeting_the_other(shape, *args, **kwargs):
        # the shared array below (nothing else of the launch), and only its first two misses:
        # a third thread may miss too before either stores, and must not wait for a partner
        if shape == (4, 4) and next(arrivals) < 2:
            both_inside.wait()
        return empty(shape, *args, **kwargs)

    @cuda.jit
    def which(out):
        s = cuda.shared.array((4, 4), np.float32)
        s[0, cuda.threadIdx.x % 4] = cuda.threadIdx.x
        cuda.syncthreads()  # every thread's array is alive here: their ids cannot repeat
        out[cuda.threadIdx.x] = id(s)

    out = empty(32, np.int64)
    monkeypatch.setattr(np, "empty", empty_meeting_the_other)
    which[1, 32](out)
    monkeypatch.undo()
    assert len(set(out.tolist())) == 1, "threads of one block were given different shared arrays"
