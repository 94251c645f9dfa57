"""Distributed cases, run by tests/test_distributed.py in several processes (torchrun, or spawned).

    torchrun --nproc-per-node 4 tests/_dist_cases.py grid OUTDIR

Every rank builds the same global A and B (small integers: every product is exact in FP32), takes
its own blocks, runs the distributed product and compares its block of C with the single-process
A @ B exactly; it writes {case: "ok" | what failed} to OUTDIR/rank<r>.json.
"""

from __future__ import annotations

import datetime
import json
import os
import sys
import traceback

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src"))

from tilegemm import distributed as D  # noqa: E402


def operands(m, n, k, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed * 7919 + m * 31 + n * 17 + k)
    a = torch.randint(-3, 4, (m, k), generator=g).to(dtype)
    b = torch.randint(-3, 4, (k, n), generator=g).to(dtype)
    return a, b


def split(x, parts, dim):
    return torch.tensor_split(x, parts, dim=dim)


def check_1d(m, n, k, sharded, panel=None):
    rank, world = dist.get_rank(), dist.get_world_size()
    a, b = operands(m, n, k)
    a_r = split(a, world, 0)[rank].contiguous()
    b_r = split(b, world, 0)[rank].contiguous() if sharded else b
    c_r = D.matmul_1d(a_r, b_r, b_sharded=sharded, panel=panel)
    want = split(a.double() @ b.double(), world, 0)[rank]
    assert c_r.shape == want.shape and torch.equal(c_r.double(), want), (c_r.shape, want.shape)


