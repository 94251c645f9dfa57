"""k14 unrolled at definition: k10's warp-tiled kernel, its source generated in Python, straight-line.

Changes against k10/k11: nothing in the algorithm (tiles, warp tiles, the double-buffered shared
tiles, one barrier per K step, 16-byte loads and stores); what changes is the code the compiler is
given. k10's loop over p (the BK rows of a K step) is a Python `range` loop, and NVVM keeps it a loop
whatever it is asked (read offline: k10 with `unroll` = 8 compiles to the same 64-FFMA loop body as
`unroll` = 1, and `unroll` = 2 or 4 gives 128): every p pays the loop's compare, branch and address
arithmetic, issue slots taken from the FFMAs (`tilegemm resources` counts them in its SASS census).
Here `source(cfg)` writes the kernel's body out for one configuration, the way a CUDA programmer's
`#pragma unroll` would leave it: the accumulators are TM·TN named scalars (c0_0 … c7_7), each p
is four LDS.128 and TM·TN FMAs spelled out, the tile loads and stores are spelled out per float4.
The only loop left is the one over K steps. The generated text is ordinary, readable Python
(`tilegemm kernels --source unrolled` prints it) and is compiled with `cuda.jit` like every rung.
Its register budget is a per-configuration
choice: `min_blocks` (launch bounds: 2 blocks of 256 threads cap a thread at 128 registers) or
`max_registers`. Where 16-byte accesses are not legal (K or N not a multiple of 4, a pointer off 16
bytes), k08–k11 hand the product to k07's scalar kernel (128×128 tiles too, but k07's thread
layout, rolled loops and no double buffering; k12 and k13 to k12's kernel up to 128 rows); the
generator writes the same kernel with one-element global loads and stores instead (`vector=False`:
a K step's tile loads are 8 LDG.32 instead of 2 LDG.128, beside 512 FFMA), so such shapes keep the
tiling.
Later rungs' options live here too, off by default (the kernels above unchanged): k16's `pad`,
`rows_apart` and `lane_rows`, and k17's `split`, `b_rows` (B read from W's rows: x @ Wᵀ) and `bias`.

Attacks: instruction overhead in the inner loop (loop control and index arithmetic issued beside
the FFMAs), not bytes. Global traffic and intensity are k10's (elements; s the element size):
    reads  = M·K·ceil(N/BN) + K·N·ceil(M/BM),  writes = M·N
    intensity ≈ 2/(s·(1/BM + 1/BN)) FLOP/byte = 128/s (32 FLOP/B in FP32) at BM = BN = 128
Per K step a thread issues BK·(WMITER + WNITER) LDS.128 and BK·TM·TN FFMA (at the defaults 32 and
512), and nothing else in the p-loop: no loop control, no index arithmetic beyond the base row.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import linecache
import os
import pathlib
import threading
from dataclasses import dataclass

from numba import cuda

from ... import _cuda, env
from . import _vec
from . import k10_warptile as k10
from ._common import configure, grid_2d, per_config
from ._jit import kernel
from ._vec import SMEM_ALIGN, add_in, at, at_or0, ldg4, lds4, put, put_in, red4, stg4, sts4

LANES_M, LANES_N, MICRO, PAD = k10.LANES_M, k10.LANES_N, k10.MICRO, k10.PAD


@dataclass(frozen=True)
class Config(k10.Tiling):
    """k10's tiling (and its rules), with k14's own register cap and access width."""

    max_registers: int = 0  # a register cap of its own (0: none; launch bounds decide)
    vector: bool = True  # 16-byte global loads and stores; False: one element each (any alignment)
    pad: int = PAD  # elements after each row of A's transposed shared tile (bank offsets for its stores)
    rows_apart: bool = False  # each K row of the body in a block of Numba's IR of its own (compile time)
    lane_rows: bool = False  # a warp's lanes load 32 rows of A's tile (conflict-free transposed stores)
    split: bool = False  # k17: grid z splits K; each block adds its partial tile into C (zeroed first)
    b_rows: bool = False  # B given as the rows of Bᵀ (a linear layer's (N, K) weight W: B = Wᵀ), read in place
    bias: bool = False  # C = A @ B + a bias row (a 1×N array, the kernel's fourth argument); split: slice 0 adds it

    @property
    def name(self) -> str:
        regs = f"_r{self.max_registers}" if self.max_registers else ""
        scalar = "" if self.vector else "_scalar"
        pad = "" if self.pad == PAD else f"_p{self.pad}"
        apart = "_rows" if self.rows_apart else ""
        lanes = "_lanerows" if self.lane_rows else ""
        split = "_split" if self.split else ""
        rows = "_brows" if self.b_rows else ""
        bias = "_bias" if self.bias else ""
        return (f"unrolled_{self.BM}x{self.BN}x{self.BK}_w{self.WM}x{self.WN}_b{self.min_blocks}"
                f"{regs}{scalar}{pad}{apart}{lanes}{split}{rows}{bias}")


DEFAULT = Config()
SCALAR = Config(vector=False)  # what DEFAULT runs as where 16-byte accesses are not legal


def source(cfg: Config) -> str:
    """The kernel's Python source for one configuration: every loop but the K loop written out."""
    cfg.check()
    BM, BN, BK, WM, WN, NT = cfg.BM, cfg.BN, cfg.BK, cfg.WM, cfg.WN, cfg.threads
    WMITER, WNITER = WM // (LANES_M * MICRO), WN // (LANES_N * MICRO)
    TM, TN = WMITER * MICRO, WNITER * MICRO
    A_IT, B_IT = BM * BK // 4 // NT, BK * BN // 4 // NT  # float4s of A and of B per thread per step
    A_C4, B_C4 = BK // 4, BN // 4
    SUB_M, SUB_N = LANES_M * MICRO, LANES_N * MICRO
    vector, split, b_rows = cfg.vector, cfg.split, cfg.b_rows
    ga = [[f"ga{l}_{c}" for c in range(4)] for l in range(A_IT)]
    gb = [[f"gb{l}_{c}" for c in range(4)] for l in range(B_IT)]
    out = []

    def w(indent: int, line: str) -> None:
        out.append("    " * indent + line)

    def plus(c: int) -> str:
        return f" + {c}" if c else ""

    def loads(indent: int, k0: str, fast: str) -> None:
        k0 = "" if k0 == "0" else f"{k0} + "  # the first step's column (A) or row (B) offset is 0
        # each operand's float4s: (array, register names, row, first column)
        quads = [("A", ga[l], f"m0 + ar{l}", f"{k0}aq{l}") for l in range(A_IT)]
        if b_rows:  # B's tile is a BN×BK tile of W's rows, loaded as A's is
            quads += [("B", gb[l], f"n0 + br{l}", f"{k0}bq{l}") for l in range(B_IT)]
        else:
            quads += [("B", gb[l], f"{k0}br{l}", f"n0 + bq{l}") for l in range(B_IT)]
        w(indent, f"if {fast}:  # the whole tile is inside A and B: no guards" + (", 16-byte loads" if vector else ""))
        for X, regs, r, q in quads:
            if vector:
                w(indent + 1, f"{', '.join(regs)} = ldg4({X}, {r}, {q})")
            else:
                for c in range(4):
                    w(indent + 1, f"{regs[c]} = at({X}, {r}, {q}{plus(c)})")
        w(indent, "else:")
        for X, regs, r, q in quads:
            for c in range(4):
                w(indent + 1, f"{regs[c]} = at_or0({X}, {r}, {q}{plus(c)})")

    w(0, f"def {cfg.name}(A, B, C{', bias' if cfg.bias else ''}):")
    what = "C += A @ B over this block's slice of K" if split else "C = A @ B"
    what += (" (B = Wᵀ: the argument B is W, N×K)" if b_rows else "") + (" + bias (a 1×N row)" if cfg.bias else "")
    w(1, f'"""{what}: {BM}×{BN} block tiles, {WM}×{WN} warp tiles, {TM}×{TN} outputs a thread, BK = {BK}."""')
    w(1, f"sAT = cuda.shared.array(({2 * BK}, {BM + cfg.pad}), DT, alignment=SMEM_ALIGN)  # A's tile, transposed, ×2")
    w(1, f"sB = cuda.shared.array(({2 * BK}, {BN}), DT, alignment=SMEM_ALIGN)  # B's tile, ×2")
    w(1, "tid = cuda.threadIdx.x")
    w(1, "warp = tid // 32")
    w(1, "lane = tid % 32")
    w(1, f"wm0 = (warp // {BN // WN}) * {WM} + (lane // {LANES_N}) * {MICRO}  # this lane's first row in the tile")
    w(1, f"wn0 = (warp % {BN // WN}) * {WN} + (lane % {LANES_N}) * {MICRO}  # and first column")
    w(1, f"m0 = cuda.blockIdx.y * {BM}")
    w(1, f"n0 = cuda.blockIdx.x * {BN}")
    w(1, "M = A.shape[0]")
    w(1, "K = A.shape[1]")
    w(1, "N = B.shape[0]" if b_rows else "N = B.shape[1]")
    if split:
        w(1, f"per = ((K + {BK - 1}) // {BK} + cuda.gridDim.z - 1) // cuda.gridDim.z * {BK}  # a slice: whole K steps")
        w(1, "k_lo = cuda.blockIdx.z * per  # this block's slice of K, picked by the grid's z index")
        w(1, "k_hi = min(K, k_lo + per)")
    w(1, f"interior = m0 + {BM} <= M and n0 + {BN} <= N  # the tile's loads are inside A and B")
    w(1, f"c_inside = m0 + {BM} <= C.shape[0] and n0 + {BN} <= C.shape[1]  # (A and B may be copies padded past C)")
    w(1, "# where this thread's float4s of each tile sit (row, column within the tile)")
    for l in range(A_IT):
        f = f"(tid + {l * NT})" if l else "tid"
        if not cfg.lane_rows:  # a warp's float4s: 32 / A_C4 rows, A_C4 float4s of each
            w(1, f"ar{l} = {f} // {A_C4}")
            w(1, f"aq{l} = {f} % {A_C4} * 4")
        elif NT % BM == 0:  # a warp's float4s: one of each of 32 rows; row and column a constant apart per l
            w(1, f"ar{l} = tid % {BM}" if NT > BM else f"ar{l} = tid")
            w(1, f"aq{l} = (tid // {BM}{plus(l * NT // BM)}) * 4" if NT > BM else f"aq{l} = {4 * l}")
        else:
            w(1, f"ar{l} = {f} % {BM}")
            w(1, f"aq{l} = {f} // {BM} * 4")
    for l in range(B_IT):
        f = f"(tid + {l * NT})" if l else "tid"
        if b_rows:  # a warp's float4s: one of each of 32 rows of W (their stores into sB: 32 banks)
            w(1, f"br{l} = {f} % {BN}")
            w(1, f"bq{l} = {f} // {BN} * 4")
        else:
            w(1, f"br{l} = {f} // {B_C4}")
            w(1, f"bq{l} = {f} % {B_C4} * 4")
    w(1, f"# the {TM}×{TN} accumulators")
    for i in range(TM):
        w(1, " = ".join(f"c{i}_{j}" for j in range(TN)) + " = DT(0)")
    w(1, "# the first K step's tiles, into registers")
    if split:
        loads(1, "k_lo", f"interior and k_lo + {BK} <= K")
        w(1, f"for t in range((k_hi - k_lo + {BK - 1}) // {BK}):")
    else:
        loads(1, "0", f"interior and {BK} <= K")
        w(1, f"for t in range((K + {BK - 1}) // {BK}):")
    w(2, f"base = (t % 2) * {BK}  # which of the two shared tiles this step uses")
    for l in range(A_IT):
        for c in range(4):
            w(2, f"sAT[base + aq{l}{plus(c)}, ar{l}] = {ga[l][c]}")
    for l in range(B_IT):
        if b_rows:  # transposed into sB's rows of K, as A's tile into sAT
            for c in range(4):
                w(2, f"sB[base + bq{l}{plus(c)}, br{l}] = {gb[l][c]}")
        else:
            w(2, f"sts4(sB, base + br{l}, bq{l}, {', '.join(gb[l])})")
    w(2, "cuda.syncthreads()  # one barrier a step: the other buffer is the one being written next")
    w(2, f"k1 = k_lo + (t + 1) * {BK}" if split else f"k1 = (t + 1) * {BK}")
    w(2, f"if k1 < {'k_hi' if split else 'K'}:  # the next step's tiles, loading while this one computes")
    loads(3, "k1", f"interior and k1 + {BK} <= K")
    depth = 3 if cfg.rows_apart else 2  # the indent of a K row's statements
    for p in range(BK):
        if cfg.rows_apart:  # one trip, gone in LLVM; to Numba's passes a block, which keeps their cost linear
            w(2, "for _row in range(1):")
        w(depth, f"# p = {p}: this thread's A column and B row fragments, then {TM * TN} FMAs")
        for it in range(WMITER):
            w(depth, f"{', '.join(f'a{4 * it + c}' for c in range(4))} = lds4(sAT, base + {p}, wm0 + {it * SUB_M})")
        for jt in range(WNITER):
            w(depth, f"{', '.join(f'b{4 * jt + c}' for c in range(4))} = lds4(sB, base + {p}, wn0 + {jt * SUB_N})")
        for i in range(TM):
            w(depth, "; ".join(f"c{i}_{j} += a{i} * b{j}" for j in range(TN)))
    if cfg.bias:
        w(1, "# the bias row's values for this thread's columns, added to its accumulators"
          + (" (by the first slice of K only)" if split else ""))
        for jt in range(WNITER):
            w(1, f"col = n0 + wn0 + {jt * SUB_N}" if jt else "col = n0 + wn0")
            for d in range(MICRO):
                v = f"at_or0(bias, 0, col{plus(d)})"
                w(1, f"v{jt}_{d} = {v} if cuda.blockIdx.z == 0 else DT(0)" if split else f"v{jt}_{d} = {v}")
        for i in range(TM):
            w(1, "; ".join(f"c{i}_{j} += v{j // MICRO}_{j % MICRO}" for j in range(TN)))
    if split:
        w(1, "# C += the partial tile: " + ("16-byte atomic adds" if vector else "atomic adds") + " inside, guarded ones on the edges")
    else:
        w(1, "# C: " + ("16-byte stores" if vector else "unguarded stores") + " inside, guarded ones on the edges")
    for it in range(WMITER):
        for c in range(MICRO):
            i = it * MICRO + c
            w(1, f"row = m0 + wm0 + {it * SUB_M + c}" if it * SUB_M + c else "row = m0 + wm0")
            for jt in range(WNITER):
                j = jt * MICRO
                w(1, f"col = n0 + wn0 + {jt * SUB_N}" if jt else "col = n0 + wn0")
                w(1, "if c_inside:")
                if split and vector:
                    w(2, f"red4(C, row, col, {', '.join(f'c{i}_{j + d}' for d in range(MICRO))})")
                elif split:
                    for d in range(MICRO):
                        w(2, f"add_in(C, row, col{plus(d)}, c{i}_{j + d})")
                elif vector:
                    w(2, f"stg4(C, row, col, {', '.join(f'c{i}_{j + d}' for d in range(MICRO))})")
                else:
                    for d in range(MICRO):
                        w(2, f"put(C, row, col + {d}, c{i}_{j + d})" if d else f"put(C, row, col, c{i}_{j})")
                w(1, "else:  # an edge block: each element guarded")
                for d in range(MICRO):
                    w(2, f"{'add_in' if split else 'put_in'}(C, row, col{plus(d)}, c{i}_{j + d})")
    return "\n".join(out) + "\n"


