"""`tilegemm dist-bench`: the distributed products against PyTorch's own, in one run.

    tilegemm dist-bench --json results/h200x2/scaleout.json     # every GPU of this host, NCCL
    torchrun --nnodes 2 ... -m tilegemm.bench.distributed ...   # several hosts: one process a GPU
    tilegemm dist-bench                                          # no GPU: gloo, 2 CPU processes, small

One process per GPU (spawned here, or the processes torchrun started). Per square size N (M = N =
K, BF16 on GPUs, FP32 on CPUs), every mode in the same run, each figure the median over `--runs`
runs of the median of its timed repeats:
- one-gpu: rank 0 alone multiplies the whole A @ B with torch.mm (cuBLAS: the reference every
  speed-up is against) and, as `one-gpu/tilegemm`, with tilegemm.matmul;
- 1d: tilegemm.distributed.matmul_1d, A's and B's rows split over the ranks, with its default
  transport (the copy engines on the GPUs of one host; the record's `transport` says which ran),
  and on GPUs `1d/nccl`: the same engine with NCCL's all-gather;
- summa: tilegemm.distributed.summa on every grid but P × 1 (1 × 2 on 2 GPUs; 1 × 4 and 2 × 2 on
  4; 1 × 8, 2 × 4 and 4 × 2 on 8), with its default transport (the copy engines on the GPUs of one
  host, gathering each rank's row block of A and column block of B; NCCL's or gloo's broadcasts
  of K panels elsewhere; the record's `transport` says which ran);
- dtensor: DTensor's own A Shard(0) @ B Shard(0) (it all-gathers B, then multiplies);
- dtensor-rs: DTensor's A Shard(1) @ B Shard(0), its partial sums reduce-scattered to Shard(0);
- host-split: one process drives every GPU (tilegemm.matmul(a, b, devices="all")), A and B on
  cuda:0 and C returned there, every copy counted, against that process's own one-GPU torch.mm in
  the same run, both timed back to back (as a caller's loop makes them); efficiency against each
  GPU's rows multiplied alone, all at once, with nothing copied, timed in turn with the split, over
  the split's time in turn with them (`in_turn_ms`, recorded beside its back-to-back time); and
  host-split/numpy: FP16 NumPy A and B in, NumPy C out (sizes NUMPY_SIZES), against one GPU's
  torch round trip (to the device, torch.mm, back), with the copy share (1 − the same
  product's time from CUDA operands / its time from NumPy). It runs after the ranks have ended;
- fused-ag-mm: torch.ops.symm_mem.fused_all_gather_matmul (A's rows gathered, B's columns split),
  where this torch has it (NCCL only);
- beyond (--beyond, default on GPUs): 1d at the size whose A, B and C together exceed by 25% the
  memory of one GPU (on 2 GPUs) or of half the GPUs (from 4), the operands made shard by shard on
  their devices (no one-gpu there, and no SUMMA: neither its FP32 partial sums, twice C's block,
  nor the copy engines' two gathered row blocks of A and column blocks of B fit beside A, B and C
  at that size); one timed repeat a run after the warm call, the products alone right after it
  with none.
Before the sizes, the links as the engines use them: an all-gather and a broadcast of 1 GiB over
every rank (bus bandwidth) and a one-element all-gather (a ring step's latency), which the cost
model beside the run takes; rank 0 records `nvidia-smi topo -m`.
A repeat's time is the slowest rank's, from a barrier to its synchronize. Efficiency is the same
local products alone over the product's time (for 1d and summa: the engine's panel loop with
nothing sent; for the peers: their local torch.mm); comm_share = 1 − efficiency, the share of the
time that communication added. Every mode's C is checked on every rank (a corner of each rank's
block of C against float64) in the first run; a failed check is recorded and the figure dropped.
"""

from __future__ import annotations

import datetime
import functools
import json
import math
import os
import statistics
import sys
import time

from .. import env
from ..argtypes import positive_float, positive_int
from ..sampling import paired_ratio
from . import results

