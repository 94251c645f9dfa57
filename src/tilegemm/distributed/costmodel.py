"""A cost model of the distributed products: which algorithm and grid, and how efficient, at what size.

The model follows the engines as they run (tilegemm.distributed._core). Both are loops over
panels whose communication travels while the previous panel is multiplied, so after the first
panel's communication a panel costs the larger of its product and its communication:

    time = comm(panel 0) + Σ_{p < last} beside(gemm(panel p), comm(panel p + 1)) + gemm(last) (+ cast, SUMMA)

where `beside` (measured) is what a GEMM costs with NCCL's kernels running beside it. Our GEMM is
persistent (one CTA an SM, held to its end), so the two do not share the SMs well: a GEMM keeps
at most `overlap` of its rate beside a collective (overlap² beside SUMMA's two broadcasts at once),
max(gemm / overlap, comm), and the 1-D loop's GEMM, beside its panel's all-gather, also waits the
collective out, and a little more: max(gemm / overlap, gemm + gather_wait · comm, comm). Where a
collective costs a GEMM more than its own time (gather_wait > 1), gathering after the GEMMs beats
gathering beside them at any one width. The 1-D loop can gather each panel after the GEMM before
it, nothing beside a GEMM, where that is faster (`ahead` False):

    time = Σ_p (comm(panel p) + gemm(panel p))

1-D (P × 1): N in column panels of width w; B's panel (K × w) all-gathered, then one GEMM
(M/P) × w × K written once:
    comm = allgather(K·w·size, P) = K·w·size·(P − 1)/P / bandwidth + (P − 1)·latency   (ring)
    gemm = 2·(M/P)·K·w / rate(M/P, w, K)
SUMMA (pr × pc): K in panels of width w; A's panel broadcast along a grid row, B's down a grid
column; each panel's product read-modify-writes the FP32 partial sums of the C block:
    comm = bcast(A panel, pc) ∥ bcast(B panel, pr),  bcast(bytes, n) = bytes / bandwidth + (n − 1)·latency
    gemm = 2·(M/pr)·(N/pc)·w / rate(M/pr, N/pc, w) + (M/pr)·(N/pc)·8 bytes / memory bandwidth
    cast = (M/pr)·(N/pc)·(4 + size) bytes / memory bandwidth, once

On the copy engines (`peer`: GPUs of one host) each rank first writes its own rows of B (1-D) or
its own blocks that move (SUMMA) into its mapped buffer, read and written at the memory's
bandwidth, before any copy or GEMM: pack = own bytes · 2 / memory bandwidth, added to the time.

SUMMA with the copy engines (`peer`: GPUs of one host, _core._run_summa_peer): A's row block and
B's column block are gathered whole, a step at a time (tilegemm.distributed._steps: bands of A_i
and panels of B_j), on one copy stream that runs ahead of the GEMMs, and each step's blocks of C
are one GEMM over all of K written once (no partial sums). With copy_s the step's pieces
(band_s·K·(pc − 1)/pc + K·panel_s·(pr − 1)/pr)·size / bandwidth and gemm_s its blocks' GEMMs:
    landed_s = Σ_{t ≤ s} copy_t,   end_s = max(landed_s, end_{s−1}) + gemm_s,   time = end_last
(each step's copies also pay the link latency once a piece: pc − 1 + pr − 1 pieces)

with the bandwidth of the links the group spans: within a host (NVLink) or between hosts (the
network). Two broadcasts on different links overlap; two that both cross the network share it.
Efficiency is the local products' time alone over the predicted time; speed-up is one GPU's whole
product over the predicted time. The parameters are a `Hardware`: the local GEMM's rate by size
(measured), the memory bandwidth, and the links' bandwidths and latencies (measured, or stated
assumptions). The partial sums' traffic is counted as not overlapping the GEMM (the kernel's
epilogue reads and writes them after its main loop): an upper bound on what it costs.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field, replace

from ..errors import DistributedError, DTypeError, ShapeError


@dataclass(frozen=True)
class Hardware:
    """rate: TFLOP/s of the local GEMM at cube sizes (size: TFLOP/s; other shapes interpolate on
    the cube root of M·N·K, log-linearly, flat beyond the ends); bandwidths in GB/s one way, per
    GPU; latencies in µs."""

    name: str
    rate: dict = field(default_factory=dict)
    link_gbps: float = 395.0  # one H200's NVLink peer copy, measured (shared/H200.md, 2026-11-23)
    link_latency_us: float = 10.0
    net_gbps: float = 50.0  # between hosts: a stated parameter (400 Gb/s per GPU)
    net_latency_us: float = 20.0
    gpus_per_host: int = 8
    mem_gbps: float = 4290.0  # one H200's device copy, read + written, measured (results/h200/ceilings.json)
    # the share of its rate a local GEMM keeps at most while a collective runs beside it, fitted to
    # the 2-GPU H200 host (2026-11-24): at N ≥ 16384 the overlapped loops ran at 0.79-0.89 (median
    # 0.838) of their products alone though their collectives took a few per cent of the GEMMs'
    # time; four H200s' SUMMA loops on NCCL (results/archive/h200x4-session32/) implied 0.72-0.84 a
    # broadcast pair at N ≥ 32768
    overlap: float = 0.838
    # the 1-D NCCL loop: what a panel's all-gather adds to the GEMM beside it, as a multiple of the
    # all-gather's own time. Fitted to the eight loops of more than one panel in the runs since the
    # products alone were mended (95a7dad): 1.07-1.22, median 1.125, on 2 H200s at 16384 (8 panels)
    # and 4 at 16384 (4) and 32768 (32), where the rate share alone fitted 0.65-0.81 (perf-notes, 79).
    # Measured on NVLink only; assumed to hold for NCCL's kernels between hosts too
    gather_wait: float = 1.125
    fixed_tflops: float | None = None  # one rate for every local GEMM (a product's own, measured alone)

    def beside_copies(self) -> "Hardware":
        """This hardware with the copy engines' transport (peer): their copies take no SM, so a GEMM
        beside them loses nothing."""
        return replace(self, overlap=1.0, gather_wait=0.0)

    def tflops(self, m: float, n: float, k: float) -> float:
        if self.fixed_tflops:
            return self.fixed_tflops
        pts = sorted(self.rate.items())
        if not pts:
            return math.inf  # no rate known: the products cost nothing and the least communication wins
        s = (max(m, 1) * max(n, 1) * max(k, 1)) ** (1 / 3)
        if s <= pts[0][0]:
            return pts[0][1] * s / pts[0][0]  # below the smallest measured size: rate ∝ size (latency-bound)
        if s >= pts[-1][0]:
            return pts[-1][1]
        for (s0, r0), (s1, r1) in zip(pts, pts[1:]):
            if s0 <= s <= s1:
                t = math.log(s / s0) / math.log(s1 / s0)
                return r0 + t * (r1 - r0)
        return pts[-1][1]


def _spans_hosts(ranks: list[int], per_host: int) -> bool:
    return len({r // per_host for r in ranks}) > 1


def _bcast_s(nbytes: float, n: int, gbps: float, latency_us: float) -> float:
    if n <= 1 or nbytes <= 0:
        return 0.0
    return nbytes / (gbps * 1e9) + (n - 1) * latency_us * 1e-6


SUMMA_MAX_PANEL = 8192


def widths(m: int, n: int, k: int, grid: tuple[int, int]) -> list[int]:
    """The panel widths worth predicting: powers of two from 1024, and the panel dimension (N for
    1-D, K for SUMMA) cut into 1–32 panels per rank of the grid's longer side, none under 1024
    (a narrower panel's GEMM fills the GPU worse than the rates, measured on cubes, say) and, for
    SUMMA, none over SUMMA_MAX_PANEL (its receive buffers, two a direction, grow with the width)."""
    pr, pc = grid
    span, q = (n, pr * pc) if pc == 1 else (k, max(pr, pc))
    if span <= 0:
        return [1]
    top = span if pc == 1 else min(span, SUMMA_MAX_PANEL)
    out = {min(top, 1024 << i) for i in range(8)}
    out |= {min(top, max(1024, math.ceil(span / (c * q)))) for c in (1, 2, 4, 8, 16, 32)}
    return sorted(out | {top})


def predict(m: int, n: int, k: int, grid: tuple[int, int], hw: Hardware, itemsize: int = 2,
            panel: int | None = None, max_panel: int | None = None, peer: bool = False,
            ahead: bool | None = None) -> dict:
    """Predicted seconds and efficiency of the product on a pr × pc grid: the 1-D algorithm for
    P × 1, SUMMA otherwise (the module docstring's formulas), with the panel width given or, when
    none is, the width among `widths` (none wider than max_panel) that the model predicts fastest.
    peer: the copy engines' transport: SUMMA's blocks gathered in the engine's own steps (panel:
    their width; default the engine's), the 1-D loop's GEMMs losing nothing beside its copies
    (hw.beside_copies()), and both algorithms' own rows packed first. ahead (1-D): each panel's
    collective issued beside the GEMM before it (True) or after it (False); None: whichever the
    model predicts faster (the result's `ahead` says which)."""
    _check(m, n, k, itemsize, grid=grid)
    for v, what in ((panel, "panel"), (max_panel, "max_panel")):
        if v is not None and not _whole(v, 1):  # (-5, 2.5, True or 0 gave a prediction with that panel)
            raise DistributedError(f"costmodel: {what} = {v!r}: a panel is a whole number of columns above 0 (None: "
                                   "the model's fastest)")
    if peer and grid[1] > 1:
        return _predict_peer_summa(m, n, k, grid, hw, itemsize, panel)
    if peer:
        hw = hw.beside_copies()
    if panel is None and grid[0] * grid[1] > 1:
        fit = [w for w in widths(m, n, k, grid) if max_panel is None or w <= max_panel] or [max(1, max_panel or 1)]
        one_d = grid[1] == 1
        got = [] if one_d and ahead is False else [predict(m, n, k, grid, hw, itemsize, w, peer=peer, ahead=True)
                                                   for w in fit]
        if one_d and ahead is not True:  # gathered after each GEMM, the widest panels: the same bytes move at any
            # width, and a loop of narrower GEMMs runs no faster (dist-bench's products alone, power-capped:
            # 51.2 ms in 4096-wide panels at 32768 on 2 H200s, 52.3 in one), whatever the rates of lone cubes say
            got.append(predict(m, n, k, grid, hw, itemsize, max(fit), peer=peer, ahead=False))
        return min(got, key=lambda r: r["seconds"])
    pr, pc = grid
    p = pr * pc
    if pc == 1:
        mi = m / p
        width = panel or max(n, 1)
        panels = max(1, math.ceil(n / width))
        w = n / panels
        gbps, lat = _link(hw, _spans_hosts(list(range(p)), hw.gpus_per_host))
        comm = k * w * itemsize * (p - 1) / p / (gbps * 1e9) + (p - 1) * lat * 1e-6 if p > 1 else 0.0
        gemm = 2 * mi * k * w / (hw.tflops(mi, w, k) * 1e12)
        first, cast = gemm, 0.0
        pack = _pack_s(k / p * n * itemsize, hw) if peer and p > 1 else 0.0  # its own rows of B, into the buffer
    else:
        mi, nj = m / pr, n / pc
        width = panel or max(k, 1)
        panels = max(1, math.ceil(k / width))
        w = k / panels
        net_row = _spans_hosts(list(range(pc)), hw.gpus_per_host)  # grid row 0's ranks; the others alike
        net_col = _spans_hosts([i * pc for i in range(pr)], hw.gpus_per_host)
        t_a = _bcast_s(mi * w * itemsize, pc, *_link(hw, net_row))
        t_b = _bcast_s(w * nj * itemsize, pr, *_link(hw, net_col))
        comm = t_a + t_b if (net_row and net_col) else max(t_a, t_b)
        acc = 4 if itemsize < 4 else itemsize  # FP32 partial sums for 16-bit inputs
        flops = 2 * mi * nj * w / (hw.tflops(mi, nj, w) * 1e12)
        first = flops + mi * nj * acc / (hw.mem_gbps * 1e9)  # written
        gemm = flops + 2 * mi * nj * acc / (hw.mem_gbps * 1e9)  # read and written
        cast = mi * nj * (acc + itemsize) / (hw.mem_gbps * 1e9) if acc != itemsize else 0.0
        pack = 0.0
    gemms = [first] + [gemm] * (panels - 1)
    local = sum(gemms) + cast  # the same local products, alone
    # panel 0's communication, then each product beside the next panel's (slowed by hw.overlap a
    # collective beside it; the 1-D loop's also waiting out its all-gather), then the last product
    share = hw.overlap ** (2 if pc > 1 and pr > 1 else 1)
    wait = hw.gather_wait if pc == 1 else 0.0
    steps = (max(g / share, g + wait * comm, comm) for g in gemms[:-1])
    total = pack + comm + sum(steps) + gemms[-1] + cast if comm else local
    if pc == 1:  # the 1-D loop may instead gather each panel after the GEMM before it
        after = pack + comm * panels + local
        ahead = not after < total if ahead is None else ahead
        total = total if ahead else after
    else:
        ahead = True  # SUMMA's loop always overlaps
    one = 2 * m * n * k / (hw.tflops(m, n, k) * 1e12)
    return dict(algorithm="1d" if pc == 1 else "summa", grid=[pr, pc], gpus=p, panel=width, seconds=total, local_s=local,
                comm_s=comm * panels, efficiency=min(1.0, local / total) if total else 1.0,
                speedup=one / total if total else 0.0, tflops=2 * m * n * k / total / 1e12 if total else 0.0,
                ahead=ahead)  # (a zero-size product moves and multiplies nothing: no time, as the peer model's)


def _predict_peer_summa(m: int, n: int, k: int, grid: tuple[int, int], hw: Hardware, itemsize: int,
                        panel: int | None) -> dict:
    """SUMMA on the copy engines: the step pipeline of the module docstring, on grid place (0, 0)."""
    from ._steps import summa_blocks, summa_steps

    pr, pc = grid
    mi, nj = -(-m // pr), -(-n // pc)
    bands, cols, width = summa_steps(mi, nj, pc > 1, pr > 1, panel)
    gbps, lat = hw.link_gbps * 1e9, hw.link_latency_us * 1e-6
    own = (mi * k / pc if pc > 1 else 0) + (k / pr * nj if pr > 1 else 0)  # this rank's blocks that move
    landed = end = _pack_s(own * itemsize, hw)  # written into the mapped buffers before the first copy
    local = 0.0
    for s in range(len(bands) - 1):
        moved = ((bands[s + 1] - bands[s]) * k * (pc - 1) / pc + k * (pr - 1) / pr * (cols[s + 1] - cols[s])) * itemsize
        landed += moved / gbps + (pc - 1 + pr - 1) * lat if moved else 0.0
        gemm = sum(2 * (r1 - r0) * (c1 - c0) * k / (hw.tflops(r1 - r0, c1 - c0, k) * 1e12)
                   for r0, r1, c0, c1 in summa_blocks(bands, cols, s))
        end, local = max(landed, end) + gemm, local + gemm
    one = 2 * m * n * k / (hw.tflops(m, n, k) * 1e12)
    return dict(algorithm="summa", grid=[pr, pc], gpus=pr * pc, panel=width, seconds=end, local_s=local,
                comm_s=landed, efficiency=min(1.0, local / end) if end else 1.0, speedup=one / end if end else 0.0,
                tflops=2 * m * n * k / end / 1e12 if end else 0.0)


def _pack_s(nbytes: float, hw: Hardware) -> float:
    """A peer engine's first step: this rank's own rows (blocks) written into its mapped buffer,
    read and written once at the memory's bandwidth, before any copy or GEMM."""
    return 2 * nbytes / (hw.mem_gbps * 1e9)


def _link(hw: Hardware, across_hosts: bool) -> tuple[float, float]:
    return (hw.net_gbps, hw.net_latency_us) if across_hosts else (hw.link_gbps, hw.link_latency_us)


def _whole(v, least: int) -> bool:
    return not isinstance(v, bool) and isinstance(v, numbers.Integral) and v >= least


def _check(m, n, k, itemsize, *, grid=None, gpus=None) -> None:
    """The model's inputs (from users too: predict and choose are public), each said in words
    where it is no product's."""
    for v, what in ((m, "m"), (n, "n"), (k, "k")):
        if not _whole(v, 0):
            raise ShapeError(f"costmodel: {what} = {v!r}: a size is a whole number of 0 or more")
    if not _whole(itemsize, 1):
        raise DTypeError(f"costmodel: itemsize = {itemsize!r}: bytes an element, a whole number above 0")
    if grid is not None and (not isinstance(grid, (tuple, list)) or len(grid) != 2
                             or not all(_whole(g, 1) for g in grid)):
        raise DistributedError(f"costmodel: grid {grid!r}: two positive integers (grid rows, grid columns)")
    if gpus is not None and not _whole(gpus, 1):
        raise DistributedError(f"costmodel: gpus = {gpus!r}: a whole number above 0")


def grids(p: int) -> list[tuple[int, int]]:
    """Every pr × pc = p (pr ≥ 1), the 1-D algorithm's P × 1 among them."""
    return [(p // c, c) for c in range(1, p + 1) if p % c == 0]


def choose(m: int, n: int, k: int, gpus: int, hw: Hardware, itemsize: int = 2, peer: bool = False) -> dict:
    """The fastest algorithm and grid for this product on `gpus` GPUs, by the model; peer: the 1-D
    engine's panels travel by the copy engines (one host), which take no SM from its GEMMs. Other
    grids keep NCCL's panels here even on one host: a DTensor on a 1-D mesh that runs on them first
    pays the relayout of A's and B's rows into blocks (and C's back), which the model does not
    count, where P × 1 moves nothing more."""
    _check(m, n, k, itemsize, gpus=gpus)

    def one(g):
        # (the 1-D loop's pack is left out here: the other grids' relayout, which moves more, is not counted either)
        return predict(m, n, k, g, hw.beside_copies() if peer and g[1] == 1 else hw, itemsize)

    return min((one(g) for g in grids(gpus)), key=lambda r: r["seconds"])


HOSTS = (1, 2, 4, 8, 16, 32)
SIZES = (32768, 65536, 131072, 262144)
NETWORKS = (25.0, 50.0, 100.0)


_SHIPPED: dict = {}


def shipped(per_host: int | None = None) -> Hardware:
    """The shipped H200 rates with `per_host` GPUs a host (8 when not known), read once per
    process: what every rank assumes where it must choose as the others do."""
    per_host = per_host or 8
    if per_host not in _SHIPPED:
        _SHIPPED[per_host] = shipped_hardware(None, gpus_per_host=per_host)
    return _SHIPPED[per_host]


def default_panel(m: int, n: int, k: int, grid: tuple[int, int], itemsize: int, per_host: int | None = None,
                  max_panel: int | None = None, panel: int | None = None) -> tuple[int, bool]:
    """The engines' panel width when the caller gives none (`panel` where it does), and for the 1-D
    loop whether each panel's all-gather goes ahead, beside the GEMM before it: the model's fastest
    with the shipped H200 rates and `per_host` GPUs a host (8 when not known), the same on every
    rank that asks with the same arguments (read once per process)."""
    got = predict(m, n, k, grid, shipped(per_host), itemsize, panel=panel, max_panel=max_panel)
    return int(got["panel"]), got["ahead"]


def hardware_from_results(tensorcore_json: dict, ceilings_json: dict | None = None, **links) -> Hardware:
    """An H200-like Hardware whose local BF16 GEMM rate is ours, measured: the committed
    tensor-core run's BF16 squares (results/h200/tensorcore.json), and its memory bandwidth the
    measured device copy (results/h200/ceilings.json) where given."""
    rate = {r["m"]: r["tflops"] for r in tensorcore_json.get("records", [])
            if r.get("dtype") == "bf16" and r.get("ok") and r["m"] == r["n"] == r["k"] and r.get("tflops")}
    dram = ((ceilings_json or {}).get("ceilings") or {}).get("dram") or {}
    if dram.get("measured"):
        links.setdefault("mem_gbps", dram["measured"] * 1e3)
    return Hardware(tensorcore_json.get("gpu", "?"), rate=rate, **links)


_BLOCKS = "bf16|bfloat16|bfloat16|nn|"  # the database class of a distributed product's local GEMMs


def shipped_hardware(gpu: str | None = None, **links) -> Hardware:
    """The Hardware that `tilegemm.distributed` chooses grids with when the user names none: the
    local BF16 GEMM rate measured for this GPU by `tilegemm tune` (the shipped database's times of
    its compute-bound shapes with A and B row-major, every side at least 1024 and a multiple of 64,
    which is what a distributed product's blocks are (rows of 3000 BF16 elements, not 128-byte
    aligned, cost TMA up to 30%: docs/perf-notes.md, 51; a model's B = Wᵀ entries, note 85, are
    not its products); the H200's where this GPU has none), the links as parameters
    (`Hardware`'s defaults unless given) and GPUs per host from torchrun's LOCAL_WORLD_SIZE."""
    from .. import env, shipped

    dbs = shipped.databases()
    db = dbs.get(shipped.slug(gpu)) if gpu else None
    if db is None:
        db = dbs.get("nvidia-h200") or next(iter(dbs.values()), {})
    rate: dict = {}
    for key, e in db.get("entries", {}).items():
        if key.startswith(_BLOCKS) and e.get("ms") and len(e.get("shape", ())) == 3 and min(e["shape"]) >= 1024 \
                and not any(side % 64 for side in e["shape"]):
            m, n, k = e["shape"]
            size = round((m * n * k) ** (1 / 3))
            rate[size] = max(rate.get(size, 0.0), 2 * m * n * k / (e["ms"] * 1e-3) / 1e12)
    if "gpus_per_host" not in links:  # (read only where not given: shipped(8) gives it)
        links["gpus_per_host"] = env.local_world_size(8)
    return Hardware(db.get("gpu", "?"), rate=rate, **links)


def render(hw: Hardware, plot_path=None) -> str:
    """docs/scaleout.md's generated part: the chosen algorithm and grid, efficiency and speed-up for
    1–32 hosts of 8 GPUs at large square sizes, at three network bandwidths, and a plot."""
    lines = [f"Local BF16 GEMM rate (ours, measured on {hw.name}): "
             + ", ".join(f"{s}³ {r:.0f} TFLOP/s" for s, r in sorted(hw.rate.items()))
             + f". Memory {hw.mem_gbps / 1e3:.2f} TB/s. Within a host: {hw.link_gbps:.0f} GB/s and "
             f"{hw.link_latency_us:.0f} µs per collective step; {hw.gpus_per_host} GPUs a host, ranks numbered host "
             "by host.", "",
             "Between hosts (a stated parameter, per GPU, one way): the table is at "
             f"{hw.net_gbps:.0f} GB/s and {hw.net_latency_us:.0f} µs; the last column says where efficiency "
             "falls under 0.9 at 25 and 100 GB/s.", "",
             "| N (M = N = K, BF16) | hosts | GPUs | algorithm, grid | panel width | efficiency | speed-up over one GPU | TFLOP/s |",
             "|---:|---:|---:|---|---:|---:|---:|---:|"]
    for n in SIZES:
        for h in HOSTS:
            c = choose(n, n, n, h * hw.gpus_per_host, hw)
            flag = " **< 0.9**" if c["efficiency"] < 0.9 else ""
            lines.append(f"| {n} | {h} | {c['gpus']} | {c['algorithm']} {c['grid'][0]}×{c['grid'][1]} | {c['panel']} | "
                         f"{c['efficiency']:.3f}{flag} | {c['speedup']:.1f} | {c['tflops']:.0f} |")
    lines += ["", "| N | under 0.9 from (hosts), network 25 GB/s | 50 GB/s | 100 GB/s |", "|---:|---|---|---|"]
    for n in SIZES:
        cells = []
        for bw in NETWORKS:
            hh = replace(hw, net_gbps=bw)
            low = [h for h in HOSTS if choose(n, n, n, h * hw.gpus_per_host, hh)["efficiency"] < 0.9]
            cells.append(str(low[0]) if low else "never, to 32")
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    if plot_path is not None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 4))
        for n in SIZES:
            best = [choose(n, n, n, h * hw.gpus_per_host, hw)["efficiency"] for h in HOSTS]
            one_d = [predict(n, n, n, (h * hw.gpus_per_host, 1), hw)["efficiency"] for h in HOSTS]
            line, = ax.plot(HOSTS, best, marker="o", label=f"N = {n}, best grid")
            ax.plot(HOSTS, one_d, linestyle="--", color=line.get_color(), label=f"N = {n}, 1-D")
        ax.axhline(0.9, color="grey", linewidth=0.8)
        ax.set_xscale("log", base=2)
        ax.set_xlabel(f"hosts of {hw.gpus_per_host} GPUs")
        ax.set_ylabel("efficiency (local products / time)")
        ax.set_title(f"Predicted efficiency, network {hw.net_gbps:.0f} GB/s per GPU")
        ax.legend(fontsize=7, ncol=2)
        fig.tight_layout()
        fig.savefig(plot_path, dpi=110)
        plt.close(fig)
    return "\n".join(lines)


def measured_hardware(doc: dict, **links) -> Hardware:
    """The Hardware of a `tilegemm dist-bench` run: its own one-GPU cuBLAS rate at each size (the
    local GEMM rate measured per shape in the same run), its GPUs per host, and the links it
    measured (the all-gather's bus bandwidth and a ring step's latency; a run that did not measure
    them keeps Hardware's defaults)."""
    rate = {r["n"]: r["tflops"] for r in doc.get("records", []) if r.get("variant") == "one-gpu" and r.get("tflops")}
    h = doc.get("harness", {})
    links.setdefault("gpus_per_host", int(h.get("local_world") or h.get("world") or 8))
    seen = doc.get("links") or {}
    if seen.get("allgather_gbps"):
        links.setdefault("link_gbps", round(seen["allgather_gbps"], 1))
        links.setdefault("link_latency_us", round(seen["step_latency_us"], 1))
    return Hardware(((doc.get("environment") or {}).get("gpu") or {}).get("name", "?"), rate=rate, **links)


def _itemsize(r: dict) -> int:
    """Bytes an element of a dist-bench record's dtype (BF16 on GPUs, FP32 on CPU processes)."""
    return {"float32": 4, "float64": 8}.get(r.get("dtype"), 2)


def _own_rate(hw: Hardware, r: dict, grid, width: int | None, peer: bool = False) -> Hardware:
    """hw with the record's own local GEMM rate where the run measured its products alone
    (`local_ms`: the engine's panel loop with nothing sent), so that the model is tested on what
    it adds, the communication and its overlap; SUMMA's partial-sum traffic, which the products
    alone include, is taken out of that time first."""
    if not r.get("local_ms"):
        return hw
    pr, pc = grid
    flops = 2 * r["m"] * r["n"] * r["k"] / (pr * pc)
    itemsize = _itemsize(r)
    guess = predict(r["m"], r["n"], r["k"], grid, replace(hw, fixed_tflops=1000.0), itemsize,
                    panel=width, peer=peer)
    traffic = guess["local_s"] - flops / 1e15  # what the products alone spend besides their flops
    busy = r["local_ms"] * 1e-3 - traffic
    return replace(hw, fixed_tflops=flops / busy / 1e12) if busy > 0 else hw


def compare(doc: dict, extra: tuple = ()) -> str:
    """Markdown: the model's times beside a dist-bench run's 1d and SUMMA records (the run's own
    one-GPU rates; each record at the panel width it ran with: the record's, or for a run that did
    not record it the width the model chose before a GEMM's loss beside a collective was fitted, which was
    its default),
    then the same for the (label, document, panel) runs in `extra`."""
    hw = measured_hardware(doc)
    before = shipped(hw.gpus_per_host).beside_copies()  # what chose the default widths then
    lines = ["| run | N | algorithm, grid | panel | measured ms | model ms | model / measured |",
             "|---|---:|---|---:|---:|---:|---:|"]
    within = total = 0
    for label, d, panel in (("the committed run", doc, None), *extra):
        for r in d.get("records", []):
            if r.get("mode") not in ("1d", "summa") or "ms" not in r:
                continue
            grid = (r["gpus"], 1) if r["mode"] == "1d" else tuple(int(x) for x in r["variant"].split()[-1].split("x"))
            width = panel or r.get("panel") or predict(r["m"], r["n"], r["k"], grid, before)["panel"]
            # the copy engines' panels take no SM from the GEMMs: nothing is lost beside them
            peer = r.get("transport") == "peer"
            on = hw.beside_copies() if peer else hw
            if peer and grid[1] > 1:  # SUMMA's steps: the engine's own (a width named for the run, if one was)
                on = _own_rate(on, r, grid, None, peer=True)
                p = predict(r["m"], r["n"], r["k"], grid, on, _itemsize(r), panel=panel, peer=True)
            else:
                on = _own_rate(on, r, grid, min(width, r["n"]))
                p = predict(r["m"], r["n"], r["k"], grid, on, _itemsize(r), panel=min(width, r["n"]), peer=peer,
                            ahead=r.get("ahead", True))  # (runs before `ahead` was recorded went ahead)
            ratio = p["seconds"] * 1e3 / r["ms"]
            total += 1
            within += abs(ratio - 1) <= 0.10
            how = f" ({r['transport']}{', after' if r.get('ahead') is False else ''})" if r.get("transport") in ("peer", "nccl") else ""
            lines.append(f"| {label} | {r['n']} | {r['mode']} {grid[0]}×{grid[1]}{how} | {min(width, r['n'])} | "
                         f"{r['ms']:.2f} | {p['seconds'] * 1e3:.2f} | {ratio:.2f}{'' if abs(ratio - 1) <= 0.10 else ' **miss**'} |")
    head = (f"The model (a GEMM beside NCCL's collectives keeps at most {hw.overlap} of its rate, and beside the "
            f"1-D loop's all-gather also waits {hw.gather_wait}× the all-gather's time; beside the copy "
            f"engines' (peer) it loses nothing; links "
            f"{hw.link_gbps:g} GB/s and {hw.link_latency_us:g} µs; each record's local GEMM rate its own products "
            f"alone, measured in the run, else the run's one-GPU cuBLAS rate at its size) against the measured "
            f"times: {within} of {total} within 10%.")
    return head + "\n\n" + "\n".join(lines)