def source_file(stem: str, src: str, *also: str) -> str | None:
    """The generated source as a file in tilegemm's cache folder, for Numba's disk cache: Numba
    keeps a kernel's machine code only for a function read from a file, and finds it again by the
    file's time and size. The name carries a hash of the text and of `also` (what the text calls
    but does not hold: _vec's intrinsics), so a changed generator or intrinsic makes a new file;
    a file is never rewritten, and an existing one is used as it is. None where it cannot be
    written (the kernel is then compiled in each process, as before)."""
    digest = hashlib.sha256("\0".join((src, *also)).encode()).hexdigest()[:16]
    path = os.path.join(env.cache_dir(), "kernels", f"{stem}_{digest}.py")
    if os.path.exists(path):
        return path
    tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(tmp, "w") as f:
            f.write(src)
        os.link(tmp, path)  # whole, and only if absent: a second writer's link fails, its text the same
    except FileExistsError:
        pass
    except OSError:
        try:
            os.replace(tmp, path)  # a file system without hard links: whole, if not only once
        except OSError:
            return None
    finally:
        with contextlib.suppress(OSError):
            os.remove(tmp)
    return path


@functools.cache
def _vec_text() -> str:
    return pathlib.Path(_vec.__file__).read_text()


def make_kernel(cfg: Config, DT):
    """Compile the generated source of `cfg` for element type DT; on a GPU its machine code is
    cached on disk (the first compile of k16's 2,048-FFMA body takes about 20 s)."""
    src = source(cfg)
    path = None if _cuda.SIMULATOR else source_file(f"k14_{cfg.name}_{DT}", src, _vec_text())
    filename = path or f"<tilegemm k14 {cfg.name} {DT}>"
    if path is None:
        linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)  # tracebacks show it
    namespace = dict(cuda=cuda, DT=DT, SMEM_ALIGN=SMEM_ALIGN, ldg4=ldg4, lds4=lds4, stg4=stg4, sts4=sts4, at=at,
                     put=put, at_or0=at_or0, put_in=put_in, red4=red4, add_in=add_in)
    exec(compile(src, filename, "exec"), namespace)
    opts = dict(launch_bounds=(cfg.threads, cfg.min_blocks) if cfg.min_blocks else None,
                max_registers=cfg.max_registers or None)
    if path is not None:
        try:
            return kernel(**opts, cache=True)(namespace[cfg.name])
        except RuntimeError:  # Numba found no folder it can write its cache in: compile in each process
            pass
    return kernel(**opts)(namespace[cfg.name])