GPU_SIZES = (8192, 16384, 32768, 65536)
RANK_BYTES = 300 * 2**20  # a CPU rank's memory before its products, about (torch and tilegemm.distributed loaded:
# 0.24 GB resident on a CPU build of torch)
CPU_SIZES = (96, 160)
MODES = ("one-gpu", "host-split", "1d", "summa", "dtensor", "dtensor-rs", "fused-ag-mm")
NUMPY_SIZES = (16384, 32768)  # host-split/numpy: NumPy FP16 in and out (NumPy has no BF16)
QUIET_MULTICAST = dict(NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1", NVSHMEM_DISABLE_NVLS="1")
CHUNK = 1024  # operands are made in row chunks of this many rows, each from its own seed


def summa_grids(p: int) -> list[tuple[int, int]]:
    """Every pr × pc = p grid with pc > 1 (P × 1 is the 1-D engine's), flattest first: 1 × 2 for 2;
    1 × 4 and 2 × 2 for 4; 1 × 8, 2 × 4 and 4 × 2 for 8 (a grid and its transpose move the same
    bytes, but not from the same ranks: the eight-GPU issue asks for both)."""
    return [(p // c, c) for c in range(p, 1, -1) if p % c == 0]


def beyond_gpus(world: int) -> int:
    """How many GPUs' memory the product beyond them exceeds: one on 2 GPUs, half of them from 4."""
    return max(1, world // 2)


def _blocks(total: int, parts: int) -> list[int]:
    from ..distributed._core import blocks

    return blocks(total, parts)


class _Operands:
    """A and B of size N, any rows of either made on demand on a device, the same on every rank:
    row chunk c of matrix `which` comes from seed (which, N, c), so no rank ever holds more than
    it uses and every rank can make the rows a check needs."""

    def __init__(self, n: int, dtype, device):
        self.n, self.dtype, self.device = n, dtype, device

    def rows(self, which: int, r0: int, r1: int, c0: int = 0, c1: int | None = None):
        import torch

        c1 = self.n if c1 is None else c1
        out = torch.empty((r1 - r0, c1 - c0), dtype=self.dtype, device=self.device)
        g = torch.Generator(device=self.device)
        for c in range(r0 // CHUNK, -(-r1 // CHUNK)):
            lo, hi = max(r0, c * CHUNK), min(r1, (c + 1) * CHUNK)
            g.manual_seed((which * 1_000_003 + self.n) * 100_003 + c)
            chunk = torch.randn((CHUNK, self.n), generator=g, device=self.device, dtype=torch.float32)
            out[lo - r0:hi - r0] = chunk[lo - c * CHUNK:hi - c * CHUNK, c0:c1].to(self.dtype)
        return out


def _check(ops: _Operands, c, r0: int, c0: int) -> float:
    """Relative error of a corner (≤ 64 × 64) of this rank's block of C, which starts at (r0, c0),
    against float64 from the same operands' rows."""
    import torch

    h, w = min(64, c.shape[0]), min(64, c.shape[1])
    if h == 0 or w == 0:
        return 0.0
    a = ops.rows(0, r0, r0 + h).double()
    b = torch.cat([ops.rows(1, k, min(ops.n, k + CHUNK), c0, c0 + w) for k in range(0, ops.n, CHUNK)]).double()
    want = a @ b
    err = float((c[:h, :w].double() - want).norm() / want.norm())
    return err if math.isfinite(err) else math.inf  # a NaN (memory never written) fails the check


def _tolerance(dtype) -> float:
    import torch

    return 2e-2 if dtype in (torch.bfloat16, torch.float16) else 1e-5


def _in_turn(reps: int, fn, local) -> tuple[list[float], list[float]]:
    """reps timed calls of each of fn and local (each returns its time), taken in turn, the order
    alternating repeat by repeat and fn's call last (its result is what a check reads)."""
    mine, alone = [], []
    for i in range(reps):
        if (reps - i) % 2:  # (the last repeat's: fn after local)
            alone.append(local())
            mine.append(fn())
        else:
            mine.append(fn())
            alone.append(local())
    return mine, alone


class _Clock:
    WARM = 4  # warm calls where they fit: a peer engine captures each of its two buffers' graph at its second call on it

    def __init__(self, device):
        import torch

        self.cuda = device.type == "cuda"
        self.torch = torch
        self.meta = device if self.cuda else torch.device("cpu")

    def sync(self):
        if self.cuda:
            self.torch.cuda.synchronize()

    def repeats(self, fn, reps: int | None, budget_s: float, warm: int | None = None) -> list[float]:
        """ms of each timed repeat, the slowest rank's, after warm calls (_warm: at most `warm`,
        default WARM; none with warm=0, where reps is then given); reps: that many, or as many as
        fit the budget (3 to 20) by the last warm call's time."""
        import torch.distributed as dist

        torch = self.torch
        reps = self._reps(self._warm(fn, budget_s, warm) if warm != 0 else 0.0, reps, budget_s)
        t = torch.tensor([self.one(fn) for _ in range(reps)], dtype=torch.float64, device=self.meta)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return [x * 1e3 for x in t.tolist()]

    def _warm(self, fn, budget_s: float, most: int | None = None) -> float:
        """Warm calls of fn before its timed repeats (the last one's time): two (one where `most`
        is 1), and `most` (default WARM) in all where the slowest rank's second fits that many
        times in a quarter of the budget (the first holds a mode's one-time costs; every rank
        makes the same calls), so that the repeats time the calls after a peer engine's graphs
        are captured (the third and fourth: docs/perf-notes.md, 84), not the captures."""
        most = self.WARM if most is None else most
        t = self.one(fn)
        if most > 1:
            t = self.one(fn)
            if self.largest(t) * most <= budget_s / 4:
                for _ in range(most - 2):
                    t = self.one(fn)
        return t

    def _reps(self, warm: float, reps: int | None, budget_s: float) -> int:
        """reps, or as many repeats as fit the budget (3 to 20) by the slowest rank's warm call."""
        import torch.distributed as dist

        if reps is not None:
            return reps
        est = self.torch.tensor([warm], dtype=self.torch.float64, device=self.meta)
        dist.all_reduce(est, op=dist.ReduceOp.MAX)
        return max(3, min(20, int(budget_s / max(est.item(), 1e-6))))

    def pairs(self, fn, local, reps: int | None, budget_s: float) -> tuple[list[float], list[float]]:
        """ms of fn's and of local's timed repeats (each the slowest rank's), taken in turn, after
        warm calls of each (_warm): so that the products alone meet the GPUs in the power state the product
        does (timed after all of its repeats, they ran at the power cap, up to 10% slower than
        alternated: docs/perf-notes.md, 81). The order alternates repeat by repeat, fn's last."""
        import torch.distributed as dist

        torch = self.torch
        warm = self._warm(fn, budget_s)
        self._warm(local, budget_s)
        reps = self._reps(warm, reps, budget_s)
        mine, alone = _in_turn(reps, lambda: self.one(fn), lambda: self.one(local))
        t = torch.tensor([mine, alone], dtype=torch.float64, device=self.meta)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return [x * 1e3 for x in t[0].tolist()], [x * 1e3 for x in t[1].tolist()]

    def agree(self, ok: bool) -> bool:
        """Whether every rank says ok."""
        import torch.distributed as dist

        t = self.torch.tensor([int(ok)], dtype=self.torch.int32, device=self.meta)
        dist.all_reduce(t, op=dist.ReduceOp.MIN)
        return bool(t.item())

    def largest(self, x: float) -> float:
        import torch.distributed as dist

        t = self.torch.tensor([x], dtype=self.torch.float64, device=self.meta)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return t.item()

    def one(self, fn) -> float:
        import torch.distributed as dist

        self.sync()
        dist.barrier()
        self.sync()
        t0 = time.perf_counter()
        fn()
        self.sync()
        return time.perf_counter() - t0


def _modes_for(n: int, world: int, device, ops: _Operands, wanted, beyond: bool, box: dict,
               panel: int | None = None) -> dict:
    """{variant: builder}; a builder makes its operands on this rank (on demand, so that one
    mode's memory is free before the next is made) and returns (run, local products alone or
    None, the result's relative error[, the engine's panel width]). box: where a run keeps its
    last C (the caller empties it between modes)."""
    import torch
    import torch.distributed as dist

    import tilegemm
    from ..distributed import _core

    rank = dist.get_rank()
    mo = _blocks(n, world)
    r0, r1 = mo[rank], mo[rank + 1]

    def keep(fn):
        def go():
            box.pop("c", None)  # the last result goes before the next is made
            box["c"] = fn()
        return go

    def whole(mm):
        a, b = (ops.rows(0, 0, n), ops.rows(1, 0, n)) if rank == 0 else (None, None)
        run = keep(lambda: mm(a, b)) if rank == 0 else (lambda: None)
        return run, None, (lambda: _check(ops, box["c"], 0, 0) if rank == 0 else 0.0)

    def how(lay) -> str:
        """How the engine's blocks travel (the record's `transport`)."""
        return "peer" if lay.peer else "nccl" if device.type == "cuda" else "gloo"

    def one_d(transport=None):
        a, b = ops.rows(0, r0, r1), ops.rows(1, r0, r1)
        lay = _core.layout_1d(a, b, panel=panel, transport=transport)
        last = max(0, n - 64)  # and the last panel's columns: the buffers' reuse starts at the third
        return (keep(lambda: _core.run_1d(a, b, lay)), lambda: _core.run_1d(a, b, lay, communicate=False),
                lambda: max(_check(ops, box["c"], r0, 0), _check(ops, box["c"][:, last:], r0, last)), lay.width,
                how(lay), lay.ahead)

    def summa(pr, pc):
        i, j = divmod(rank, pc)
        rm, cn, ka, kb = _blocks(n, pr), _blocks(n, pc), _blocks(n, pc), _blocks(n, pr)
        a = ops.rows(0, rm[i], rm[i + 1], ka[j], ka[j + 1])
        b = ops.rows(1, kb[i], kb[i + 1], cn[j], cn[j + 1])
        lay = _core.layout(a, b, (pr, pc), panel=panel)
        return (keep(lambda: _core.run(a, b, lay)), lambda: _core.run(a, b, lay, communicate=False),
                lambda: _check(ops, box["c"], rm[i], cn[j]), lay.width, how(lay))

    def dtensor(reduce_scatter: bool):
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor import DTensor, Shard

        mesh = init_device_mesh(device.type, (world,))
        shape, stride = torch.Size((n, n)), (n, 1)
        step = -(-n // world)  # DTensor's Shard pieces (torch.chunk's sizes), not _blocks'
        r0, r1 = min(n, rank * step), min(n, (rank + 1) * step)
        b = ops.rows(1, r0, r1)
        db = DTensor.from_local(b, mesh, [Shard(0)], shape=shape, stride=stride)
        if reduce_scatter:  # A's columns (its K) split: partial sums of all of C, reduce-scattered
            a = ops.rows(0, 0, n, r0, r1)
            da = DTensor.from_local(a, mesh, [Shard(1)], shape=shape, stride=stride)
            return (keep(lambda: (da @ db).redistribute(mesh, [Shard(0)]).to_local()), lambda: torch.mm(a, b),
                    lambda: _check(ops, box["c"], r0, 0))
        a = ops.rows(0, r0, r1)
        da = DTensor.from_local(a, mesh, [Shard(0)], shape=shape, stride=stride)
        b_all = ops.rows(1, 0, n)  # what DTensor's all-gather gives each rank, for its products alone
        # C as Shard(0) rows, whatever DTensor's propagation chose on the way (a no-op when it is already)
        return (keep(lambda: (da @ db).redistribute(mesh, [Shard(0)]).to_local()), lambda: torch.mm(a, b_all),
                lambda: _check(ops, box["c"], r0, 0))

    def fused():
        group = dist.group.WORLD.group_name
        _core.enable_symm_mem(group)
        op = torch.ops.symm_mem.fused_all_gather_matmul
        a, b = ops.rows(0, r0, r1), ops.rows(1, 0, n, r0, r1)  # A's rows, B's columns
        a_all = ops.rows(0, 0, n)
        return (keep(lambda: op(a, [b], 0, group, return_A=False)[1][0]), lambda: torch.mm(a_all, b),
                lambda: _check(ops, box["c"], 0, r0))

    out = {}
    if "one-gpu" in wanted and not beyond:
        out["one-gpu"] = lambda: whole(torch.mm)
        out["one-gpu/tilegemm"] = lambda: whole(tilegemm.matmul)
    if "1d" in wanted:
        out["1d"] = one_d  # the default transport: peer copies where every rank is a GPU of one host
        if device.type == "cuda" and not beyond:
            out["1d/nccl"] = functools.partial(one_d, "nccl")  # NCCL's all-gather, for the comparison
    if "summa" in wanted and not beyond:  # beyond: its buffers (partial sums, or gathered blocks) do not fit
        for pr, pc in summa_grids(world):
            out[f"summa {pr}x{pc}"] = functools.partial(summa, pr, pc)
    if beyond:
        return out
    if "dtensor" in wanted:
        out["dtensor"] = lambda: dtensor(False)
    if "dtensor-rs" in wanted:
        out["dtensor-rs"] = lambda: dtensor(True)
    if "fused-ag-mm" in wanted and device.type == "cuda" and _has_fused():
        out["fused-ag-mm"] = fused
    return out


def _has_fused() -> bool:
    """torch.ops.symm_mem.fused_all_gather_matmul exists once its module is imported (torch ≥ 2.5)."""
    try:
        import torch
        import torch.distributed._symmetric_memory  # noqa: F401  (defines the op)
    except ImportError:
        return False
    return hasattr(torch.ops.symm_mem, "fused_all_gather_matmul")


def _beyond_words(k: int) -> str:
    """' (beyond one GPU)', ' (beyond 2 GPUs)': the product beyond k GPUs' memory."""
    return " (beyond one GPU)" if k == 1 else f" (beyond {k} GPUs)"


def _beyond_size(world: int, itemsize: int, device) -> int:
    """The N whose A, B and C (3·N²·itemsize) exceed the memory of beyond_gpus(world) GPUs by 25%,
    a multiple of 1024·world; on a CPU a small stand-in."""
    import torch

    if device.type != "cuda":
        return 2 * CPU_SIZES[-1]
    total = torch.cuda.get_device_properties(device).total_memory * beyond_gpus(world)
    n = math.sqrt(1.25 * total / (3 * itemsize))
    step = 1024 * world
    return int(math.ceil(n / step) * step)


LINK_BYTES = dict(cuda=2**30, cpu=2**20)  # the measured collectives' gathered (broadcast) bytes
LINK_REPS = 5


def _links(clock: _Clock, device) -> dict:
    """The links as the engines use them, measured over every rank: an all-gather and a broadcast
    of LINK_BYTES (bus bandwidth: the bytes a rank receives over the time, (P − 1)/P of the
    gathered bytes for the all-gather, all of them for the broadcast) and an all-gather of one
    element per rank (its time over P − 1 ring steps: the latency of a step), each the median of
    LINK_REPS after one warm call. The cost model of this run takes its links from here."""
    import torch
    import torch.distributed as dist

    from ..distributed._core import _ALL_GATHER

    world = dist.get_world_size()
    nbytes = LINK_BYTES[device.type if device.type == "cuda" else "cpu"]
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32  # gloo's collectives: no bfloat16 needed
    full = torch.empty(nbytes // dtype.itemsize, dtype=dtype, device=device)
    mine = full[: full.numel() // world * world].view(world, -1)[dist.get_rank()].clone()
    flat = full[: mine.numel() * world]
    tiny, tiny_all = torch.zeros(1, device=device), torch.empty(world, device=device)

    def ms(fn) -> float:
        return statistics.median(clock.repeats(fn, LINK_REPS, 0.0))

    gather = ms(lambda: _ALL_GATHER(flat, mine))
    bcast = ms(lambda: dist.broadcast(full, src=0))
    step = ms(lambda: _ALL_GATHER(tiny_all, tiny))
    got = flat.numel() * dtype.itemsize * (world - 1) / world
    full = mine = flat = None
    if device.type == "cuda":
        torch.cuda.empty_cache()  # the free memory the engines size their buffers by
    return dict(bytes=nbytes, reps=LINK_REPS, allgather_ms=gather, broadcast_ms=bcast, allgather_gbps=got / gather / 1e6,
                broadcast_gbps=nbytes / bcast / 1e6, step_latency_us=step * 1e3 / max(1, world - 1))


def _links_words(links: dict) -> str:
    return (f"Links, measured in this run over every rank (bus bandwidth, median of {links.get('reps', '?')}): "
            f"all-gather of {links['bytes'] / 2**20:.0f} MiB {links['allgather_gbps']:.3g} GB/s, broadcast "
            f"{links['broadcast_gbps']:.3g} GB/s; a ring step {links['step_latency_us']:.3g} µs (a one-element "
            "all-gather's time over P − 1).")


def _topology() -> str | None:
    """`nvidia-smi topo -m` as text (colour codes dropped), or None where it does not answer."""
    import re
    import subprocess

    try:
        run = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return re.sub(r"\x1b\[[0-9;]*m", "", run.stdout).rstrip() if run.returncode == 0 else None


def measure(sizes, modes, runs: int, reps: int | None, budget_s: float, beyond: bool | str, save=None, progress=print,
            panel: int | None = None) -> dict:
    """The whole benchmark on this rank (every rank calls it); rank 0's document is returned
    (None elsewhere) and, with save, written after every size."""
    import torch
    import torch.distributed as dist

    from ..distributed import _core
    from . import clocks
    from .results import environment

    world, rank = dist.get_world_size(), dist.get_rank()
    beyond = {True: "on", False: "off"}.get(beyond, beyond)  # on, off or first
    cuda = dist.get_backend() == "nccl"
    device = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
    dtype = torch.bfloat16 if cuda else torch.float32
    clock = _Clock(device)
    doc = None
    if rank == 0:
        doc = dict(schema="tilegemm.scaleout/1", environment=environment(), clocks={"before": clocks.read() if cuda else None},
                   harness=dict(world=world, backend=dist.get_backend(), runs=runs, reps=reps, budget_s=budget_s,
                                beyond=beyond,
                                local_world=env.local_world_size(world),
                                dtype=str(dtype).removeprefix("torch."),
                                timing="each repeat the slowest rank's wall time from a barrier to its synchronize",
                                products_alone="timed in turn with the product, repeat by repeat (beyond the GPUs' "
                                               "memory: after it)",
                                panel=panel or "the cost model's",
                                env={k: os.environ.get(k) for k in QUIET_MULTICAST}), runs=[])
    links = _links(clock, device)
    if rank == 0:
        doc["links"] = links
        doc["topology"] = _topology() if cuda else None
        progress(_links_words(links))
    plan = [(n, False) for n in sizes]
    if beyond != "off":  # "first": before the sizes in each run, with nothing held from them
        big = (_beyond_size(world, torch.empty((), dtype=dtype).element_size(), device), True)
        plan = [big] + plan if beyond == "first" else plan + [big]
    per: dict = {}
    t0 = time.perf_counter()
    for run_i in range(runs):
        for n, big in plan:
            if cuda:  # each size starts with no mapped buffer held from the last (all ranks: a collective)
                _core.release_buffers()
            ops = _Operands(n, dtype, device)
            box: dict = {}
            for mode, build in _modes_for(n, world, device, ops, modes, big, box, panel).items():
                rec, made = dict(run=run_i), {}

                def step(name, fn):
                    """One phase on every rank; all go on only if all succeeded (no rank is left
                    in a collective the others skipped; a failure inside one ends at the timeout)."""
                    if "error" in rec:
                        return
                    try:
                        fn()
                        ok = True
                    except Exception as e:  # noqa: BLE001  (recorded; the run goes on)
                        rec["error"], ok = f"{name}: {type(e).__name__}: {e}"[:300], False
                    if not clock.agree(ok) and "error" not in rec:
                        rec["error"] = f"{name}: failed on another rank"

                step("setup", lambda: made.update(zip(("fn", "local", "check", "panel", "transport", "ahead"), build())))
                if made.get("panel"):
                    rec["panel"] = made["panel"]  # the engine's panel width (1d, summa)
                if made.get("transport"):
                    rec["transport"] = made["transport"]  # how 1d's and summa's blocks travelled
                if made.get("ahead") is False:
                    rec["ahead"] = False  # 1d's collectives after the GEMMs, not beside them
                # the product beyond the GPUs' memory runs for seconds: one timed repeat after the warm
                # call (unless --reps says), and its products alone right after it, with no warm call
                # (its C and theirs would not fit together); the others' in turn with theirs
                n_reps = reps if reps is not None or not big else 1
                alternate = made.get("local") is not None and not big
                if alternate:
                    def alone():
                        box.pop("c", None)  # the product's C goes first: the products alone make their own
                        try:
                            made["local"]()
                        except Exception as e:  # noqa: BLE001  (named as the products alone's, not the product's)
                            raise RuntimeError(f"products alone: {type(e).__name__}: {e}") from e

                    step("timing", lambda: rec.update(zip(("ms_reps", "local_reps"), clock.pairs(
                        made["fn"], alone, n_reps, budget_s))))
                else:
                    step("timing", lambda: rec.__setitem__("ms_reps", clock.repeats(
                        made["fn"], n_reps, budget_s, warm=1 if big else None)))
                if run_i == 0:
                    step("result check", lambda: rec.__setitem__("rel_err", clock.largest(made["check"]())))
                box.clear()  # the products alone make their own C
                if made.get("local") is not None and not alternate:
                    step("products alone", lambda: rec.__setitem__(
                        "local_reps", clock.repeats(made["local"], n_reps, budget_s, warm=0 if big else None)))
                made.clear()
                box.clear()
                if cuda:
                    torch.cuda.empty_cache()
                per.setdefault((n, mode, big), []).append(rec)
                if rank == 0:
                    ms = statistics.median(rec["ms_reps"]) if "ms_reps" in rec else float("nan")
                    progress(f"run {run_i + 1}/{runs} N={n}{_beyond_words(beyond_gpus(world)) if big else ''} {mode:18s} "
                             f"{ms:9.3f} ms" + (f"  err {rec['rel_err']:.1e}" if "rel_err" in rec else "")
                             + (f"  {rec['error']}" if "error" in rec else "") + f"  ({time.perf_counter() - t0:.0f} s)")
            if rank == 0:
                doc["records"] = records(per, world, dtype)
                if save:
                    save(doc)
    if rank == 0:
        doc["records"] = records(per, world, dtype)
        doc["clocks"]["after"] = clocks.read() if cuda else None
        doc["elapsed_s"] = round(time.perf_counter() - t0, 1)
        if save:
            save(doc)
    return doc


def records(per: dict, world: int, dtype) -> list[dict]:
    """One record per size and mode: medians over the runs of each run's median repeat, with the
    speed-up against the same run's one-gpu (cuBLAS) figure at that size."""
    import torch

    itemsize = torch.empty((), dtype=dtype).element_size()
    one = {n: _by_run(runs) for (n, mode, big), runs in per.items() if mode == "one-gpu"}
    out = []
    order = lambda v: MODES.index(v.split("/")[0].split(" ")[0]) if v.split("/")[0].split(" ")[0] in MODES else 99  # noqa: E731
    for (n, mode, big), runs in sorted(per.items(), key=lambda kv: (kv[0][2], kv[0][0], order(kv[0][1]), kv[0][1])):
        rec = dict(mode=mode.split("/")[0].split(" ")[0], variant=mode, gpus=1 if mode.startswith("one-gpu") else world,
                   m=n, n=n, k=n, dtype=str(dtype).removeprefix("torch."), beyond_one_gpu=big,
                   beyond_gpus=beyond_gpus(world) if big else 0,
                   bytes_abc=3 * n * n * itemsize)
        errs = [r["error"] for r in runs if "error" in r]
        checked = [r["rel_err"] for r in runs if "rel_err" in r]
        if checked:
            rec["rel_err"] = max(checked)
            if not rec["rel_err"] <= _tolerance(dtype):
                errs.append(f"result check failed: relative error {rec['rel_err']:.2e}")
        good = [r for r in runs if "ms_reps" in r]
        if errs or not good:
            out.append(dict(rec, error="; ".join(errs) or "not measured"))
            continue
        ms_runs = [statistics.median(r["ms_reps"]) for r in good]
        rec.update(ms=statistics.median(ms_runs), ms_runs=ms_runs, reps=len(good[0]["ms_reps"]))
        for key in ("panel", "transport", "ahead"):
            if good[0].get(key) is not None:
                rec[key] = good[0][key]
        rec["tflops"] = 2 * n ** 3 / (rec["ms"] * 1e-3) / 1e12
        if n in one and not big:
            rec["speedup"] = paired_ratio(_by_run(runs), one[n])  # (each run's one-GPU figure beside ours)
        turns = [statistics.median(r["in_turn_reps"]) for r in good if "in_turn_reps" in r]
        if turns:  # (the host split: its time in turn with its rows alone, beside its back-to-back time)
            rec["in_turn_ms"] = statistics.median(turns)
        locs = [statistics.median(r["local_reps"]) for r in good if "local_reps" in r]
        if locs:
            rec["local_ms"] = statistics.median(locs)
            rec["efficiency"] = min(1.0, rec["local_ms"] / rec.get("in_turn_ms", rec["ms"]))
            rec["comm_share"] = 1.0 - rec["efficiency"]
        out.append(rec)
    return out


def _by_run(runs: list[dict]) -> list[float | None]:
    """Each run's median repeat, by run (None where that run measured nothing)."""
    return [statistics.median(r["ms_reps"]) if "ms_reps" in r else None for r in runs]


def render(doc: dict) -> str:
    """Markdown: per size, every mode's time, TFLOP/s, speed-up over one GPU (cuBLAS, same run),
    efficiency and communication share; the beyond-one-GPU product after."""
    env = doc.get("environment", {})
    gpu = (env.get("gpu") or {}).get("name")
    h = doc.get("harness", {})
    where = (f"{h.get('world', '?')} × {gpu} (NCCL" if gpu else f"{h.get('world', '?')} CPU processes (gloo; not a GPU's times")
    one = "one GPU's whole product on cuBLAS (torch.mm)" if gpu else "one process's whole product (torch.mm)"
    alone = "timed in turn with the product" if h.get("products_alone") else "timed after the product's repeats"
    lines = [f"`tilegemm dist-bench` on {where}, {h.get('dtype', '?')}, {env.get('date', '?')}): each figure the "
             f"median of {h.get('runs', '?')} runs' median repeat, all modes in the same run; speed-up against "
             f"{one}; efficiency = the same local products alone ({alone}) / the product's time.", "",
             "| N | mode | GPUs | ms | TFLOP/s | speed-up | efficiency | comm share | runs (ms) |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---|"]

    def f(x, fmt):
        return format(x, fmt) if isinstance(x, (int, float)) else "—"

    for r in doc.get("records", []):
        n = f"{r['n']}" + (_beyond_words(r.get("beyond_gpus") or 1) if r.get("beyond_one_gpu") else "")
        if "error" in r:
            lines.append(f"| {n} | {r['variant']} | {r['gpus']} | — | — | — | — | — | {r['error'][:90]} |")
            continue
        mode = r["variant"] + (f", panel {r['panel']}" if r.get("panel") else "")  # (the width the engine ran: a
        # --panel past K runs all of K at once)
        lines.append(f"| {n} | {mode} | {r['gpus']} | {f(r['ms'], '.3f')} | {f(r['tflops'], '.3g')} | "
                     f"{f(r.get('speedup'), '.2f')} | {f(r.get('efficiency'), '.3f')} | {f(r.get('comm_share'), '.3f')} | "
                     + " / ".join(f"{x:.3f}" for x in r.get("ms_runs", [])) + " |")
    splits = [r for r in doc.get("records", []) if r["variant"] == "host-split"]
    if splits:  # (timed in its own process, its own way)
        turns = [r for r in splits if r.get("in_turn_ms")]
        lines += ["", "The host split's efficiency: each GPU's rows alone, at once, with nothing copied, "
                  + ("timed in turn with the split." if "in turn" in h.get("host_split", "")
                     else "timed after the split's repeats.")
                  + (" Its time and speed-up are from back-to-back calls, as the one-GPU reference's; its "
                     "efficiency is over its time in turn with its rows alone ("
                     + ", ".join(f"{r['in_turn_ms']:.3f} ms at {r['n']}" for r in turns) + ")." if turns else "")]
    big = [r for r in doc.get("records", []) if r.get("beyond_one_gpu") and "ms" in r]
    if big:
        gb = big[0]["bytes_abc"] / 1e9
        mem = ((env.get("gpu") or {}).get("memory_bytes") or 0) / 1e9
        k = big[0].get("beyond_gpus") or 1
        whose = f"one GPU's {mem:.0f} GB" if k == 1 else f"the {k * mem:.0f} GB of {k} GPUs"
        lines += ["", f"Beyond {'one GPU' if k == 1 else f'{k} GPUs'}: A, B and C of N = {big[0]['n']} take {gb:.0f} GB"
                  + (f", {gb / (k * mem):.2f}× {whose}" if mem else "") + "; operands made shard by shard"
                  + ("; one timed repeat a run, after a warm call" if big[0].get("reps") == 1 else "")
                  + ("; its products alone after it" if h.get("products_alone") else "") + "."]
    links = doc.get("links")
    if links:
        lines += ["", _links_words(links)]
    return "\n".join(lines)


# --- one process, every GPU: the host split ---------------------------------------------------

def _host_split(sizes, runs: int, reps: int | None, budget_s: float, gpus: int, progress=print) -> list[dict]:
    """Records of the host split (one process drives `gpus` GPUs), each the median of `runs` runs'
    median repeat, with this process's one-GPU torch.mm in the same runs."""
    import torch

    import tilegemm
    from tilegemm import multigpu

    ids = list(range(gpus))
    dev = torch.device("cuda", 0)
    per: dict = {}

    def once(fn, drop=()) -> float:
        """ms of one call of fn, from every GPU's synchronize to the last's; box's `drop` entries
        (an earlier result) freed first, untimed."""
        for key in drop:
            box.pop(key, None)
        for i in ids:
            torch.cuda.synchronize(i)
        t0 = time.perf_counter()
        fn()
        for i in ids:
            torch.cuda.synchronize(i)
        return (time.perf_counter() - t0) * 1e3

    def count(warm_ms: float) -> int:
        return reps or max(3, min(20, int(budget_s / max(warm_ms * 1e-3, 1e-6))))

    def timed(fn) -> list[float]:
        fn()
        return [once(fn) for _ in range(count(once(fn)))]

    def timed_pairs(fn, local, n_reps: int) -> tuple[list[float], list[float]]:
        """fn's and local's ms taken in turn, n_reps repeats each, the order alternating, fn's
        last (as the ranks' _Clock.pairs: the rows alone meet the GPUs in the power state the
        split does; docs/perf-notes.md, 81), each call's C freed before the other's. fn comes
        warm from its back-to-back repeats (`timed`); local is warmed here, twice."""
        once(local, ["c"])
        once(local, ["c"])
        return _in_turn(n_reps, lambda: once(fn, ids), lambda: once(local, ["c"]))

    t_start = time.perf_counter()
    for run_i in range(runs):
        for n in sizes:
            ops = _Operands(n, torch.bfloat16, dev)
            a, b = ops.rows(0, 0, n), ops.rows(1, 0, n)
            cut = multigpu.describe_split(n, n, n, tuple(ids), 2, 0)
            parts = [(g, a[r0:r1].to(f"cuda:{g}"), b.to(f"cuda:{g}")) for g, r0, r1 in cut]
            box: dict = {}

            def alone():  # each GPU's rows at once, their operands already there: no copy
                for g, ag, bg in parts:
                    with torch.cuda.device(g):
                        box[g] = torch.mm(ag, bg)

            variants = [("one-gpu", lambda: box.__setitem__("c", torch.mm(a, b)), None),
                        ("host-split", lambda: box.__setitem__("c", tilegemm.matmul(a, b, devices=ids)), alone)]
            for name, fn, local in variants:
                rec = dict(run=run_i)
                try:
                    rec["ms_reps"] = timed(fn)  # back to back, as the one-GPU reference and a caller's loop
                    if local is not None:  # the efficiency: the split and its rows alone in one power state
                        rec["in_turn_reps"], rec["local_reps"] = timed_pairs(fn, local, len(rec["ms_reps"]))
                    if run_i == 0:
                        rec["rel_err"] = _check(ops, box["c"], 0, 0)
                        last = max(0, n - 64)
                        rec["rel_err"] = max(rec["rel_err"], _check(ops, box["c"][last:], last, 0),
                                             _check(ops, box["c"][last:, last:], last, last))
                except Exception as e:  # noqa: BLE001  (recorded; the run goes on)
                    rec["error"] = f"{type(e).__name__}: {e}"[:300]
                box.clear()
                per.setdefault((n, name, False), []).append(rec)
                ms = statistics.median(rec["ms_reps"]) if "ms_reps" in rec else float("nan")
                progress(f"run {run_i + 1}/{runs} N={n} {name:18s} {ms:9.3f} ms"
                         + (f"  err {rec['rel_err']:.1e}" if "rel_err" in rec else "")
                         + (f"  {rec['error']}" if "error" in rec else "") + f"  ({time.perf_counter() - t_start:.0f} s)")
            a = b = parts = None  # freed before the next size is made
            torch.cuda.empty_cache()
            if n in NUMPY_SIZES:
                _host_split_numpy(n, ids, per, run_i, timed, progress)
    out = records(per, gpus, torch.bfloat16)
    for r in out:
        if r["variant"] == "one-gpu":  # this process's cuBLAS reference, beside the ranks' own
            r["variant"] = "one-gpu/host-split-process"
    _numpy_figures(out, per)
    return out


def _host_split_numpy(n: int, ids, per: dict, run_i: int, timed, progress) -> None:
    """FP16 NumPy operands: the host split against one GPU's torch round trip, and the same split
    from CUDA operands (for the copy share)."""
    import torch

    import tilegemm

    dev = torch.device("cuda", 0)
    ops = _Operands(n, torch.float16, dev)
    ad, bd = ops.rows(0, 0, n), ops.rows(1, 0, n)
    a, b = ad.cpu().numpy(), bd.cpu().numpy()
    box: dict = {}

    def round_trip():
        box["c"] = torch.mm(torch.from_numpy(a).to(dev), torch.from_numpy(b).to(dev)).cpu().numpy()

    for name, fn in (("one-gpu/numpy", round_trip),
                     ("host-split/numpy", lambda: box.__setitem__("c", tilegemm.matmul(a, b, devices=ids))),
                     ("host-split/fp16", lambda: box.__setitem__("c", tilegemm.matmul(ad, bd, devices=ids)))):
        rec = dict(run=run_i)
        try:
            rec["ms_reps"] = timed(fn)
            if run_i == 0:
                c = box["c"]
                t = c if isinstance(c, torch.Tensor) else None
                last = n - 64  # and the last rows and columns: another GPU's, staged back
                rec["rel_err"] = max(
                    _check(ops, t if t is not None else torch.as_tensor(c[:64, :64]).to(dev), 0, 0),
                    _check(ops, t[last:, last:] if t is not None else torch.as_tensor(c[last:, last:]).to(dev), last, last))
        except Exception as e:  # noqa: BLE001  (recorded; the run goes on)
            rec["error"] = f"{type(e).__name__}: {e}"[:300]
        box.clear()
        per.setdefault((n, name, False), []).append(rec)
        ms = statistics.median(rec["ms_reps"]) if "ms_reps" in rec else float("nan")
        progress(f"run {run_i + 1} N={n} {name:18s} {ms:9.3f} ms" + (f"  {rec['error']}" if "error" in rec else ""))
    a = b = ad = bd = None
    torch.cuda.empty_cache()


def _numpy_figures(recs: list[dict], per: dict) -> None:
    """host-split/numpy: speed-up against one-gpu/numpy (run by run: `per`, the runs' records) and
    the copy share against host-split/fp16."""
    by = {(r["n"], r["variant"]): r for r in recs if "ms" in r}
    for r in recs:
        if r["variant"] == "host-split/numpy" and "ms" in r:
            one, dev = by.get((r["n"], "one-gpu/numpy")), by.get((r["n"], "host-split/fp16"))
            if one:
                r["speedup"] = paired_ratio(_by_run(per[(r["n"], "host-split/numpy", False)]),
                                            _by_run(per[(r["n"], "one-gpu/numpy", False)]))
            if dev:
                r["comm_share"] = max(0.0, 1.0 - dev["ms"] / r["ms"])
                r["efficiency"] = 1.0 - r["comm_share"]
        if r["variant"] in ("host-split/fp16", "one-gpu/numpy") and "ms" in r:
            r.pop("speedup", None)
    for r in recs:
        if r["variant"] in ("one-gpu/numpy", "host-split/numpy", "host-split/fp16"):
            r["dtype"] = "float16"


# --- processes -------------------------------------------------------------------------------

def _init(backend: str, local_rank: int, store: str | None = None) -> None:
    """The process group: torchrun's rendezvous (env://), or for ranks this command spawned the
    file `store`, where they meet without a port (a free port picked, closed and handed to the
    ranks could be taken meanwhile: EADDRINUSE, then every other rank waited out its timeout)."""
    import torch
    import torch.distributed as dist

    where = {} if store is None else dict(init_method=f"file://{store}", rank=int(os.environ["RANK"]),
                                          world_size=int(os.environ["WORLD_SIZE"]))
    if backend == "nccl":
        torch.cuda.set_device(local_rank)
        dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank),
                                timeout=datetime.timedelta(minutes=3), **where)  # the longest wait: one product
    else:
        dist.init_process_group("gloo", timeout=datetime.timedelta(minutes=5), **where)


def _main_of_rank(cfg: dict) -> None:
    """Every rank: measure; rank 0 saves."""
    import torch.distributed as dist

    os.environ.update(QUIET_MULTICAST)
    _init(cfg["backend"], int(env.number("LOCAL_RANK", 0, integer=True, positive=False)), cfg.get("store"))
    try:
        save = None
        if cfg.get("json"):
            def save(doc):
                results.write_json(cfg["json"], results.dumps(doc))
        doc = measure(cfg["sizes"], cfg["modes"], cfg["runs"], cfg["reps"], cfg["budget_s"], cfg["beyond"], save,
                      progress=lambda s: print(s, flush=True), panel=cfg.get("panel"))
        if doc is not None:
            print(render(doc), flush=True)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def _spawned(rank: int, world: int, cfg: dict) -> None:
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world))
    _main_of_rank(cfg)


def add_cli(subparsers) -> None:
    p = subparsers.add_parser("dist-bench", help="distributed GEMM (1-D, SUMMA) against DTensor and one GPU, in one run")
    _arguments(p)
    p.set_defaults(func=cli_dist_bench)


def _arguments(p) -> None:
    p.add_argument("--sizes", help=f"square sizes N, comma-separated (default {','.join(map(str, GPU_SIZES))} on GPUs, "
                   f"{','.join(map(str, CPU_SIZES))} on CPUs)")
    p.add_argument("--gpus", type=int, help="GPUs of this host to use (default: all; CPU processes without a GPU: 2)")
    p.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {', '.join(MODES)}")
    p.add_argument("--runs", type=positive_int, default=3, help="runs over every size and mode; each figure is their median")
    p.add_argument("--reps", type=positive_int, help="timed repeats per figure (default: what fits --budget, 3 to 20)")
    p.add_argument("--budget", type=positive_float, default=1.0, help="seconds of repeats per figure when --reps is not given")
    p.add_argument("--beyond", choices=("on", "off", "first"),
                   help="the product beyond the GPUs' memory, after the sizes (on, the default with GPUs), before "
                        "them in each run (first), or not at all (off)")
    p.add_argument("--panel", type=positive_int, help="panel width of 1d and summa (default: the cost model's choice)")
    p.add_argument("--json", help="write the results here")


def _config(args, under_torchrun: bool) -> tuple[dict | None, int, str | None]:
    """(configuration, processes to spawn, one line of error)."""
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        return None, 0, "needs torch (pip install 'tilegemm[gpu]')"
    if not dist.is_available():
        return None, 0, "this torch has no torch.distributed"
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    modes = [m for m in args.modes.split(",") if m]
    bad = [m for m in modes if m not in MODES]
    if bad:
        return None, 0, f"unknown mode {', '.join(bad)}; modes: {', '.join(MODES)}"
    try:
        sizes = [int(s) for s in args.sizes.split(",") if s] if args.sizes else list(GPU_SIZES if gpus else CPU_SIZES)
    except ValueError:
        return None, 0, f"--sizes {args.sizes!r}: comma-separated integers"
    if not sizes or min(sizes) < 1:
        return None, 0, "--sizes: positive integers"
    if under_torchrun:
        if not os.environ["WORLD_SIZE"].strip().isdecimal():  # (int() said "invalid literal ... 'x'", naming no
            # variable; isdigit() took '²', which int() refuses)
            return None, 0, f"WORLD_SIZE={os.environ['WORLD_SIZE']!r}: torchrun's process count, a whole number"
        for name in ("RANK", "LOCAL_RANK"):  # (RANK=x: int()'s "invalid literal", naming no variable)
            if not os.environ.get(name, "0").strip().isdecimal():
                return None, 0, f"{name}={os.environ[name]!r}: torchrun's index of this process, a whole number"
        world, backend = int(os.environ["WORLD_SIZE"]), ("nccl" if gpus else "gloo")
    elif gpus:
        world, backend = (gpus if args.gpus is None else args.gpus), "nccl"  # (0 is a number asked for, not "all")
        if world < 2 or world > gpus:
            return None, 0, (f"--gpus {world}: this host has {gpus} GPU{'s' * (gpus != 1)}; a distributed product "
                             "needs at least 2")
    else:
        world, backend = (2 if args.gpus is None else args.gpus), "gloo"
        if world < 2:
            return None, 0, f"--gpus {world}: at least 2 processes"
    if backend == "gloo":  # (the ranks on this host's memory: past it they were killed halfway, or took the host down)
        from .. import arrays

        n, free = max(sizes), arrays.available_host_bytes()
        if free is not None and world * RANK_BYTES > free:
            return None, 0, (f"--gpus {world}: {world} processes with torch loaded take about "
                             f"{world * RANK_BYTES / 1e9:.0f} GB, and {free / 1e9:.1f} GB are free here; ask for fewer")
        need = 3 * n * n * 4 * (2 if "one-gpu" in modes else 1)  # float32 A, B and C over the ranks; one process's
        if free is not None and need > free:  # whole product beside them
            return None, 0, (f"--sizes {n}: float32 A, B and C of N = {n} take {3 * n * n * 4 / 1e9:.1f} GB over the "
                             "ranks" + (" and as much again for one process's whole product" if "one-gpu" in modes
                                        else "") + f", and {free / 1e9:.1f} GB are free here; ask for a smaller N")
    skipped = _not_run(modes, backend, under_torchrun)
    if not modes or all(m in skipped for m in modes):
        return None, 0, "nothing to run: " + ("--modes names no mode" if not modes else
                                              "; ".join(skipped[m] for m in dict.fromkeys(modes)))
    beyond = args.beyond or ("on" if gpus else "off")
    cfg = dict(backend=backend, sizes=sizes, modes=modes, runs=args.runs, reps=args.reps, budget_s=args.budget,
               beyond=beyond, json=args.json, panel=args.panel, not_run=list(skipped.values()))
    return cfg, world, None


def _not_run(modes, backend: str, under_torchrun: bool) -> dict:
    """{mode: one line saying why it is not run} for each mode asked for that this run cannot
    measure: a mode left out of the table without a word reads as one that ran and gave nothing."""
    why = {}
    if "host-split" in modes and backend != "nccl":
        why["host-split"] = "host split: not run (it drives several GPUs from one process; this machine has none)"
    elif "host-split" in modes and under_torchrun:
        why["host-split"] = ("host split: not run (it drives every GPU of a host from one process; under torchrun "
                             "each process has one: run `tilegemm dist-bench` on one host)")
    if "fused-ag-mm" in modes and backend != "nccl":
        why["fused-ag-mm"] = ("fused-ag-mm: not run (torch.ops.symm_mem.fused_all_gather_matmul runs on GPUs over "
                              "NCCL; these are CPU processes over gloo)")
    elif "fused-ag-mm" in modes and not _has_fused():
        why["fused-ag-mm"] = "fused-ag-mm: not run (this torch has no torch.ops.symm_mem.fused_all_gather_matmul)"
    return why


def _rank_threads() -> dict:
    """The thread counts the CPU ranks start with: one each, or what the caller set. They must be
    in the environment the processes start with: a spawned rank imports NumPy, and OpenBLAS reads
    them then (else one thread a core), before its own code runs. Two ranks' BLAS threads spinning
    on two cores beside gloo's made a rank's GEMM at N = 160 take 12 to 47 ms against 0.2 ms with
    one, its products alone as slow, so that the efficiency read 1.0."""
    omp = os.environ.get("OMP_NUM_THREADS") or "1"
    return dict(OMP_NUM_THREADS=omp, OPENBLAS_NUM_THREADS=os.environ.get("OPENBLAS_NUM_THREADS") or omp)


def _add_host_split(cfg: dict, gpus: int, path: str | None) -> None:
    """The host split, measured in this process after the ranks have ended, its records added to
    the ranks' results file."""
    print(f"host split: one process, {gpus} GPUs", flush=True)
    recs = _host_split(cfg["sizes"], cfg["runs"], cfg["reps"], cfg["budget_s"], gpus,
                       progress=lambda s: print(s, flush=True))
    doc = dict(records=[], harness={}, environment={})
    if path and os.path.exists(path):
        with open(path) as f:
            doc = json.load(f)
    ours = {r["variant"] for r in recs}
    doc["records"] = [r for r in doc.get("records", []) if r["variant"] not in ours] + recs
    doc.setdefault("harness", {})["host_split"] = ("one process drives every GPU through tilegemm.matmul(devices=...); "
                                                   "each repeat from the first GPU's synchronize to the last GPU's; the split's "
                                                   "time from back-to-back calls; then each GPU's rows alone timed in turn with "
                                                   "the split, repeat by repeat, the efficiency over the split's time in turn")
    if path:
        results.write_json(path, results.dumps(doc))
    print(render(doc), flush=True)


def cli_dist_bench(args) -> int:
    under = "WORLD_SIZE" in os.environ and "RANK" in os.environ
    cfg, world, err = _config(args, under)
    if err:
        print(f"tilegemm dist-bench: {err}", file=sys.stderr)
        return 2
    try:  # the settings every rank reads, said once here rather than as a traceback from each rank
        from ..distributed import _core

        _core.check_settings()
        if under and args.json and os.environ["RANK"] == "0":  # (`tilegemm dist-bench` checked it; the module's
            from .results import check_writable  # own entry, under torchrun, did not: its rank 0 raised after a size)

            check_writable(args.json)
    except (ValueError, OSError) as e:  # (ConfigError is one)
        print(f"tilegemm dist-bench: {e}", file=sys.stderr)
        return 2
    if under:
        _main_of_rank(cfg)
        if os.environ["RANK"] == "0":
            for line in cfg["not_run"]:
                print(line, flush=True)
        return 0
    if cfg["backend"] == "gloo":
        print(f"No CUDA GPU: {world} CPU processes over gloo, small sizes, FP32, to show the benchmark works "
              "(its times are not a GPU's).", flush=True)
    import multiprocessing as mp
    import tempfile

    ctx = mp.get_context("spawn")
    threads = _rank_threads() if cfg["backend"] == "gloo" else {}
    before = {k: os.environ.get(k) for k in threads}
    with tempfile.TemporaryDirectory() as meet:
        cfg = dict(cfg, store=os.path.join(meet, "store"))  # (the ranks' rendezvous: _init)
        procs = [ctx.Process(target=_spawned, args=(r, world, cfg)) for r in range(world)]
        os.environ.update(threads)  # (a spawned process starts with this process's environment)
        try:
            for p in procs:
                p.start()
        finally:
            for k, v in before.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        for p in procs:
            p.join()
    failed = [r for r, p in enumerate(procs) if p.exitcode != 0]
    if failed:
        print(f"tilegemm dist-bench: rank{'s' * (len(failed) > 1)} {', '.join(map(str, failed))} failed "
              f"(exit code {procs[failed[0]].exitcode}); see the lines above", file=sys.stderr)
        return 1
    if "host-split" in cfg["modes"] and cfg["backend"] == "nccl":
        _add_host_split(cfg, world, args.json)
    for line in cfg["not_run"]:
        print(line, flush=True)
    if args.json:
        print(f"results written to {args.json}")
    return 0


if __name__ == "__main__":  # under torchrun: python -m tilegemm.bench.distributed [options]
    import argparse

    parser = argparse.ArgumentParser(prog="python -m tilegemm.bench.distributed")
    _arguments(parser)
    sys.exit(cli_dist_bench(parser.parse_args()))
