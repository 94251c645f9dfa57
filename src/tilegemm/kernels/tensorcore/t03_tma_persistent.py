"""t03 TMA persistent tensor-core GEMM: t02's persistent walk, with tiles moved by the TMA engine.

Changes against t02: A, B (and C, when it fits) are described to the hardware once, on the host,
as TMA tensor descriptors (`triton.tools.tensor_descriptor.TensorDescriptor`: base, shape,
strides, block shape), and a tile load is one `desc.load([row, col])`: a single thread issues a
bulk tensor copy (cp.async.bulk.tensor, Hopper's copy engine) straight into swizzled shared
memory, completing on an mbarrier. No address arithmetic or masks in registers: the copy engine
fills out-of-bounds rows and columns with zeros and clips the store of edge tiles. The registers
freed go to the accumulator (128×256 FP32 tiles over 8 warps), and wgmma reads both operands from
shared memory. Copies and MMAs overlap through Triton's software pipeline (num_stages buffers).
Per tile, that pipeline fills and drains: with `FLAT` (a config option the tuner tries for
FP16/BF16/FP8) the tile loop and the k-loop become one flattened loop, so the copies of the next
tile's first k-steps are in flight during this tile's epilogue. `WS` (`warp_specialize`) is
accepted but changes nothing on sm_90 with Triton 3.6: its automatic warp specialisation is for
Blackwell, and the PTX is byte-identical with and without it (checked by a test), so the tuner
no longer spends time on it.

Operands in either layout: a row-major A is described as M×K with BM×BK boxes, a column-major A
as K×M (boxes BK×BM, transposed in shared memory with `.T`, no copy); likewise B. TF32 and FP8
wgmma read the B operand only K-major from shared memory, and the A operand K-major or from
registers. Left to itself, Triton meets that for a row-major (N-major) TF32 B by transposing
every B tile through shared memory (per k-step and thread, in the PTX: 8 vector loads, 32
scalar stores and barriers), which ran far behind cuBLAS (docs/perf-notes.md, 13). Two
configuration options avoid it without a copy: SWAP computes C^T = B^T·A^T (B's tile becomes the
MMA's A operand, A's tile,
K-major when A is row-major, its B operand; the FP32 accumulator is transposed once per tile),
and REG_A loads the MMA's A operand into registers (wgmma's register-A form) through an identity
move that keeps Triton from feeding it from shared memory. SWAP also lets a tile of fewer than
64 rows of C be wgmma's N (8…256) rather than its M (64). Where neither works (both operands
N-/M-major), a config may ask for a K-major copy first (KMAJOR; 2·K·N·s extra bytes, counted in
the time). Needs sm_90 and 16-byte aligned bases and row strides: a 2-D operand that is not
(K or N not a multiple of 16 bytes' elements: 4095×4097×1023, a column slice) is first copied,
by `realign_kernel` (`realign_flat_kernel` for a contiguous one, `realign_pair_kernel` for a
contiguous A and B in one launch) in the same plan, into a buffer whose rows start 128 bytes
apart (2·R·C·s extra bytes for an R×C operand, counted in the time); a batched one is not
(`usable` says why not; the dispatcher then runs t02). Rows 16- but not 128-byte aligned cost
each 128-byte box row two L2 lines; a config's PAD option copies such an operand the same way
where that pays (the tuner times both).

Global traffic is t02's, moved in bulk:
    reads  = M·K·ceil(N/BN) + K·N·ceil(M/BM),  writes = M·N   (elements)
Arithmetic intensity against DRAM ≈ 2·BM·BN / (s·(BM + BN)) FLOP/byte for large K if nothing
were reused from L2 (85 at 128×256 in FP16, 171 in FP8), below the H200's FP16 ridge of
989 TFLOP/s / 4.8 TB/s ≈ 206 FLOP/B; the grouped order's L2 reuse multiplies it by about the
group size, so large products are bound by the tensor cores, and small-M ones (M ≤ 128) by
reading B's K·N·s bytes once.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from ...registry import ceil_div
from . import _problem as P
from ._jit import dot, grouped_tile, load_tile, mma_a, scale_acc, store_ptr

NAME = "tc_tma_persistent"


@triton.jit
def tma_persistent_kernel(a_desc, b_desc, c_desc, c_ptr, i_ptr, sa_ptr, sb_ptr, M, N, K, BATCH,
                          scb, scm, scn, sib, sim, sin_, alpha, beta,
                          BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
                          NUM_SMS: tl.constexpr, PRECISION: tl.constexpr,
                          A_T: tl.constexpr, B_T: tl.constexpr, A_3D: tl.constexpr, B_3D: tl.constexpr,
                          C_TMA: tl.constexpr, HAS_BETA: tl.constexpr, HAS_SCALE: tl.constexpr,
                          WS: tl.constexpr, SWAP: tl.constexpr = False, REG_A: tl.constexpr = False,
                          FLAT: tl.constexpr = False, WIDE: tl.constexpr = False, PROMOTE: tl.constexpr = 0):
    start = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    tiles = num_pid_m * num_pid_n
    k_tiles = tl.cdiv(K, BK)
    for t in tl.range(start, tiles * BATCH, NUM_SMS, warp_specialize=WS, flatten=FLAT):
        bid = t // tiles
        pid_m, pid_n = grouped_tile(t % tiles, num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * BM
        off_n = pid_n * BN
        if SWAP:  # C^T = B^T·A^T: B's tile is the MMA's A operand, A's tile its B operand
            acc = tl.zeros((BN, BM), dtype=tl.float32)
        else:
            acc = tl.zeros((BM, BN), dtype=tl.float32)
        for kt in range(k_tiles):
            off_k = kt * BK
            a = load_tile(a_desc, bid, off_m, off_k, BM, BK, A_T, A_3D)
            b = load_tile(b_desc, bid, off_k, off_n, BK, BN, B_T, B_3D)
            if SWAP:
                acc = dot(mma_a(b.T, REG_A), a.T, acc, PRECISION, PROMOTE)
            else:
                acc = dot(mma_a(a, REG_A), b, acc, PRECISION, PROMOTE)
        if SWAP:
            acc = acc.T
        b64 = bid.to(tl.int64)
        e_m = off_m  # the epilogue's pointer offsets derive from these (TMA's coordinates stay 32-bit)
        e_n = off_n
        if WIDE:  # C or C_in spans past 2^31 elements: those offsets in 64 bits
            e_m = off_m.to(tl.int64)
            e_n = off_n.to(tl.int64)
        acc = scale_acc(acc, i_ptr + b64 * sib, sa_ptr, sb_ptr, M, N, sim, sin_, alpha, beta, e_m, e_n,
                        BM, BN, HAS_BETA, HAS_SCALE)
        if C_TMA:
            c_desc.store([off_m, off_n], acc.to(c_ptr.dtype.element_ty))
        else:
            store_ptr(acc, c_ptr + b64 * scb, M, N, scm, scn, e_m, e_n, BM, BN)


@triton.jit
def realign_kernel(src, dst, O, I, s_o, d_o, BO: tl.constexpr, BI: tl.constexpr):
    """dst[o, i] = src[o, i] for an O×I matrix whose I elements are contiguous: src's rows s_o
    elements apart (any), dst's d_o (a multiple of 16 bytes, so TMA can describe it). One program
    per BO×BI block, on a 1-D grid (a 2-D one would cap I's blocks at gridDim.y's 65,535)."""
    blocks_i = tl.cdiv(I, BI)
    pid = tl.program_id(0)
    ro = ((pid // blocks_i) * BO + tl.arange(0, BO)).to(tl.int64)
    ri = (pid % blocks_i) * BI + tl.arange(0, BI)
    mask = (ro[:, None] < O) & (ri[None, :] < I)
    x = tl.load(src + ro[:, None] * s_o + ri[None, :], mask=mask)
    tl.store(dst + ro[:, None] * d_o + ri[None, :], x, mask=mask)


@triton.jit
def realign_flat_kernel(src, dst, total, I, d_o, BLOCK: tl.constexpr, WIDE: tl.constexpr):
    """realign_kernel's copy for a contiguous src (rows I elements apart): src read as one run of
    total = O·I elements, in 16-byte vector loads where its base is 16-byte aligned, each element
    stored at its row and column of dst. realign_kernel's loads start at each row of src, not
    16-byte aligned, so they are scalar (678×12345 BF16: 38 µs there, 23 here;
    docs/perf-notes.md, 51). WIDE: dst spans 2^31 elements or more (O·d_o), so the offsets are
    64-bit (else 32, whose division is the cheaper)."""
    _flat_copy(src, dst, total, I, d_o, tl.program_id(0), BLOCK, WIDE)


@triton.jit
def realign_pair_kernel(src, dst, total, I, d_o, src2, dst2, total2, I2, d_o2, FIRST, BLOCK: tl.constexpr,
                        WIDE: tl.constexpr):
    """realign_flat_kernel's two copies, A's and B's, in one launch: the first FIRST programs (the
    first copy's grid, counted on the host: cdiv(total, BLOCK) here would wrap in 32 bits for a
    total just under 2^31) copy src, the others src2. One launch the fewer a call (its host time
    and the first copy's drain before the second starts)."""
    pid = tl.program_id(0)
    if pid < FIRST:
        _flat_copy(src, dst, total, I, d_o, pid, BLOCK, WIDE)
    else:
        _flat_copy(src2, dst2, total2, I2, d_o2, pid - FIRST, BLOCK, WIDE)


@triton.jit
def _flat_copy(src, dst, total, I, d_o, pid, BLOCK: tl.constexpr, WIDE: tl.constexpr):
    if WIDE:
        pid = pid.to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < total
    x = tl.load(src + offs, mask=mask)
    row = offs // I
    tl.store(dst + row * d_o + (offs - row * I), x, mask=mask)


# ---- host side --------------------------------------------------------------------------------


def _tma_ok(x: torch.Tensor, inner: int, align: int = 16) -> bool:
    """Can x be described with dimension `inner` (-1 or -2) contiguous? Base and strides `align`
    bytes aligned: 16 is TMA's rule, 128 what PAD asks for."""
    return x.data_ptr() % align == 0 and _strides_ok(x, inner, align)


def _strides_ok(x: torch.Tensor, inner: int, align: int) -> bool:
    """_tma_ok's rule for the strides alone (wherever x starts)."""
    s = x.element_size()
    if x.stride(inner) != 1:
        return False
    others = [x.stride(d) for d in range(x.dim()) if d != x.dim() + inner and not (x.dim() == 3 and d == 0 and x.shape[0] == 1)]
    return all((st * s) % align == 0 and st > 0 for st in others)


def _squeeze(x: torch.Tensor) -> torch.Tensor:
    return x[0] if x.dim() == 3 and x.shape[0] == 1 else x


def _aligned_empty(rows: int, cols: int, like: torch.Tensor, batch=(), align: int = 16) -> torch.Tensor:
    """A rows×cols tensor (behind `batch` dimensions) whose rows start a multiple of `align` bytes apart."""
    room = -(-max(cols, 1) * like.element_size() // align) * align // like.element_size()
    return torch.empty(*batch, rows, room, dtype=like.dtype, device=like.device)[..., :cols]


def _make_kmajor(x: torch.Tensor, which: str) -> torch.Tensor:
    """x copied K-major (A: rows of K; B: columns of K), its rows 16-byte aligned (TMA-ready)."""
    t = x if which == "a" else x.transpose(-1, -2)
    out = _aligned_empty(t.shape[-2], t.shape[-1], t, tuple(t.shape[:-2])).copy_(t)
    return out if which == "a" else out.transpose(-1, -2)


def _desc(x: torch.Tensor, rows: int, cols: int, trans: bool) -> TensorDescriptor:
    """Descriptor for a logical rows×cols operand tile (rows×cols box), stored transposed if trans."""
    if trans:  # memory is (…, cols-dim, rows-dim) with the logical row index contiguous
        shape = list(x.shape[:-2]) + [x.shape[-1], x.shape[-2]]
        strides = list(x.stride()[:-2]) + [x.stride(-1), x.stride(-2)]
        block = [cols, rows]
    else:
        shape, strides, block = list(x.shape), list(x.stride()), [rows, cols]
    if x.dim() == 3:
        block = [1] + block
    return TensorDescriptor(x, shape, strides, block)


def _inner(x: torch.Tensor) -> int:
    return -1 if x.stride(-1) == 1 else -2


def usable(p: P.Problem) -> str:
    """'' when TMA can describe the operands (2-D ones after a realigning copy), else why not."""
    if p.a.device.type == "cuda" and P.capability(p.a.device) < (9, 0):
        return "TMA needs sm_90"
    for x, which in ((p.a, "a"), (p.b, "b")):
        x = _squeeze(x)
        if x.stride(_inner(x)) != 1:
            return f"{which}: neither rows nor columns are contiguous"
        if not _tma_ok(x, _inner(x)) and x.dim() != 2:
            return f"{which}: batched, base or strides not 16-byte aligned (TMA)"
    return ""


def needs_realign(p: P.Problem) -> bool:
    """Does p run on this rung only after a realigning copy of A or B?"""
    return any(not _tma_ok(x, _inner(x)) for x in (_squeeze(p.a), _squeeze(p.b)))


def _realigned(x: torch.Tensor, src: torch.Tensor, align: int = 128) -> tuple[torch.Tensor, P.KernelCall]:
    """x (2-D, one dimension contiguous) in a new buffer whose rows (or columns, for a column-major
    x) start `align` bytes apart, and the launch that copies it there. src: the tensor the call
    reads, x or the caller's batch-of-one tensor whose first matrix x is (a plan binds the
    caller's). A contiguous x is copied by realign_flat_kernel, any other by realign_kernel."""
    mem = x if x.stride(-1) == 1 else x.T  # O×I with I contiguous
    (o, i) = mem.shape
    buf = _aligned_empty(o, i, x, align=align)
    out = buf if x.stride(-1) == 1 else buf.T
    if mem.stride(0) == i or o == 1:  # contiguous: one run, read in aligned vectors
        total = o * i
        args = P.ordered(realign_flat_kernel, src=src, dst=out, total=total, I=i, d_o=buf.stride(0), BLOCK=FLAT_BLOCK,
                         WIDE=o * buf.stride(0) + FLAT_BLOCK >= 2**31)
        return out, P.KernelCall(realign_flat_kernel, (max(ceil_div(total, FLAT_BLOCK), 1),), args, dict(num_warps=4),
                                 scratch=(out,))
    BO, BI = 32, 128
    args = P.ordered(realign_kernel, src=src, dst=out, O=o, I=i, s_o=mem.stride(0), d_o=buf.stride(0), BO=BO, BI=BI)
    grid = (max(ceil_div(o, BO) * ceil_div(i, BI), 1),)
    return out, P.KernelCall(realign_kernel, grid, args, dict(num_warps=4), scratch=(out,))


FLAT_BLOCK = 1024  # realign_flat_kernel's elements a program (the fastest of 1024-8192 on the H200)
PAD_ALIGN = 128  # bytes between rows after a PAD copy: a box row of 128 bytes then reads one L2 line, not two


def operands(p: P.Problem, cfg: dict) -> tuple[torch.Tensor, torch.Tensor, list[P.KernelCall]]:
    """A and B (batch-of-one squeezed) as the descriptors read them, and the copies that make them
    so: with KMAJOR, one not K-major copied K-major (and nothing more); else one TMA cannot
    describe (rows not 16-byte aligned), or a 2-D one that cfg's PAD names ("a", "b" or "ab")
    whose rows are not PAD_ALIGN-byte aligned, copied to rows PAD_ALIGN bytes apart. A realigning
    copy reads the caller's tensor (the plan's slot)."""
    out, copies = [], []
    for which, x, src in (("a", _squeeze(p.a), p.a), ("b", _squeeze(p.b), p.b)):
        if cfg.get("KMAJOR") and not P.is_kmajor(x, which):
            # a K-major copy (a new tensor each call, aligned by construction): never realigned,
            # as a realigning copy must read the caller's tensor, the plan's slot
            x = _make_kmajor(x, which)
        elif not _tma_ok(x, _inner(x)) or _pads(x, which, cfg):
            x, call = _realigned(x, src, PAD_ALIGN)  # a copy TMA needs anyway costs no more with 128-byte rows
            copies.append(call)
        out.append(x)
    if len(copies) == 2 and all(c.fn is realign_flat_kernel for c in copies):
        copies = [_paired(*copies)]
    return out[0], out[1], copies


def _paired(a: P.KernelCall, b: P.KernelCall) -> P.KernelCall:
    """Two realign_flat_kernel launches as one realign_pair_kernel launch."""
    x, y = P.named(a), P.named(b)
    copy = ("src", "dst", "total", "I", "d_o")  # each copy's own arguments, the pair's first five, then its next five
    args = P.ordered(realign_pair_kernel, tuple(x[k] for k in copy) + tuple(y[k] for k in copy), FIRST=a.grid[0],
                     BLOCK=x["BLOCK"], WIDE=x["WIDE"] or y["WIDE"])
    return P.KernelCall(realign_pair_kernel, (a.grid[0] + b.grid[0],), args, a.options, scratch=a.scratch + b.scratch)


def _pads(x: torch.Tensor, which: str, cfg: dict, aligned=_tma_ok) -> bool:
    """Does cfg's PAD copy operand x ("a" or "b", squeezed) to rows PAD_ALIGN bytes apart? Where
    PAD names it, it is 2-D, its rows are 16- but not PAD_ALIGN-byte aligned (`aligned`'s rule),
    and KMAJOR does not copy it (`operands` leaves that copy as it is)."""
    return (which in (cfg.get("PAD") or "") and x.dim() == 2 and not (cfg.get("KMAJOR") and not P.is_kmajor(x, which))
            and aligned(x, _inner(x), 16) and not aligned(x, _inner(x), PAD_ALIGN))


def padded(p: P.Problem, cfg: dict, pitch_only: bool = False) -> str:
    """Which operands cfg's PAD copies for p ("a", "b", "ab" or ""), by `_pads` (a copy TMA needs
    anyway is not counted). pitch_only: rows PAD_ALIGN bytes apart count as aligned wherever the
    operand starts."""
    aligned = _strides_ok if pitch_only else _tma_ok
    return "".join(w for w, x in (("a", _squeeze(p.a)), ("b", _squeeze(p.b))) if _pads(x, w, cfg, aligned))


def launches(p: P.Problem, cfg: dict, num_sms: int | None = None) -> list[P.KernelCall]:
    """One launch of min(#SMs, tiles) programs, after the copies `operands` asks for: a realigning
    copy's buffer is scratch (a plan allocates it for each call, or keeps it); a KMAJOR copy is a
    new tensor on every call, so such a launch is never kept as a plan. num_sms: the device's
    (compile_for_sm90 names one, for tensors on the CPU)."""
    a, b, copies = operands(p, cfg)
    c2 = _squeeze(p.c)
    a_t, b_t = a.stride(-1) != 1, b.stride(-1) != 1
    BM, BN, BK = cfg["BM"], cfg["BN"], cfg["BK"]
    a_desc = _desc(a, BM, BK, a_t)
    b_desc = _desc(b, BK, BN, b_t)
    c_tma = bool(cfg.get("C_TMA")) and c2.dim() == 2
    c_desc = _desc(c2, BM, BN, False) if c_tma else a_desc
    c_in, sa, sb = P.epilogue_args(p)
    sms = num_sms or P.num_sms(p.a.device)
    tiles = ceil_div(p.m, BM) * ceil_div(p.n, BN) * p.batch
    args = P.ordered(
        tma_persistent_kernel, a_desc=a_desc, b_desc=b_desc, c_desc=c_desc, c_ptr=p.c, i_ptr=c_in, sa_ptr=sa,
        sb_ptr=sb, M=p.m, N=p.n, K=p.k, BATCH=p.batch, scb=p.bstride(p.c), scm=p.c.stride(-2),
        scn=p.c.stride(-1), sib=p.bstride(c_in), sim=c_in.stride(-2), sin_=c_in.stride(-1), alpha=float(p.alpha),
        beta=float(p.beta), BM=BM, BN=BN, BK=BK, GROUP_M=cfg["GROUP_M"], NUM_SMS=sms, PRECISION=p.dot_precision,
        A_T=a_t, B_T=b_t, A_3D=a.dim() == 3, B_3D=b.dim() == 3, C_TMA=c_tma, HAS_BETA=p.has_beta,
        HAS_SCALE=p.scale_a is not None, WS=bool(cfg.get("WS")), FLAT=bool(cfg.get("FLAT")), WIDE=p.too_large,
        PROMOTE=p.promote(BK),
        **P.mma_form(cfg))
    scratch = tuple(t for call in copies for t in call.scratch)
    return copies + [P.KernelCall(tma_persistent_kernel, (min(sms, tiles),), args,
                                  dict(num_warps=cfg["num_warps"], num_stages=cfg["num_stages"]), scratch=scratch)]


def compile_for_sm90(p: P.Problem, cfg: dict):
    """The launch `launches` makes of p (CPU tensors will do) in configuration cfg, compiled for sm_90
    without a GPU (`P.compile_for_sm90`): the CompiledKernel, or Triton's error where this Triton
    cannot compile that form."""
    return P.compile_for_sm90(launches(p, cfg, num_sms=132)[-1])


def traffic(m, n, k, s, bm=128, bn=256):
    return (m * k * ceil_div(n, bn) + k * n * ceil_div(m, bm) + m * n) * float(s)