def check_1d_after(m, n, k, panel, dtype=torch.float32, transport=None):
    """The 1-D loop with each panel's all-gather issued after the GEMM before it (ahead=False), and
    beside it (ahead=True), each twice in a row (the two buffers taken in turn); the products alone
    (communicate=False) on normal values: the layout's panels, each written once. On a GPU (NCCL's
    loop: transport "nccl") the side stream's packing and the all-gathers are ordered too."""
    from tilegemm.distributed._core import layout_1d, run_1d

    rank, world = dist.get_rank(), dist.get_world_size()
    dev = torch.device("cuda", torch.cuda.current_device()) if transport else torch.device("cpu")
    a, b = operands(m, n, k, seed=2, dtype=dtype)
    a_r, b_r = split(a, world, 0)[rank].contiguous().to(dev), split(b, world, 0)[rank].contiguous().to(dev)
    want = split(a.double() @ b.double(), world, 0)[rank]
    for ahead in (False, True):
        lay = layout_1d(a_r, b_r, panel=panel, transport=transport, ahead=ahead)
        assert lay.ahead == ahead and not lay.peer and len(lay.panels) == -(-n // panel), lay
        for _ in range(2):
            assert torch.equal(run_1d(a_r, b_r, lay).double().cpu(), want), ahead
        alone = run_1d(a_r, b_r, lay, communicate=False)
        assert alone.shape == want.shape and bool(torch.isfinite(alone).all()) and bool(alone.abs().sum() > 0)


def check_grid(m, n, k, pr, pc, panel=None):
    rank = dist.get_rank()
    i, j = divmod(rank, pc)
    a, b = operands(m, n, k, seed=1)
    a_blk = split(split(a, pr, 0)[i], pc, 1)[j].contiguous()  # A's K split over the grid's columns
    b_blk = split(split(b, pr, 0)[i], pc, 1)[j].contiguous()  # B's K split over its rows: other boundaries
    c_blk = D.summa(a_blk, b_blk, (pr, pc), panel=panel)
    want = split(split(a.double() @ b.double(), pr, 0)[i], pc, 1)[j]
    assert c_blk.shape == want.shape and torch.equal(c_blk.double(), want), (c_blk.shape, want.shape)


def check_refused(kind):
    """A shard that disagrees: every rank raises, naming the rank."""
    rank, world = dist.get_rank(), dist.get_world_size()
    a, b = operands(8, 6, 10)
    a_r, b_r = split(a, world, 0)[rank], split(b, world, 0)[rank]
    if rank == world - 1:
        a_r = a_r[:, :-1] if kind == "shape" else a_r.double()
    try:
        D.matmul_1d(a_r.contiguous(), b_r.contiguous())
    except D.DistributedError as e:
        assert f"rank {world - 1}" in str(e), str(e)
        return
    raise AssertionError("a disagreeing shard was not refused")


def check_dtensor_1d():
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    world = dist.get_world_size()
    mesh = init_device_mesh("cpu", (world,))
    a, b = operands(11, 7, 9, seed=2)
    want = a.double() @ b.double()
    for pa, pb in (([Shard(0)], [Shard(0)]), ([Shard(0)], [Replicate()]), ([Shard(1)], [Shard(0)]),
                   ([Replicate()], [Shard(1)])):
        for grid in [None, (world, 1), (1, world)] + ([(2, world // 2)] if world == 4 else []):
            c = D.matmul(distribute_tensor(a, mesh, pa), distribute_tensor(b, mesh, pb), grid=grid)
            assert tuple(c.placements) == (Shard(0),), c.placements
            assert torch.equal(c.full_tensor().double(), want), (pa, pb, grid)
    try:
        D.matmul(distribute_tensor(a, mesh, [Shard(0)]), distribute_tensor(b, mesh, [Shard(0)]), grid=(world + 1, 1))
    except D.DistributedError as e:
        assert "does not hold" in str(e), str(e)
    else:
        raise AssertionError("a grid that does not hold the mesh was taken")


def check_mesh_out_of_order():
    """Meshes whose order is not the ranks' order: places follow the mesh's coordinates, as
    DTensor's shard sizes do. (torch 2.13's distribute_tensor and full_tensor disagree with those
    sizes on a reversed 1-D mesh, so its DTensors are made and checked here shard by shard.)"""
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.tensor import DTensor, Shard, distribute_tensor

    world = dist.get_world_size()
    a, b = operands(13, 9, 11, seed=5)
    want = a.double() @ b.double()
    mesh1 = DeviceMesh("cpu", torch.arange(world).flip(0))
    q = mesh1.get_coordinate()[0]

    def rows(x):  # DTensor's Shard(0) piece of coordinate q (torch.chunk's sizes)
        step = -(-x.shape[0] // world)
        return x[q * step:(q + 1) * step].contiguous()

    def dt(x):
        return DTensor.from_local(rows(x), mesh1, [Shard(0)], shape=x.shape, stride=x.stride())

    for grid in [None, (world, 1), (1, world)] + ([(2, world // 2)] if world == 4 else []):
        c = D.matmul(dt(a), dt(b), grid=grid)
        assert torch.equal(c.to_local().double(), rows(want)), ("1-D mesh reversed", grid)
    if world == 4:
        mesh2 = DeviceMesh("cpu", torch.tensor([[0, 2], [1, 3]]))
        spec = [Shard(0), Shard(1)]
        c = D.matmul(distribute_tensor(a, mesh2, spec), distribute_tensor(b, mesh2, spec))
        assert torch.equal(c.full_tensor().double(), want), "2-D mesh [[0, 2], [1, 3]]"


def check_arguments_disagree():
    """Ranks called with different arguments, or one rank with a block that is not 2-D: refused
    on every rank (no rank left waiting in a collective), naming the rank."""
    rank, world = dist.get_rank(), dist.get_world_size()
    a, b = operands(8, 6, 10)
    a_r, b_r = split(a, world, 0)[rank].contiguous(), split(b, world, 0)[rank].contiguous()
    for what, call in (("panel", lambda: D.matmul_1d(a_r, b_r, panel=4 if rank == world - 1 else None)),
                       ("grid", lambda: D.summa(a_r, b_r, (world, 1) if rank != world - 1 else (1, world))),
                       ("not 2-D", lambda: D.matmul_1d(a_r.flatten() if rank == world - 1 else a_r, b_r))):
        try:
            call()
        except D.DistributedError as e:
            assert f"rank {world - 1}" in str(e), (what, str(e))
            continue
        raise AssertionError(f"{what}: ranks that disagree were not refused")


def check_transport():
    """The 1-D engine's transport on CPU processes: auto takes NCCL's (here gloo's) all-gather and
    gives the exact product; 'peer' (copy engines between the GPUs of one host) is refused on every
    rank with one clear error, for SUMMA too; an unknown transport is a ValueError before anything is sent."""
    from tilegemm.distributed._core import layout_1d, run_1d

    rank, world = dist.get_rank(), dist.get_world_size()
    a, b = operands(9, 7, 11, seed=5)
    a_r, b_r = split(a, world, 0)[rank].contiguous(), split(b, world, 0)[rank].contiguous()
    lay = layout_1d(a_r, b_r, transport="auto")
    assert not lay.peer
    want = (a.double() @ b.double())[blocks_of(9, world, rank)]
    assert torch.equal(run_1d(a_r, b_r, lay).double(), want)
    try:
        layout_1d(a_r, b_r, transport="peer")
    except D.DistributedError as e:
        assert "transport 'peer' needs every rank on a CUDA device of one host" in str(e), str(e)
    else:
        raise AssertionError("the peer transport was not refused on CPU processes")
    try:
        layout_1d(a_r, b_r, transport="nccl" if rank == world - 1 else "auto")
    except D.DistributedError as e:
        assert f"rank {world - 1} asked for transport 'nccl'" in str(e), str(e)
    else:
        raise AssertionError("ranks that asked for different transports were not refused")
    try:  # and SUMMA's (a 1 × world grid: A's K and B's columns over the ranks)
        D.summa(split(a, world, 1)[rank].contiguous(), split(b, world, 1)[rank].contiguous(), (1, world),
                transport="peer")
    except D.DistributedError as e:
        assert "transport 'peer' needs every rank on a CUDA device of one host" in str(e), str(e)
    else:
        raise AssertionError("SUMMA's peer transport was not refused on CPU processes")
    try:
        layout_1d(a_r, b_r, transport="smoke-signals")
    except ValueError as e:
        assert "transport 'smoke-signals': one of auto, peer, nccl" in str(e), str(e)
    else:
        raise AssertionError("an unknown transport was taken")


def refused(call, *says: str) -> None:
    """call() raises DistributedError on this rank, its message holding each of `says`."""
    try:
        call()
    except D.DistributedError as e:
        missing = [x for x in says if x not in str(e)]
        assert not missing, f"{missing} not in: {e}"
        return
    raise AssertionError(f"not refused (expected: {says})")


def strided(x: torch.Tensor, how: str) -> torch.Tensor:
    """x's values in a layout of other strides: "column-major", or "wider" (a slice of a wider
    tensor: rows contiguous, the row stride longer than a row)."""
    if how == "column-major":
        return x.t().contiguous().t()
    wide = torch.zeros((x.shape[0], x.shape[1] + 3), dtype=x.dtype)
    wide[:, 1:1 + x.shape[1]] = x
    return wide[:, 1:1 + x.shape[1]]


def check_strided_blocks():
    """Blocks of any strides, A's and B's: SUMMA on P × 1 (B's rows sent down the grid column) and
    1 × P (A's columns along the grid row), panels of the default width and of 2, and the 1-D
    engine with B sharded and replicated; every C exact, no block changed. gloo sends a tensor's
    memory as it lies: a strided B's rows were sent as raw memory, a wrong C and no error."""
    rank, world = dist.get_rank(), dist.get_world_size()
    a, b = operands(9, 7, 11, seed=13, dtype=torch.float64)
    want = a @ b  # (small integers: exact)
    for how in ("column-major", "wider"):
        for pr, pc in ((world, 1), (1, world)):
            i, j = divmod(rank, pc)
            a_blk = strided(split(split(a, pr, 0)[i], pc, 1)[j], how)
            b_blk = strided(split(split(b, pr, 0)[i], pc, 1)[j], how)
            assert not b_blk.is_contiguous() and not a_blk.is_contiguous()
            a0, b0 = a_blk.clone(), b_blk.clone()
            for panel in (None, 2):
                c = D.summa(a_blk, b_blk, (pr, pc), panel=panel)
                assert torch.equal(c, split(split(want, pr, 0)[i], pc, 1)[j]), (how, pr, pc, panel)
            assert torch.equal(a_blk, a0) and torch.equal(b_blk, b0), (how, pr, pc, "a block was changed")
        a_r, b_r = strided(split(a, world, 0)[rank], how), strided(split(b, world, 0)[rank], how)
        assert torch.equal(D.matmul_1d(a_r, b_r, panel=3), split(want, world, 0)[rank]), (how, "1-D")
        assert torch.equal(D.matmul_1d(a_r, strided(b, how), b_sharded=False), split(want, world, 0)[rank]), how


def check_engines_disagree():
    """Ranks that call different engines (matmul_1d with b_sharded differing, or SUMMA beside
    matmul_1d) are refused on every rank together, naming the rank; none waits in a collective
    the others skipped (rank 1 raised while rank 0 waited in an all-gather for good)."""
    rank, world = dist.get_rank(), dist.get_world_size()
    a, b = operands(8, 20, 6, dtype=torch.float64)
    a_r, b_r = split(a, world, 0)[rank].contiguous(), split(b, world, 0)[rank].contiguous()
    last = world - 1
    says = f"rank {last} called matmul_1d with b_sharded=False, rank 0 matmul_1d with b_sharded=True"
    refused(lambda: D.matmul_1d(a_r, b_r, b_sharded=rank != last), says)  # B's rows everywhere
    refused(lambda: D.matmul_1d(a_r, b_r if rank != last else b, b_sharded=rank != last), says)  # each as it says
    refused(lambda: D.summa(a_r, b_r, (world, 1)) if rank == 0 else D.matmul_1d(a_r, b_r),
            f"rank {last} called matmul_1d with b_sharded=True, rank 0 summa")
    assert torch.equal(D.matmul_1d(a_r, b_r), split(a @ b, world, 0)[rank])  # and the group is whole after them


def check_16bit_on_cpus():
    """float16 and bfloat16 blocks on CPUs (where tilegemm has no 16-bit kernel): refused on every
    rank before anything is sent, with one message, also where a rank holds no row of A (it
    multiplies nothing: it waited in the next all-gather while the rank with the row raised
    DTypeError). Where this machine runs them (host blocks with a CUDA GPU), the products are exact."""
    import tilegemm
    from tilegemm.errors import DTypeError

    rank, world = dist.get_rank(), dist.get_world_size()
    for dtype in (torch.float16, torch.bfloat16):
        probe = torch.empty((1, 1), dtype=dtype)
        try:
            tilegemm.plan(probe, probe)
            runs = True
        except DTypeError:
            runs = False
        a, b = operands(1, 33, 7, seed=14, dtype=dtype)  # one row of A: rank 1 holds none
        want = a.double() @ b.double()
        calls = [("1-D", lambda: D.matmul_1d(split(a, world, 0)[rank], split(b, world, 0)[rank], panel=8),
                  split(want, world, 0)[rank]),
                 ("1-D replicated", lambda: D.matmul_1d(split(a, world, 0)[rank], b, b_sharded=False),
                  split(want, world, 0)[rank]),
                 ("summa P x 1", lambda: D.summa(split(a, world, 0)[rank], split(b, world, 0)[rank], (world, 1)),
                  split(want, world, 0)[rank]),
                 ("summa 1 x P", lambda: D.summa(split(a, world, 1)[rank], split(b, world, 1)[rank], (1, world)),
                  split(want, world, 1)[rank])]
        name, everyone = str(dtype).removeprefix("torch."), ", ".join(map(str, range(world)))
        for what, call, mine in calls:
            if runs:
                assert torch.equal(call().double(), mine), (what, dtype)
            else:
                refused(call, f"ranks {everyone}: tilegemm has no kernel for {name} on the CPU",
                        "cast every rank's blocks to float32")


def check_grid_and_panel_out_of_range():
    """A grid entry or a panel that is not a positive integer: refused on every rank with a
    DistributedError naming it and the ranks (a bare ValueError or RuntimeError from deep inside,
    or, for the 1-D engine, taken silently, before), also where one rank alone passed it."""
    rank, world = dist.get_rank(), dist.get_world_size()
    a, b = operands(4, 5, 6, dtype=torch.float64)
    a_r, b_r = split(a, world, 0)[rank].contiguous(), split(b, world, 0)[rank].contiguous()
    everyone = ", ".join(map(str, range(world)))
    for grid in ((-1, -world), (-world, -1), (world, -1), (0, world), (world, 0)):
        refused(lambda: D.summa(a_r, b_r, grid), f"ranks {everyone} were called with grid {grid[0]}×{grid[1]}: a grid "
                "is a positive number")
    for panel in (-1, 0, 2.5):
        says = f"ranks {everyone} were called with panel {'(not an integer)' if panel == 2.5 else panel}: a panel is"
        refused(lambda: D.summa(a_r, b_r, (world, 1), panel=panel), says)
        refused(lambda: D.matmul_1d(a_r, b_r, panel=panel), says)
        refused(lambda: D.matmul_1d(a_r, b, b_sharded=False, panel=panel), says)
    last = world - 1
    refused(lambda: D.matmul_1d(a_r, b_r, panel=-1 if rank == last else None), f"rank {last} was called with panel -1")
    refused(lambda: D.summa(a_r, b_r, (-world, -1) if rank == last else (world, 1)),
            f"rank {last} was called with grid -{world}×-1")
    assert torch.equal(D.summa(a_r, b_r, (world, 1), panel=2), split(a @ b, world, 0)[rank])


def check_review_mistakes():
    """Found in review: zero-size products chosen by the cost model (a ZeroDivisionError), panels
    wider than K or N (buffers as wide as the panel: an allocator error), operands that require
    grad (one rank's AutogradError, the other rank, with no rows, waiting out the group's timeout),
    a bad transport or grid on one rank alone (the other waited in the metadata all-gather), and
    the DTensor API's panel and grid checks. Every rank refuses together, or every C is exact."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    rank, world = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh("cpu", (world,))
    # zero-size dimensions: the empty or all-zero C (the cost model divided 0 by 0)
    for m, n, k in ((0, 3, 4), (3, 0, 4), (3, 4, 0)):
        a, b = operands(m, n, k, dtype=torch.float64)
        for pb in (Shard(0), Shard(1)):
            for grid in (None, (1, world)):
                c = D.matmul(distribute_tensor(a, mesh, [Shard(0)]), distribute_tensor(b, mesh, [pb]), grid=grid)
                assert torch.equal(c.full_tensor(), a @ b), (m, n, k, pb, grid)
        c = D.summa(split(a, world, 1)[rank].contiguous(), split(b, world, 1)[rank].contiguous(), (1, world))
        assert torch.equal(c, split(a @ b, world, 1)[rank]), (m, n, k)
    # panels wider than K (SUMMA) or N (1-D): all of it, in buffers no wider
    a, b = operands(6, 5, 7, dtype=torch.float64)
    a_r, b_r = split(a, world, 0)[rank].contiguous(), split(b, world, 0)[rank].contiguous()
    for panel in (100, 10**12, 2**62):
        assert torch.equal(D.matmul_1d(a_r, b_r, panel=panel), split(a @ b, world, 0)[rank]), panel
        assert torch.equal(D.summa(a_r, b_r, (world, 1), panel=panel), split(a @ b, world, 0)[rank]), panel
        c = D.summa(split(a, world, 1)[rank].contiguous(), split(b, world, 1)[rank].contiguous(), (1, world),
                    panel=panel)
        assert torch.equal(c, split(a @ b, world, 1)[rank]), panel
    # operands that require grad: refused on every rank, also where a rank holds no row of A
    a1 = split(operands(1, 40, 6, dtype=torch.float64)[0], world, 0)[rank].clone().requires_grad_(True)
    b1 = split(operands(1, 40, 6, dtype=torch.float64)[1], world, 0)[rank].contiguous()
    everyone = ", ".join(map(str, range(world)))
    refused(lambda: D.matmul_1d(a1, b1, panel=8), f"ranks {everyone}: A or B requires grad")
    refused(lambda: D.summa(a1, b1, (world, 1), panel=2), f"ranks {everyone}: A or B requires grad")
    with torch.no_grad():
        D.matmul_1d(a1, b1, panel=8)  # (nothing recorded, nothing refused)
    # one rank alone with a transport or grid it cannot parse: the other refuses it too, at once
    last = world - 1
    try:
        D.matmul_1d(a_r, b_r, transport="smoke" if rank == last else None)
    except (ValueError, D.DistributedError) as e:  # the rank that asked: its own ValueError; the others: ours
        assert (f"rank {last} asked for a transport" in str(e)) if rank != last else "'smoke'" in str(e), str(e)
    else:
        raise AssertionError("a transport one rank could not parse was taken")
    refused(lambda: D.summa(a_r, b_r, (world,) if rank == last else (world, 1)),
            f"rank {last} was called with a grid that is not two integers")
    refused(lambda: D.summa(a_r, b_r, (world + 0.5, 1)), "were called with a grid that is not two integers")
    # the DTensor API: the panel checked on every path, the grid two integers
    A, B = distribute_tensor(a, mesh, [Shard(0)]), distribute_tensor(b, mesh, [Replicate()])
    refused(lambda: D.matmul(A, B, panel=-1), "called with panel -1")
    refused(lambda: D.matmul(A, distribute_tensor(b, mesh, [Shard(0)]), grid=(1.0, float(world))),
            "two positive integers")
    assert torch.equal(D.matmul(A, B).full_tensor(), a @ b)  # and the group is whole after them


def check_dual_and_negated_blocks():
    """A forward-mode AD dual block (A's or B's), on every rank or on one alone, refused on every
    rank, naming the ranks, before any block moves; a lazily negated block multiplied by its values,
    in both engines."""
    import torch.autograd.forward_ad as fwad

    rank, world = dist.get_rank(), dist.get_world_size()
    a, b = operands(12, 10, 8, dtype=torch.float64)
    a_r, b_r = split(a, world, 0)[rank].contiguous(), split(b, world, 0)[rank].contiguous()
    want = split(a @ b, world, 0)[rank]
    everyone, last = ", ".join(map(str, range(world))), world - 1
    with fwad.dual_level():
        dual = lambda x: fwad.make_dual(x, torch.ones_like(x))  # noqa: E731
        for x, y, who in ((a_r, dual(b_r), f"ranks {everyone}"), (dual(a_r), b_r, f"ranks {everyone}"),
                          (a_r, dual(b_r) if rank == last else b_r, f"rank {last}")):
            refused(lambda: D.matmul_1d(x, y), f"{who}: A or B is a forward-mode AD dual tensor")
            refused(lambda: D.summa(x, y, (world, 1)), f"{who}: A or B is a forward-mode AD dual tensor")
            refused(lambda: D.matmul_1d(x, y, b_sharded=False), f"{who}: A or B is a forward-mode AD dual tensor")
    neg = torch._neg_view
    assert torch.equal(D.matmul_1d(neg(a_r), b_r), -want) and torch.equal(D.matmul_1d(a_r, neg(b_r)), -want)
    assert torch.equal(D.summa(neg(a_r), neg(b_r), (world, 1)), want)


def check_dtensor_gradients():
    """A 1-D mesh's product with B Replicate() runs on each rank's rows, and records a gradient:
    A's and B's, C's requires_grad, the same as DTensor's own A @ B on the same DTensors gives,
    also where a rank holds no row of A. B's local gradient on a rank (A_r^T dC_r) is its part of
    the sum: it was declared Replicate(), so B.grad was each rank's part, wrong with no error; and
    a rank with no rows returned a C that did not require grad (its backward raised while the
    others waited in theirs)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    world = dist.get_world_size()
    mesh = init_device_mesh("cpu", (world,))
    for m, n, k in ((5, 3, 4), (1, 6, 3)):  # (1 row: rank 1 holds none)
        a, b = operands(m, n, k, seed=15, dtype=torch.float64)
        g = operands(m, n, 1, seed=16, dtype=torch.float64)[0].expand(m, n) + torch.arange(n)  # dC, distinct entries
        grads = []
        for multiply in (D.matmul, lambda x, y: x @ y):  # ours, then DTensor's own
            for pa in (Shard(0), Replicate()):
                A = distribute_tensor(a, mesh, [pa]).requires_grad_(True)
                B = distribute_tensor(b, mesh, [Replicate()]).requires_grad_(True)
                c = multiply(A, B)
                assert c.requires_grad and torch.equal(c.full_tensor(), a @ b), (m, pa, c.requires_grad)
                (c.full_tensor() * g).sum().backward()
                grads.append((A.grad.full_tensor(), B.grad.full_tensor()))
        for got, want in zip(grads, grads[2:]):
            assert torch.equal(got[0], want[0]) and torch.equal(got[0], g @ b.T), (m, n, k, "A's gradient")
            assert torch.equal(got[1], want[1]) and torch.equal(got[1], a.T @ g), (m, n, k, "B's gradient")


def check_dtensor_arguments_disagree():
    """The DTensor API's arguments that differ between ranks (a grid one rank names and the other
    not, grids that differ, one that does not hold the mesh or is not two integers on one rank,
    panels, placements, operands that do not multiply or lie on two meshes): refused on every rank
    together, naming the rank, before any block moves; a 3-D mesh in words.
    A rank that refused alone left the others waiting out the group's timeout; ranks that took
    different routes met in all-gathers of different lengths (rank 0 read the other's shapes as
    "float16", rank 1 died)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor

    rank, world = dist.get_rank(), dist.get_world_size()
    last = world - 1
    mesh = init_device_mesh("cpu", (world,))
    a, b = operands(6, 5, 4, dtype=torch.float64)
    A, B, Br = (distribute_tensor(a, mesh, [Shard(0)]), distribute_tensor(b, mesh, [Shard(0)]),
                distribute_tensor(b, mesh, [Replicate()]))
    mine = rank == last
    refused(lambda: D.matmul(A, B, grid=(world + 1, 1) if mine else None),
            f"rank {last} was called with grid {world + 1}×1", "rank 0 with no grid")
    refused(lambda: D.matmul(A, B, grid=(1, world) if mine else (world, 1)),
            f"rank {last} was called with grid 1×{world}", f"rank 0 with grid {world}×1")
    refused(lambda: D.matmul(A, Br, grid=(1, world) if mine else None), f"rank {last} was called with grid 1×{world}")
    refused(lambda: D.matmul(A, B, grid=(1.5, world) if mine else None),
            f"rank {last} was called with a grid that is not two integers")
    refused(lambda: D.matmul(A, B, grid=(world + 1, 1)), f"grid ({world + 1}, 1) does not hold the mesh's {world}")
    refused(lambda: D.matmul(A, B, panel=2 if mine else None), f"rank {last} was called with panel 2")
    # a B whose placement differs between the ranks (DTensor does not check what from_local is told)
    odd = DTensor.from_local(b if mine else split(b, world, 0)[rank], mesh, [Replicate()] if mine else [Shard(0)],
                             shape=b.shape, stride=b.stride())
    refused(lambda: D.matmul(A, odd), f"rank {last}: B is Replicate()", "rank 0's Shard(dim=0)")
    # A and B that do not multiply, or that lie on two meshes, on one rank alone (its global shape is
    # what from_local is told); on every rank
    narrow = DTensor.from_local(a[:, :3] if mine else a, mesh, [Replicate()])
    refused(lambda: D.matmul(narrow, Br), f"rank {last}: A 6×3 and B 4×5 do not multiply")
    flat = DTensor.from_local(a.flatten() if mine else a, mesh, [Replicate()])
    refused(lambda: D.matmul(flat, Br), f"rank {last}: A 1-D and B 4×5 do not multiply")
    refused(lambda: D.matmul(Br, Br), "rank 0: A 4×5 and B 4×5 do not multiply", f"rank {last}: A 4×5")
    mesh2 = init_device_mesh("cpu", (1, world))
    B2r = distribute_tensor(b, mesh2, [Replicate(), Replicate()])
    refused(lambda: D.matmul(A, B2r if mine else Br), f"rank {last}: A and B are on different device meshes")
    # a 1 × world mesh: the mesh is the grid
    A2, B2 = (distribute_tensor(x, mesh2, [Shard(0), Shard(1)]) for x in (a, b))
    refused(lambda: D.matmul(A2, B2, grid=(world, 1) if mine else None), f"rank {last} was called with grid {world}×1")
    mesh3 = init_device_mesh("cpu", (1, 1, world))  # (mesh_team's coordinates raised ValueError: unpacking three)
    refused(lambda: D.matmul(*(distribute_tensor(x, mesh3, [Shard(0)] * 3) for x in (a, b))), "a 3-D device mesh")
    assert torch.equal(D.matmul(A, B).full_tensor(), a @ b) and torch.equal(D.matmul(A2, B2).full_tensor(), a @ b)


def check_dtensors_given_to_the_engines():
    """DTensors passed to matmul_1d or summa (which take each rank's local blocks): refused on every
    rank in one sentence that says so, also where one rank alone passed one. Their global shapes
    were read as the blocks' (a refusal about K that named no DTensor), and the replicated 1-D
    product raised torch's RuntimeError from inside the local GEMM."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    rank, world = dist.get_rank(), dist.get_world_size()
    everyone, last = ", ".join(map(str, range(world))), world - 1
    mesh = init_device_mesh("cpu", (world,))
    a, b = operands(4, 3, 6, dtype=torch.float64)
    A, B, Br = (distribute_tensor(a, mesh, [Shard(0)]), distribute_tensor(b, mesh, [Shard(0)]),
                distribute_tensor(b, mesh, [Replicate()]))
    says = "A or B is a DTensor: matmul_1d and summa take each rank's local blocks"
    refused(lambda: D.matmul_1d(A, B), f"ranks {everyone}: {says}")
    refused(lambda: D.matmul_1d(A, Br, b_sharded=False), f"ranks {everyone}: {says}")
    refused(lambda: D.summa(A, B, (world, 1)), f"ranks {everyone}: {says}")
    refused(lambda: D.matmul_1d(A.to_local(), B if rank == last else B.to_local()), f"rank {last}: {says}")
    assert torch.equal(D.matmul_1d(A.to_local(), B.to_local()), split(a @ b, world, 0)[rank])



def check_grids_on_a_group_of_all_its_ranks():
    """SUMMA on a 1 × P or P × 1 grid of a group other than the default one (summa(group=), or a 1-D
    sub-mesh's DTensor product whose grid the cost model chose): the grid row or column is the whole
    group, so nothing is split and every C is exact. Both were refused as a group gloo cannot split
    (split_group: "No device associated with the default pg"), the DTensor product with no grid named."""
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.tensor import Shard, distribute_tensor

    from tilegemm.distributed.costmodel import choose, shipped

    rank, world = dist.get_rank(), dist.get_world_size()
    group = dist.new_group(list(range(world)))
    a, b = operands(5, 7, 3, dtype=torch.float64)
    for pr, pc in ((1, world), (world, 1)):
        i, j = divmod(rank, pc)
        c = D.summa(split(split(a, pr, 0)[i], pc, 1)[j].contiguous(), split(split(b, pr, 0)[i], pc, 1)[j].contiguous(),
                    (pr, pc), group=group)
        assert torch.equal(c, split(split(a @ b, pr, 0)[i], pc, 1)[j]), (pr, pc)
    # a 1-D mesh on a group other than the default one (as a 2-D mesh's sub-mesh is), the grid the cost model's
    mesh = DeviceMesh.from_group(group, "cpu")
    assert mesh.get_group(0) is group
    a, b = operands(1, 8, 1, seed=17, dtype=torch.float64)
    assert tuple(choose(1, 8, 1, world, shipped(8), 8)["grid"]) == (1, world)  # (what matmul will run)
    for grid in (None, (1, world)):
        c = D.matmul(distribute_tensor(a, mesh, [Shard(0)]), distribute_tensor(b, mesh, [Shard(0)]), grid=grid)
        assert torch.equal(c.full_tensor(), a @ b), grid


def check_dtensor_mistakes_on_one_rank():
    """A plain tensor beside a DTensor on one rank alone, or a DTensor of another dtype on one rank
    alone: refused on every rank together, naming the rank, before any block moves. The plain tensor's
    TypeError was raised on that rank alone (the other waited out the group's timeout in the arguments'
    all-gather); the other dtype reached DTensor's redistribution, where gloo aborted a process."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Shard, distribute_tensor

    rank, world = dist.get_rank(), dist.get_world_size()
    last, mine = world - 1, rank == world - 1
    mesh = init_device_mesh("cpu", (world,))
    a, b = operands(6, 5, 4, dtype=torch.float64)
    A, B = distribute_tensor(a, mesh, [Shard(0)]), distribute_tensor(b, mesh, [Shard(0)])
    for x, y in ((A, B.to_local() if mine else B), (A.to_local() if mine else A, B)):
        try:
            D.matmul(x, y)
        except TypeError as e:
            assert f"rank {last}: A or B is not a DTensor" in str(e) and "rank 0" not in str(e), str(e)
        else:
            raise AssertionError("a plain tensor on one rank was taken")
    A1 = distribute_tensor(a, mesh, [Shard(1)])  # (redistributed to rows first)
    if mine:
        A1 = DTensor.from_local(A1.to_local().float(), mesh, [Shard(1)], shape=a.shape, stride=a.stride())
    refused(lambda: D.matmul(A1, B), f"rank {last}: A is float32, rank 0's float64")
    assert torch.equal(D.matmul(A, B).full_tensor(), a @ b)  # and the group is whole after them


def check_different_calls_on_ranks():
    """distributed.matmul on one rank beside matmul_1d or summa on the others: refused on every rank,
    naming what each called. Their metadata rows were of different lengths, which gloo gathered
    without a word: each rank read the other's as its own kind and failed with an IndexError."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    rank, world = dist.get_rank(), dist.get_world_size()
    last, mine = world - 1, rank == world - 1
    mesh = init_device_mesh("cpu", (world,))
    a, b = operands(6, 5, 4, dtype=torch.float64)
    A, B = distribute_tensor(a, mesh, [Shard(0)]), distribute_tensor(b, mesh, [Shard(0)])
    a_r, b_r = A.to_local(), B.to_local()
    for engine in (lambda: D.matmul_1d(a_r, b_r), lambda: D.summa(a_r, b_r, (world, 1))):
        refused(lambda: D.matmul(A, B) if mine else engine(), f"rank {last} called tilegemm.distributed.matmul",  # noqa: B023
                "called matmul_1d or summa")
    assert torch.equal(D.matmul(A, B).full_tensor(), a @ b)  # and the group is whole after them


def check_a_block_that_is_no_tensor_on_one_rank():
    """matmul_1d (B sharded or replicated) and summa given a NumPy array or a list on one rank alone:
    every rank refuses together, naming that rank and argument (its AttributeError was raised on
    that rank alone, and the others waited out the group's timeout in the metadata all-gather)."""
    rank, world = dist.get_rank(), dist.get_world_size()
    last, mine = world - 1, rank == world - 1
    a, b = operands(6, 5, 4, dtype=torch.float64)
    a_r, b_r = split(a, world, 0)[rank].contiguous(), split(b, world, 0)[rank].contiguous()
    for which, calls in (("A", (lambda x: D.matmul_1d(x, b_r), lambda x: D.matmul_1d(x, b, b_sharded=False),
                                lambda x: D.summa(x, b_r, (world, 1)))),
                         ("B", (lambda x: D.matmul_1d(a_r, x), lambda x: D.matmul_1d(a_r, x, b_sharded=False),
                                lambda x: D.summa(a_r, x, (world, 1))))):
        for i, call in enumerate(calls):
            mine_x = (a_r if which == "A" else b_r if i != 1 else b)
            for other in (mine_x.numpy(), mine_x.tolist()):
                refused(lambda: call(other if mine else mine_x), f"rank {last}: {which} is not a torch tensor")
    assert torch.equal(D.matmul_1d(a_r, b_r), split(a @ b, world, 0)[rank])  # and the group is whole after them


def check_a_block_of_another_layout_on_one_rank():
    """matmul_1d (B sharded or replicated) and summa given, on one rank alone, a sparse block, A on
    the meta device or B on another device than A: every rank refuses together, naming that rank
    (that rank's LayoutError or DeviceError was raised there alone, after the metadata all-gather,
    and the others waited out the group's timeout in the product's first collective); a sparse B
    on every rank too (it was torch's bare NotImplementedError)."""
    rank, world = dist.get_rank(), dist.get_world_size()
    last, mine = world - 1, rank == world - 1
    a, b = operands(6, 5, 4, dtype=torch.float64)
    a_r, b_r = split(a, world, 0)[rank].contiguous(), split(b, world, 0)[rank].contiguous()
    engines = (lambda x, y: D.matmul_1d(x, y), lambda x, y: D.summa(x, y, (world, 1)))
    for x, y, whole, says in ((a_r.to_sparse(), b_r, b, "A is not a dense (strided) tensor"),
                              (a_r, b_r.to_sparse(), b.to_sparse(), "B is not a dense (strided) tensor"),
                              (a_r.to("meta"), b_r.to("meta"), b.to("meta"), "A is on the meta device"),
                              (a_r, b_r.to("meta"), b.to("meta"), "B is on another device than A")):
        for call in engines:
            refused(lambda: call(x if mine else a_r, y if mine else b_r), f"rank {last}: {says}")  # noqa: B023
        refused(lambda: D.matmul_1d(x if mine else a_r, whole if mine else b, b_sharded=False),  # noqa: B023
                f"rank {last}: {says}")
    refused(lambda: D.matmul_1d(a_r, b_r.to_sparse()), f"ranks {', '.join(map(str, range(world)))}: B is not a dense")
    assert torch.equal(D.matmul_1d(a_r, b_r), split(a @ b, world, 0)[rank])  # and the group is whole after them


def check_local_world_size_on_one_rank():
    """LOCAL_WORLD_SIZE that is not a number on one rank alone: its ConfigError was raised on that
    rank alone, reading the metadata (matmul_1d, summa) or choosing the grid (distributed.matmul),
    and the other waited out the group's timeout in the all-gather. Every rank refuses together."""
    import os

    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    rank, world = dist.get_rank(), dist.get_world_size()
    last, mine = world - 1, rank == world - 1
    a, b = operands(6, 5, 4, dtype=torch.float64)
    a_r, b_r = split(a, world, 0)[rank].contiguous(), split(b, world, 0)[rank].contiguous()
    mesh = init_device_mesh("cpu", (world,))
    A, B = distribute_tensor(a, mesh, [Shard(0)]), distribute_tensor(b, mesh, [Shard(0)])
    was = os.environ.get("LOCAL_WORLD_SIZE")
    if mine:
        os.environ["LOCAL_WORLD_SIZE"] = "two"
    try:
        says = f"rank {last}: LOCAL_WORLD_SIZE is not a whole number above 0"
        for call in (lambda: D.matmul_1d(a_r, b_r), lambda: D.matmul_1d(a_r, b, b_sharded=False),
                     lambda: D.summa(a_r, b_r, (world, 1)), lambda: D.matmul(A, B)):
            refused(call, says)
    finally:
        if was is None:
            os.environ.pop("LOCAL_WORLD_SIZE", None)
        else:
            os.environ["LOCAL_WORLD_SIZE"] = was
    assert torch.equal(D.matmul(A, B).full_tensor(), a @ b)  # and the group is whole after them


SPAWNED = {"strided blocks": check_strided_blocks, "engines disagree": check_engines_disagree,
           "16-bit on CPUs": check_16bit_on_cpus, "grid and panel out of range": check_grid_and_panel_out_of_range,
           "review mistakes": check_review_mistakes, "dual and negated blocks": check_dual_and_negated_blocks,
           "dtensor gradients": check_dtensor_gradients,
           "dtensor arguments disagree": check_dtensor_arguments_disagree,
           "dtensors given to the engines": check_dtensors_given_to_the_engines,
           "grids on a group of all its ranks": check_grids_on_a_group_of_all_its_ranks,
           "dtensor mistakes on one rank": check_dtensor_mistakes_on_one_rank,
           "a block that is no tensor on one rank": check_a_block_that_is_no_tensor_on_one_rank,
           "a block of another layout on one rank": check_a_block_of_another_layout_on_one_rank,
           "different calls on ranks": check_different_calls_on_ranks,
           "LOCAL_WORLD_SIZE on one rank": check_local_world_size_on_one_rank}


def blocks_of(m, world, rank):
    from tilegemm.distributed._core import blocks

    o = blocks(m, world)
    return slice(o[rank], o[rank + 1])


def check_relayout(m, n):
    """Rows in rank order -> columns in reverse rank order, and back: exact."""
    from tilegemm.distributed._core import blocks, relayout

    rank, world = dist.get_rank(), dist.get_world_size()
    x = operands(m, n, 1, seed=4)[0].reshape(m, 1).expand(m, n) + torch.arange(n)  # distinct columns
    ro, co = blocks(m, world), blocks(n, world)
    rows = [(ro[r], ro[r + 1], 0, n) for r in range(world)]
    cols = [(0, m, co[world - 1 - r], co[world - r]) for r in range(world)]
    mine = relayout(x[ro[rank]:ro[rank + 1]].contiguous(), rows, cols)
    assert torch.equal(mine, x[:, cols[rank][2]:cols[rank][3]]), (mine, cols[rank])
    back = relayout(mine, cols, rows)
    assert torch.equal(back, x[ro[rank]:ro[rank + 1]])


def check_dtensor_2d():
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    mesh = init_device_mesh("cpu", (2, dist.get_world_size() // 2))
    a, b = operands(13, 9, 11, seed=3)
    want = a.double() @ b.double()
    for pa, pb in (([Shard(0), Shard(1)], [Shard(0), Shard(1)]), ([Replicate(), Replicate()], [Shard(0), Replicate()])):
        c = D.matmul(distribute_tensor(a, mesh, pa), distribute_tensor(b, mesh, pb))
        assert tuple(c.placements) == (Shard(0), Shard(1)), c.placements
        assert torch.equal(c.full_tensor().double(), want), (pa, pb)


def check_peer(m, n, k, dtype, panel=None, kcuts=None):
    """The 1-D engine's peer transport on this rank's GPU (NCCL, one host): every rank's C rows
    exact against float64 (small integers, sums well inside the dtype's integers); kcuts: B's
    rows per rank (default torch.tensor_split's), uneven or empty."""
    from tilegemm.distributed._core import layout_1d

    rank, world = dist.get_rank(), dist.get_world_size()
    dev = torch.device("cuda", torch.cuda.current_device())
    a, b = operands(m, n, k, seed=6, dtype=dtype)
    a_r = split(a, world, 0)[rank].contiguous().to(dev)
    b_r = (torch.split(b, kcuts, 0) if kcuts else split(b, world, 0))[rank].contiguous().to(dev)
    b0 = b_r.clone()
    assert layout_1d(a_r, b_r, panel=panel, transport="auto").peer, "auto did not take the peer transport"
    c_r = D.matmul_1d(a_r, b_r, panel=panel, transport="peer")
    want = split(a.double() @ b.double(), world, 0)[rank]
    assert c_r.shape == want.shape and c_r.dtype == dtype and torch.equal(c_r.double().cpu(), want), (m, n, k, panel)
    assert torch.equal(b_r, b0), "B's rows were changed"


def check_peer_streams():
    """Peer products back to back, no wait between them, on two streams in turn, each with other
    values of B: each C exact (a product that overwrote a buffer another was still reading, on
    this rank or a peer, would show here)."""
    rank, world = dist.get_rank(), dist.get_world_size()
    dev = torch.device("cuda", torch.cuda.current_device())
    a, b = operands(48, 2000, 40, seed=9, dtype=torch.float16)
    a_r = split(a, world, 0)[rank].contiguous().to(dev)
    bs = [split(b + (i % 3) - 1, world, 0)[rank].contiguous().to(dev) for i in range(6)]
    streams = [torch.cuda.current_stream(), torch.cuda.Stream()]
    torch.cuda.synchronize()  # the operands are there; from here nothing orders one product after another but tilegemm
    got = []
    for i, b_i in enumerate(bs):
        with torch.cuda.stream(streams[i % 2]):
            got.append(D.matmul_1d(a_r, b_i, transport="peer"))
    torch.cuda.synchronize()
    for i, c_r in enumerate(got):
        want = split(a.double() @ (b + (i % 3) - 1).double(), world, 0)[rank]
        assert torch.equal(c_r.double().cpu(), want), f"product {i}"


def check_summa_peer(m, n, k, pr, pc, dtype, panel=None, transport="auto"):
    """SUMMA's peer transport on this rank's GPU: every rank's C block exactly float64's product
    rounded once to the dtype (small integers: FP32's sums are exact, so one rounding is all a
    right product can differ by); torch.tensor_split's blocks (A's K over the grid's columns, B's
    over its rows, other boundaries); auto takes the copy engines for 16-bit blocks with 16-byte
    rows."""
    from tilegemm.distributed._core import layout

    rank = dist.get_rank()
    i, j = divmod(rank, pc)
    dev = torch.device("cuda", torch.cuda.current_device())
    a, b = operands(m, n, k, seed=8, dtype=dtype)
    a_blk = split(split(a, pr, 0)[i], pc, 1)[j].contiguous().to(dev)
    b_blk = split(split(b, pr, 0)[i], pc, 1)[j].contiguous().to(dev)
    a0, b0 = a_blk.clone(), b_blk.clone()
    aligned = dtype.itemsize == 2 and all(x.shape[1] % 8 == 0 for x in [*split(a, pc, 1), *split(b, pc, 1)]) \
        and all(x.shape[0] % 8 == 0 for x in split(b, pr, 0))
    assert layout(a_blk, b_blk, (pr, pc), panel=panel, transport=transport).peer == (aligned or transport == "peer")
    c_blk = D.summa(a_blk, b_blk, (pr, pc), panel=panel, transport=transport)
    want = split(split(a.double() @ b.double(), pr, 0)[i], pc, 1)[j]
    assert c_blk.shape == want.shape and c_blk.dtype == dtype and torch.equal(c_blk.cpu(), want.to(dtype)), \
        (m, n, k, pr, pc, panel)
    assert torch.equal(a_blk, a0) and torch.equal(b_blk, b0), "an operand's block was changed"


def check_summa_peer_streams(pr, pc):
    """SUMMA peer products back to back on two streams in turn, other values each: each C exact."""
    rank = dist.get_rank()
    i, j = divmod(rank, pc)
    dev = torch.device("cuda", torch.cuda.current_device())
    a, b = operands(96, 2000, 48, seed=10, dtype=torch.float16)
    blk = lambda x, t: split(split(x, pr, 0)[i], pc, 1)[j].contiguous().to(dev)  # noqa: E731
    a_blk = blk(a, 0)
    bs = [blk(b + (t % 3) - 1, t) for t in range(6)]
    streams = [torch.cuda.current_stream(), torch.cuda.Stream()]
    torch.cuda.synchronize()
    got = []
    for t, b_t in enumerate(bs):
        with torch.cuda.stream(streams[t % 2]):
            got.append(D.summa(a_blk, b_t, (pr, pc), panel=16, transport="peer"))
    torch.cuda.synchronize()
    for t, c_blk in enumerate(got):
        want = split(split(a.double() @ (b + (t % 3) - 1).double(), pr, 0)[i], pc, 1)[j]
        assert torch.equal(c_blk.cpu(), want.to(torch.float16)), f"product {t}"


def check_peer_graphs(engine: str):
    """A product repeated on the same operands: its device work captured as a CUDA graph (a key
    that comes back) and replayed from then on (tilegemm.distributed._core._Graphs), on the 1-D
    engine and SUMMA 1 × P: every C exact, also after A's values change in place (a replay reads
    them where they lie), and the products alone (communicate=False, captured the same way) give
    the product's C from the buffer it filled."""
    from tilegemm.distributed import _core

    rank, world = dist.get_rank(), dist.get_world_size()
    dev = torch.device("cuda", torch.cuda.current_device())
    a, b = operands(64, 4096, 96, seed=12, dtype=torch.float16)
    if engine == "1d":
        a_r, b_r = split(a, world, 0)[rank].contiguous().to(dev), split(b, world, 0)[rank].contiguous().to(dev)
        lay = _core.layout_1d(a_r, b_r, transport="peer")
        go = lambda communicate=True: _core.run_1d(a_r, b_r, lay, communicate=communicate)  # noqa: E731
        mine = lambda x: split(x, world, 0)[rank]  # noqa: E731
    else:  # 1 × P: A's K over the ranks, B's columns
        a_r, b_r = split(a, world, 1)[rank].contiguous().to(dev), split(b, world, 1)[rank].contiguous().to(dev)
        lay = _core.layout(a_r, b_r, (1, world), transport="peer")
        go = lambda communicate=True: _core.run(a_r, b_r, lay, communicate=communicate)  # noqa: E731
        mine = lambda x: split(x, world, 1)[rank]  # noqa: E731
    assert lay.peer, "not the peer transport"
    for t in range(8):
        if t == 6:
            a_r.add_(1)  # in place: the captured graphs read the new values
            a = a + 1
        c = go()
        assert torch.equal(c.double().cpu(), mine(a.double() @ b.double())), f"{engine} product {t}"
        del c  # (the next C where this one was: the same operands' addresses again)
    graphs = [p.graphs.graphs for m in _core._PEER.values() for p in m.plans.values()]
    assert any(graphs), f"{engine}: no product was captured"
    last = go()
    for t in range(4):
        alone = go(communicate=False)
        assert torch.equal(alone, last), f"{engine} products alone {t}"
        del alone
    assert _core._ALONE.graphs, f"{engine}: the products alone were not captured"
    torch.cuda.synchronize()


def check_failed_capture():
    """A capture whose body raises (with the copy stream forked into it, which _record joins back)
    warns, turns capturing off, leaves the capture stream not capturing and the allocator as it
    was (blocks freed with record_stream are reused after it); products are exact after it. (A
    capture that fails at capture_end itself, its pool handed back by _record, is not made here:
    in torch 2.11 it leaves the device's CUDA random generator capturing, so that every later
    random op on it raises; docs/perf-notes.md, 95.)"""
    import warnings

    from tilegemm.distributed import _core

    dev = torch.device("cuda", torch.cuda.current_device())

    def body():
        _core._copy_stream(dev).wait_stream(torch.cuda.current_stream(dev))
        raise RuntimeError("a body that fails mid-capture")

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert _core._Graphs()._capture("key", body, dev) is None
    try:
        assert _core.GRAPHS == [False] and any("could not be captured" in str(w.message) for w in seen)
        side = torch.cuda.Stream(dev)
        torch.cuda.synchronize()
        before = torch.cuda.memory_reserved(dev)
        for _ in range(20):
            x = torch.empty(16 << 20, dtype=torch.float32, device=dev)  # 64 MiB
            x.record_stream(side)
            del x
        torch.cuda.synchronize()
        grown = (torch.cuda.memory_reserved(dev) - before) >> 20
        assert grown <= 256, f"{grown} MiB reserved after a failed capture: freed blocks were held back"
        with torch.cuda.stream(_core._capture_stream(dev)):
            assert not torch.cuda.is_current_stream_capturing(), "the capture stream was left capturing"
        check_peer(64, 4096, 96, torch.float16)
    finally:
        _core.GRAPHS[0] = True


def check_dtensor_2d_peer():
    """A 2-D device mesh of GPUs: SUMMA over the mesh's own row and column groups, the copy engines
    between them; C exact and Shard(0), Shard(1)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    world = dist.get_world_size()
    mesh = init_device_mesh("cuda", (2, world // 2))
    a, b = operands(256, 512, 128, seed=11, dtype=torch.bfloat16)
    want = a.double() @ b.double()
    c = D.matmul(distribute_tensor(a, mesh, [Shard(0), Shard(1)]), distribute_tensor(b, mesh, [Shard(0), Shard(1)]))
    assert tuple(c.placements) == (Shard(0), Shard(1)), c.placements
    assert torch.equal(c.full_tensor().cpu(), want.to(torch.bfloat16))


def summa_peer_cases(world: int):
    """SUMMA on GPUs by the copy engines: every flat grid (one-sided and two-sided steps), named
    and default steps, ragged blocks (explicit peer), a rank with no rows, FP32, a grown buffer,
    two streams, a 2-D DTensor mesh."""
    f16, bf16 = torch.float16, torch.bfloat16
    grids = [(1, world), (world, 1)] + ([(2, world // 2)] if world % 2 == 0 and world > 2 else [])
    out = []
    for pr, pc in grids:
        g = f"{pr}x{pc}"
        out += [(f"summa peer {g} {s} {str(d)[6:]} panel {p} {t}", lambda s=s, d=d, p=p, t=t, pr=pr, pc=pc:
                 check_summa_peer(*s, pr, pc, d, panel=p, transport=t))
                for s, d, p, t in [((64, 4096, 96), f16, None, "auto"), ((300, 520, 64), bf16, 64, "auto"),
                                   ((37, 1000, 29), f16, None, "peer"), ((37, 1000, 29), f16, 24, "peer"),
                                   ((1, 64, 16), f16, None, "auto"), ((40, 72, 24), torch.float32, 16, "peer"),
                                   ((130, 264, 8200), bf16, None, "auto"), ((0, 64, 16), f16, None, "peer"),
                                   ((8, 0, 16), f16, None, "peer"), ((1, 1, 16), f16, 16, "peer")]]
        out += [(f"summa peer {g} grown, then smaller again", lambda pr=pr, pc=pc: [
            check_summa_peer(512, 8192, 256, pr, pc, f16), check_summa_peer(16, 64, 32, pr, pc, f16)]),
                (f"summa peer {g} on two streams in turn", lambda pr=pr, pc=pc: check_summa_peer_streams(pr, pc))]
    return out + [("dtensor 2-D mesh, peer", check_dtensor_2d_peer)] * (world % 2 == 0 and world > 2) \
        + [("peer buffers released, then products again", check_released)]


def check_released():
    """release_buffers frees every mapped pair on every rank; the next products map new ones, exact."""
    from tilegemm.distributed import _core

    world = dist.get_world_size()
    check_summa_peer(64, 4096, 96, 1, world, torch.float16)
    assert _core._PEER, "no mapped buffer was kept"
    D.release_buffers()
    assert not _core._PEER, "mapped buffers were kept after release_buffers"
    check_summa_peer(64, 4096, 96, 1, world, torch.float16)
    check_peer(64, 4096, 96, torch.float16)


def peer_cases(world: int):
    """On GPUs: panels of every width, a narrow last panel, uneven and empty rows of B, a product
    that grows the mapped buffer, then smaller ones in it again, and both 16-bit dtypes."""
    f16, bf16 = torch.float16, torch.bfloat16
    uneven = [3 + 5 * r for r in range(world)]  # K = 3 + 8 + ... : every rank a different share
    empty = [0] + [40] * (world - 1)  # rank 0 holds no rows of B
    return [(f"peer {s} {str(d)[6:]} panel {p}", lambda s=s, d=d, p=p: check_peer(*s, d, panel=p))
            for s, d, p in [((64, 4096, 96), f16, None), ((37, 1000, 29), f16, 24), ((5, 3000, 7), bf16, 1024),
                            ((512, 8200, 64), f16, None), ((300, 5000, 24), bf16, None), ((1, 64, 8), f16, 16)]] \
        + [("peer uneven rows of B", lambda: check_peer(50, 777, sum(uneven), f16, panel=200, kcuts=uneven)),
           ("peer a rank with no rows of B", lambda: check_peer(9, 300, sum(empty), f16, kcuts=empty)),
           ("peer grown, then smaller again", lambda: [check_peer(256, 16384, 128, f16), check_peer(8, 96, 16, f16)]),
           ("peer products on two streams in turn", check_peer_streams),
           ("peer products repeated: captured and replayed", lambda: check_peer_graphs("1d")),
           ("summa peer products repeated: captured and replayed", lambda: check_peer_graphs("summa")),
           ("a failed capture: warned, capturing off, the allocator whole", check_failed_capture),
           ("nccl 1-D gathered after and beside each GEMM", lambda: check_1d_after(96, 200, 64, 48, f16, "nccl"))] \
        + summa_peer_cases(world)


def cases(which: str, world: int):
    out = {
        "1d": [(f"1d sharded {s}", lambda s=s: check_1d(*s, True)) for s in
               [(7, 5, 13), (1, 3, 2), (0, 4, 5), (5, 0, 3), (9, 4, 0), (17, 23, 29)]]
        + [(f"1d replicated {s}", lambda s=s: check_1d(*s, False)) for s in [(7, 5, 13), (1, 3, 2)]]
        + [("1d sharded, panels of 3", lambda: check_1d(12, 8, 31, True, panel=3))]
        + [("1d gathered after each GEMM", lambda: check_1d_after(12, 19, 31, 8))]
        + [("refused: a shape", lambda: check_refused("shape")), ("refused: a dtype", lambda: check_refused("dtype"))]
        + [("dtensor 1-D mesh", check_dtensor_1d), ("meshes out of order", check_mesh_out_of_order),
           ("arguments that disagree", check_arguments_disagree), ("the 1-D transport", check_transport)]
        + [(f"relayout {s}", lambda s=s: check_relayout(*s)) for s in [(5, 7), (2, 9), (9, 1)]],
        "grid": [(f"summa {g} {s}", lambda g=g, s=s: check_grid(*s, *g)) for g in
                 [(world // c, c) for c in range(1, world + 1) if world % c == 0]  # every grid
                 for s in [(7, 5, 13), (3, 2, 17), (1, 1, 1), (13, 11, 7)]]
        + [("summa 2x2 panels of 2", lambda: check_grid(10, 6, 19, 2, world // 2, panel=2))] * (world == 4)
        + [("dtensor 2-D mesh", check_dtensor_2d)] * (world % 2 == 0 and world > 2),
    }
    if which == "peer":
        return peer_cases(world)
    return out[which] if which != "all" else out["1d"] + out["grid"]


def run(which: str, outdir: str) -> None:
    rank, world = dist.get_rank(), dist.get_world_size()
    results = {}
    for name, fn in cases(which, world):
        try:
            fn()
            results[name] = "ok"
        except Exception:  # noqa: BLE001  (reported to the test)
            results[name] = traceback.format_exc()[-1500:]
    with open(os.path.join(outdir, f"rank{rank}.json"), "w") as f:
        json.dump(dict(world=world, results=results), f)


def killed(rank: int, world: int, store: str, outdir: str, how: str) -> None:
    """Spawned: rank 1 dies before the product ("dies-before"), dies after its first panel
    ("dies-during"), or never calls ("stalls", alive); the others must raise DistributedError
    within the group's timeout, never hang and never return a C."""
    import time

    from tilegemm.distributed import _core

    _meet(store, rank, world, seconds=10)
    a, b = operands(64, 32, 48)
    dist.barrier()
    if rank == 1 and how == "dies-before":
        os._exit(3)
    if rank == 1 and how == "stalls":  # alive, never calling, past the others' 10 s timeout: until
        # both have written their verdicts (at most 25 s), so the case waits for no more than that
        end = time.monotonic() + 25
        while time.monotonic() < end and not all(
                os.path.exists(os.path.join(outdir, f"{how}{r}.txt")) for r in (0, 2)):
            time.sleep(0.2)
        os._exit(0)
    if rank == 1 and how == "dies-during":
        real = _core._product

        def multiply_then_die(*args):
            real(*args)
            os._exit(3)

        _core._product = multiply_then_die
    start = time.perf_counter()
    try:
        D.matmul_1d(split(a, world, 0)[rank].contiguous(), split(b, world, 0)[rank].contiguous(), panel=8)
        verdict = "returned a result"
    except D.DistributedError as e:
        verdict = "DistributedError: " + str(e)[:300]
    except Exception as e:  # noqa: BLE001
        verdict = f"{type(e).__name__}: {e}"[:300]
    with open(os.path.join(outdir, f"{how}{rank}.txt"), "w") as f:
        f.write(f"{time.perf_counter() - start:.1f} s: {verdict}")
    os._exit(0)


def reinit(rank: int, world: int, stores: list[str], outdir: str) -> None:
    """Spawned: SUMMA, then the world destroyed and made again (as an elastic restart does), then
    SUMMA again: the second product must run on the new world's groups, not the destroyed ones."""
    verdicts = []
    for store in stores:
        _meet(store, rank, world, seconds=30)
        try:
            check_grid(7, 5, 13, world, 1)
            verdicts.append("ok")
        except Exception as e:  # noqa: BLE001  (reported to the test)
            verdicts.append(f"{type(e).__name__}: {e}"[:300])
        dist.destroy_process_group()
    with open(os.path.join(outdir, f"reinit{rank}.txt"), "w") as f:
        f.write("\n".join(verdicts))
    os._exit(0)


def spawned(rank: int, world: int, store: str, outdir: str, case: str) -> None:
    """Spawned: one case of SPAWNED on `world` gloo ranks whose group times out after 10 s, so that
    a rank left waiting in a collective fails the case within it instead of hanging; writes
    OUTDIR/<case><rank>.txt: "ok" or what failed."""
    _meet(store, rank, world, seconds=10)
    try:
        SPAWNED[case]()
        verdict = "ok"
    except Exception:  # noqa: BLE001  (reported to the test)
        verdict = traceback.format_exc()[-1500:]
    with open(os.path.join(outdir, f"{case}{rank}.txt"), "w") as f:
        f.write(verdict)
    try:  # (no rank leaves while another may still read from it)
        dist.barrier()
        dist.destroy_process_group()
    except Exception:  # noqa: BLE001,S110  (a case that failed may have broken the group: its verdict is written)
        pass
    os._exit(0)


def _meet(store: str, rank: int, world: int, seconds: float) -> None:
    """The gloo group of spawned ranks, met through the file `store` (one that no earlier group
    used): a free port picked and handed to the ranks could be taken meanwhile by another
    process (the other test shard's), and then every rank but the one that failed to bind it
    waited out its timeout."""
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=seconds))


if __name__ == "__main__" and sys.argv[1] == "reinit":
    import multiprocessing as mp

    stores = [os.path.join(sys.argv[2], f"store-world{w}") for w in (1, 2)]  # a new store for each world
    procs = [mp.get_context("spawn").Process(target=reinit, args=(r, 2, stores, sys.argv[2])) for r in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    hung = [r for r, p in enumerate(procs) if p.is_alive()]
    for r in hung:
        procs[r].kill()
    print("hung ranks:", hung)
    sys.exit(0)

if __name__ == "__main__" and sys.argv[1] == "spawned":  # OUTDIR CASE: one case of SPAWNED on 2 ranks
    import multiprocessing as mp
    import time

    store = os.path.join(sys.argv[2], "store")
    procs = [mp.get_context("spawn").Process(target=spawned, args=(r, 2, store, sys.argv[2], sys.argv[3]))
             for r in range(2)]
    for p in procs:
        p.start()
    deadline = time.monotonic() + 60  # the group's timeout is 10 s: a rank alive after this hangs
    for p in procs:
        p.join(timeout=max(0.0, deadline - time.monotonic()))
    hung = [r for r, p in enumerate(procs) if p.is_alive()]
    for r in hung:
        procs[r].kill()
    print("hung ranks:", hung)
    sys.exit(0)

if __name__ == "__main__" and sys.argv[1] == "killed":
    import multiprocessing as mp

    store = os.path.join(sys.argv[2], "store")
    procs = [mp.get_context("spawn").Process(target=killed, args=(r, 3, store, sys.argv[2], sys.argv[3]))
             for r in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=60)  # the group's timeout is 10 s: a rank still alive after this hangs
    hung = [r for r, p in enumerate(procs) if p.is_alive()]
    for r in hung:
        procs[r].kill()
    print("hung ranks:", hung)
    sys.exit(0)

if __name__ == "__main__" and sys.argv[1] == "peer":  # one GPU a rank, NCCL
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=120))
    run("peer", sys.argv[2])
    dist.barrier()
    dist.destroy_process_group()
    os._exit(0)

if __name__ == "__main__":
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    run(sys.argv[1], sys.argv[2])
    dist.barrier()
    dist.destroy_process_group()
    # Leave without the interpreter's finalization. Once in CI a rank aborted with "terminate
    # called without an active exception" 0.3-0.4 s after the last DTensor case began, about when
    # the cases end and this teardown runs: the form torch's gloo threads take when one of them
    # needs the GIL while the interpreter finalizes (pytorch/pytorch#190489, #179291). What this
    # harness tests, every rank's results, is written and closed before this line; an abort
    # during the cases still fails the test (faulthandler then prints every thread's stack), and
    # one in destroy_process_group is judged by those results (test_distributed._ended_well).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