kernel_for = per_config(make_kernel, DEFAULT)  # kernel_for(dtype, cfg=DEFAULT), built once a pair


def launch_config(cfg: Config, a, b, c, stream=None):
    """Run configuration `cfg`; where 16-byte accesses are not legal (K or N not a multiple of 4,
    or a pointer off 16 bytes), its scalar-access variant: the same tiles and unrolled body."""
    if cfg.vector and not k10.vector_ok(a, b, c):
        cfg = dataclasses.replace(cfg, vector=False)
    run_config(cfg, a, b, c, stream)


def run_config(cfg: Config, a, b, c, stream=None, bias=None):
    """Run configuration `cfg` as it is (the caller has checked that its accesses are legal; b is
    W, N×K, for a `b_rows` configuration; bias a 1×N row for a `bias` one)."""
    m, n = c.shape
    args = (a, b, c, bias) if cfg.bias else (a, b, c)
    configure(kernel_for(c.dtype, cfg), grid_2d(m, n, cfg.BM, cfg.BN), cfg.threads, stream)(*args)


def launch(a, b, c, stream=None):
    launch_config(DEFAULT, a, b, c, stream)


traffic = k10.traffic_for(DEFAULT)
NT = DEFAULT.threads


def jit_kernels(dt) -> list:
    """The Numba dispatchers this rung compiles for dtype dt (the SASS and resource tables read them)."""
    return [kernel_for(dt), kernel_for(dt, SCALAR)]
