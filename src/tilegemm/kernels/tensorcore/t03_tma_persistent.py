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
scalar stores and barriers), which ran at half of cuBLAS. Two configuration options avoid it
without a copy: SWAP computes C^T = B^T·A^T (B's tile becomes the MMA's A operand, A's tile,
K-major when A is row-major, its B operand; the FP32 accumulator is transposed once per tile),
and REG_A loads the MMA's A operand into registers (wgmma's register-A form) through an identity
move that keeps Triton from feeding it from shared memory. SWAP also lets a tile of fewer than
64 rows of C be wgmma's N (8…256) rather than its M (64). Where neither works (both operands
N-/M-major), a config may ask for a K-major copy first (KMAJOR; 2·K·N·s extra bytes, counted in
the time). Needs sm_90, 16-byte aligned bases and row strides; anything else runs t02 instead,
and the reason is recorded in `fallbacks`.

Global traffic is t02's, moved in bulk:
    reads  = M·K·ceil(N/BN) + K·N·ceil(M/BM),  writes = M·N   (elements)
Arithmetic intensity against DRAM ≈ 2·BM·BN / (s·(BM + BN)) FLOP/byte for large K if nothing
were reused from L2 (85 at 128×256 in FP16, 171 in FP8), below the H200's FP16 ridge of
989 TFLOP/s / 4.8 TB/s ≈ 206 FLOP/B; the grouped order's L2 reuse multiplies it by about the
group size, so large products are bound by the tensor cores, and small-M ones (M ≤ 128) by
reading B's K·N·s bytes once.
"""

from __future__ import annotations

import warnings

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from ...registry import ceil_div
from . import _common as C
from . import t02_persistent
from ._common import grouped_tile, mma_a, scale_acc, store_ptr

NAME = "tc_tma_persistent"
fallbacks: dict[str, str] = {}  # key -> why t02 ran instead (or why warp specialisation was dropped)


@triton.jit
def _load_tile(desc, bid, off_r, off_c, R: tl.constexpr, CC: tl.constexpr, TRANS: tl.constexpr,
               BATCHED: tl.constexpr):
    """An R×CC tile at (off_r, off_c); TRANS: stored transposed, so load CC×R and transpose."""
    if TRANS:
        if BATCHED:
            x = desc.load([bid, off_c, off_r]).reshape(CC, R)
        else:
            x = desc.load([off_c, off_r])
        y = x.T
    else:
        if BATCHED:
            y = desc.load([bid, off_r, off_c]).reshape(R, CC)
        else:
            y = desc.load([off_r, off_c])
    return y


@triton.jit
def tma_persistent_kernel(a_desc, b_desc, c_desc, c_ptr, i_ptr, sa_ptr, sb_ptr, M, N, K, BATCH,
                          scb, scm, scn, sib, sim, sin_, alpha, beta,
                          BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
                          NUM_SMS: tl.constexpr, PRECISION: tl.constexpr,
                          A_T: tl.constexpr, B_T: tl.constexpr, A_3D: tl.constexpr, B_3D: tl.constexpr,
                          C_TMA: tl.constexpr, HAS_BETA: tl.constexpr, HAS_SCALE: tl.constexpr,
                          WS: tl.constexpr, SWAP: tl.constexpr = False, REG_A: tl.constexpr = False,
                          FLAT: tl.constexpr = False):
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
            a = _load_tile(a_desc, bid, off_m, off_k, BM, BK, A_T, A_3D)
            b = _load_tile(b_desc, bid, off_k, off_n, BK, BN, B_T, B_3D)
            if SWAP:
                acc = tl.dot(mma_a(b.T, REG_A), a.T, acc, input_precision=PRECISION)
            else:
                acc = tl.dot(mma_a(a, REG_A), b, acc, input_precision=PRECISION)
        if SWAP:
            acc = acc.T
        b64 = bid.to(tl.int64)
        acc = scale_acc(acc, i_ptr + b64 * sib, sa_ptr, sb_ptr, M, N, sim, sin_, alpha, beta, off_m, off_n,
                        BM, BN, HAS_BETA, HAS_SCALE)
        if C_TMA:
            c_desc.store([off_m, off_n], acc.to(c_ptr.dtype.element_ty))
        else:
            store_ptr(acc, c_ptr + b64 * scb, M, N, scm, scn, off_m, off_n, BM, BN)


# ---- host side --------------------------------------------------------------------------------


def _tma_ok(x: torch.Tensor, inner: int) -> bool:
    """Can x be described with dimension `inner` (-1 or -2) contiguous? 16-byte aligned base and
    strides (TMA's rules)."""
    s = x.element_size()
    if x.data_ptr() % 16 or x.stride(inner) != 1:
        return False
    others = [x.stride(d) for d in range(x.dim()) if d != x.dim() + inner and not (x.dim() == 3 and d == 0 and x.shape[0] == 1)]
    return all((st * s) % 16 == 0 and st > 0 for st in others)


def _squeeze(x: torch.Tensor) -> torch.Tensor:
    return x[0] if x.dim() == 3 and x.shape[0] == 1 else x


def _make_kmajor(x: torch.Tensor, which: str) -> torch.Tensor:
    if which == "a":
        return x.contiguous()
    return x.transpose(-1, -2).contiguous().transpose(-1, -2)


class _Address:
    """A device address standing in for a tensor as a TensorDescriptor's base: Triton's launcher
    reads only data_ptr() (the constructor also its dtype), so a kept descriptor keeps no tensor."""

    __slots__ = ("ptr", "dtype")

    def __init__(self, ptr: int, dtype):
        self.ptr, self.dtype = ptr, dtype

    def data_ptr(self) -> int:
        return self.ptr


def _desc(x: torch.Tensor, rows: int, cols: int, trans: bool, by_address: bool = False) -> TensorDescriptor:
    """Descriptor for a logical rows×cols operand tile (rows×cols box), stored transposed if trans;
    over x's address instead of x itself if by_address (a plan keeps it without keeping x)."""
    if trans:  # memory is (…, cols-dim, rows-dim) with the logical row index contiguous
        shape = list(x.shape[:-2]) + [x.shape[-1], x.shape[-2]]
        strides = list(x.stride()[:-2]) + [x.stride(-1), x.stride(-2)]
        block = [cols, rows]
    else:
        shape, strides, block = list(x.shape), list(x.stride()), [rows, cols]
    if x.dim() == 3:
        block = [1] + block
    return TensorDescriptor(_Address(x.data_ptr(), x.dtype) if by_address else x, shape, strides, block)


def usable(p: C.Problem) -> str:
    """'' when TMA can describe the operands, else the reason it cannot."""
    if p.a.device.type == "cuda" and C.capability(p.a.device) < (9, 0):
        return "TMA needs sm_90"
    for x, which in ((p.a, "a"), (p.b, "b")):
        x = _squeeze(x)
        inner = -1 if (x.stride(-1) == 1) else -2
        if x.stride(inner) != 1:
            return f"{which}: neither rows nor columns are contiguous"
        if not _tma_ok(x, inner):
            return f"{which}: base or strides not 16-byte aligned (TMA)"
    return ""


def candidates(p: C.Problem) -> list[dict]:
    ins, outs = p.a.element_size(), p.c.element_size()
    c_tma_possible = p.batch == 1 and _squeeze(p.c).dim() == 2 and _tma_ok(_squeeze(p.c), -1)
    narrow = ins != 2  # TF32 / FP8: wgmma wants K-major operands from shared memory
    bad_layout = narrow and (not C.is_kmajor(p.a, "a") or not C.is_kmajor(p.b, "b"))
    # without a copy: C = A·B, or C^T = B^T·A^T with B^T in registers (row-major B in TF32)
    plain, swapped = C.reg_a(p, False), C.reg_a(p, True)
    out = []
    for i, c in enumerate(C.prune(C.base_configs(p), p, tma_store=False)):
        c = dict(c, C_TMA=c_tma_possible and C.smem_bytes(c, ins, outs, True) <= C.SMEM_BUDGET)
        variants = [c]
        if ins != 4 and (i < 2 or c["BN"] == 256) and p.m > 256:
            # FLAT: one loop over (tile, k-step), so the next tile's first copies overlap this
            # tile's epilogue. It won some FP8/FP16 shapes and lost others, so both are timed;
            # it lost every TF32 shape tried, so FP32 operands skip it (docs/perf-notes.md, 16)
            variants = [c, dict(c, FLAT=True)]
        for v in variants:
            mine = []
            swap = C.swap_form(p, c["BM"])
            if swap:
                mine.append(dict(v, **swap))
            if plain is not None:
                mine.append(dict(v, REG_A=True) if plain else v)
            if bad_layout:  # a K-major copy (2·K·N·s extra bytes, counted), then Triton's own way
                if p.k * ins % 16 == 0:  # the copy's rows are K long: TMA needs them 16-byte aligned
                    mine.append(dict(v, KMAJOR=True))
                if plain is None and swapped is None:
                    mine.append(v)
            out += mine
    return out


def default_config(p: C.Problem) -> dict:
    return candidates(p)[0]


def _launch_args(p: C.Problem, cfg: dict, by_address: bool = False):
    """(grid, kwargs) of one launch of `tma_persistent_kernel` for problem p and configuration cfg;
    by_address: descriptors over addresses, for a plan to keep (`_desc`)."""
    a, b = p.a, p.b
    if cfg.get("KMAJOR"):
        if not C.is_kmajor(a, "a"):
            a = _make_kmajor(a, "a")
        if not C.is_kmajor(b, "b"):
            b = _make_kmajor(b, "b")
    a, b = _squeeze(a), _squeeze(b)
    c2 = _squeeze(p.c)
    a_t, b_t = a.stride(-1) != 1, b.stride(-1) != 1
    BM, BN, BK = cfg["BM"], cfg["BN"], cfg["BK"]
    a_desc = _desc(a, BM, BK, a_t, by_address)
    b_desc = _desc(b, BK, BN, b_t, by_address)
    c_tma = bool(cfg.get("C_TMA")) and c2.dim() == 2
    c_desc = _desc(c2, BM, BN, False, by_address) if c_tma else a_desc
    c_in, sa, sb = C.epilogue_args(p)
    sms = C.num_sms(p.a.device)
    tiles = ceil_div(p.m, BM) * ceil_div(p.n, BN) * p.batch
    kwargs = dict(
        a_desc=a_desc, b_desc=b_desc, c_desc=c_desc, c_ptr=p.c, i_ptr=c_in, sa_ptr=sa, sb_ptr=sb,
        M=p.m, N=p.n, K=p.k, BATCH=p.batch, scb=p.bstride(p.c), scm=p.c.stride(-2), scn=p.c.stride(-1),
        sib=p.bstride(c_in), sim=c_in.stride(-2), sin_=c_in.stride(-1), alpha=float(p.alpha), beta=float(p.beta),
        BM=BM, BN=BN, BK=BK, GROUP_M=cfg["GROUP_M"], NUM_SMS=sms, PRECISION=p.dot_precision,
        A_T=a_t, B_T=b_t, A_3D=a.dim() == 3, B_3D=b.dim() == 3, C_TMA=c_tma,
        HAS_BETA=p.has_beta, HAS_SCALE=p.scale_a is not None, WS=bool(cfg.get("WS")), FLAT=bool(cfg.get("FLAT")),
        **C.mma_form(cfg),
    )
    return (min(sms, tiles),), kwargs


def run(p: C.Problem, cfg: dict):
    """Launch once with configuration cfg; returns Triton's compiled kernel (None in the interpreter)."""
    grid, kwargs = _launch_args(p, cfg)
    return tma_persistent_kernel[grid](**kwargs, num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])


# ---- the launch plan cache -------------------------------------------------------------------
# A product of the same shapes, strides, dtypes and alignment as an earlier one reuses that call's
# decisions (TMA usable or not, the configuration) and Triton's compiled kernel, launched directly:
# no tuner lookup, no capability query, no Triton argument binding. When the operands are also at
# the same addresses as the plan's last call (a model's weights, a benchmark loop), the launch
# arguments themselves are reused: no descriptors or keyword dictionaries are built again. Keys
# and cached arguments hold addresses, never tensors, so the cache keeps no memory alive.
# TILEGEMM_FAST_LAUNCH=0 turns the direct launch off.

_PLANS: dict = {}
C.PLAN_CACHES.append(_PLANS)
_PLAN_MAX = 4096
_ARG_NAMES: dict = {}


def fast_launch_enabled() -> bool:
    import os

    return os.environ.get("TILEGEMM_FAST_LAUNCH", "1") not in ("0", "") and not C.interpreting()


def plan_key(p: C.Problem, tag: str = "") -> tuple:
    a, b, c = p.a, p.b, p.c
    ci = p.c_in if p.has_beta else None
    return (tag, C.autotune_enabled(), a.device, p.precision, a.dtype, b.dtype, c.dtype, a.shape, a.stride(), b.shape, b.stride(), c.shape,
            c.stride(), a.data_ptr() % 16 == 0, b.data_ptr() % 16 == 0, c.data_ptr() % 16 == 0,
            None if ci is None else (ci.shape, ci.stride(), ci.data_ptr() % 16 == 0, ci is c),
            p.scale_a is not None)


def addresses(p: C.Problem) -> tuple:
    """Where p's tensors are, and alpha and beta: with the plan key, all a launch's arguments
    depend on."""
    return (p.a.data_ptr(), p.b.data_ptr(), p.c.data_ptr(), p.c_in.data_ptr() if p.has_beta else 0,
            0 if p.scale_a is None else p.scale_a.data_ptr(), 0 if p.scale_b is None else p.scale_b.data_ptr(),
            p.alpha, p.beta)


# Direct launches done, and why they were turned off (one failure turns them off for the process:
# a failed attempt has already paid _launch_args, a K-major copy included, before the slow path).
DIRECT: dict = {"enabled": True, "launches": 0, "reused_args": 0, "error": ""}


def by_address(args) -> list:
    """Launch arguments with tensors replaced by their addresses (the launcher takes ints as
    pointers, and then skips its per-call pointer query; a kept list keeps no tensor alive)."""
    return [v.data_ptr() if isinstance(v, torch.Tensor) else v for v in args]


def positional(jit_fn, kwargs) -> list:
    """kwargs in jit_fn's parameter order, tensors as addresses."""
    names = _ARG_NAMES.get(jit_fn)
    if names is None:
        names = _ARG_NAMES[jit_fn] = tuple(jit_fn.arg_names)
    return by_address([kwargs[n] for n in names])


def runner(compiled, grid):
    """Triton's launcher for an already compiled kernel. CompiledKernel's runner indexes grid[0],
    grid[1], grid[2] (JITFunction.run pads, it does not): pad the grid to three dimensions."""
    return compiled[tuple(grid) + (1,) * (3 - len(grid))]


def _plan_args(p: C.Problem, cfg: dict):
    """(grid, positional launch arguments over addresses) of tma_persistent_kernel for p."""
    grid, kwargs = _launch_args(p, cfg, by_address=True)
    return grid, positional(tma_persistent_kernel, kwargs)


class Plan:
    """What `gemm` decided for one plan key, the compiled kernel once it has run, and the launch
    arguments of its last call with the addresses they were built for. build(p, cfg) gives
    (grid, positional arguments over addresses); direct holds the rung's launch counters (t05
    keeps plans of this kind for its own kernel)."""

    __slots__ = ("cfg", "result", "compiled", "reuse", "addresses", "args", "run", "build", "direct")

    def __init__(self, cfg, result, compiled, build=_plan_args, direct=None):
        self.cfg, self.result, self.compiled = cfg, result, compiled
        self.build, self.direct = build, DIRECT if direct is None else direct
        self.reuse = not cfg.get("KMAJOR")  # a K-major copy is a new tensor on every call
        self.addresses, self.args, self.run = None, None, None

    def launch(self, p: C.Problem) -> None:
        where = addresses(p)
        if where == self.addresses:
            self.direct["reused_args"] += 1
        else:
            grid, self.args = self.build(p, self.cfg)
            self.run = runner(self.compiled, grid)
            self.addresses = where if self.reuse else None
        self.run(*self.args)


def remember(key, plan, plans: dict = _PLANS) -> None:
    """plans[key] = plan, emptying plans first when it holds _PLAN_MAX of them (t04 keeps its own)."""
    if len(plans) >= _PLAN_MAX:
        plans.clear()
    plans[key] = plan


def planned(plans: dict, direct: dict, key, p: C.Problem):
    """The result of launching p on plans[key] directly, or None when there is no plan or the
    launch failed; a failure turns the rung's direct launches off (direct["error"] says why)."""
    plan = plans.get(key)
    if plan is None:
        return None
    try:
        plan.launch(p)
        direct["launches"] += 1
        return plan.result
    except Exception as e:  # noqa: BLE001  (a direct launch this Triton refuses: go the long way, from now on)
        plans.pop(key, None)
        direct["enabled"] = False
        direct["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
        return None


def through_plan(plans: dict, direct: dict, p: C.Problem, config: dict | None, key, tag: str, slow,
                 build=_plan_args) -> dict:
    """A rung's gemm around its launch plans: p launched directly on plans[key] where there is one;
    else slow(p, config) -> (result, compiled) runs it, and a plan is kept for the next call when
    compiled is the rung's own kernel (None where another rung ran p). key: p's plan_key when the
    caller (auto_gemm) has it already, else made here from tag (and the forced config, if any)."""
    fast = direct["enabled"] and p.a.device.type == "cuda" and fast_launch_enabled()
    if fast and (key is None or config is not None):
        key = plan_key(p, tag if config is None else (tag, tuple(sorted(config.items()))))
    if fast:
        done = planned(plans, direct, key, p)
        if done is not None:
            return done
        fast = direct["enabled"]
    result, compiled = slow(p, config)
    if fast and compiled is not None and hasattr(compiled, "packed_metadata"):
        cfg = {k: v for k, v in result.items() if k != "kernel"}
        remember(key, Plan(cfg, result, compiled, build, direct), plans)
    return result


def _fallback(key: str, why: str) -> None:
    if key not in fallbacks:
        fallbacks[key] = why
        warnings.warn(f"{NAME}: {why}", RuntimeWarning, stacklevel=3)


def gemm(p: C.Problem, config: dict | None = None, key: tuple | None = None) -> dict:
    """Run p through TMA when possible; otherwise (or if this Triton cannot build it) through t02.
    Returns the configuration used, with "kernel" naming the rung that ran. key: p's plan_key,
    when the caller (auto_gemm) has computed it already."""
    return through_plan(_PLANS, DIRECT, p, config, key, "t03", _gemm_slow)


def _gemm_slow(p: C.Problem, config: dict | None):
    why = usable(p)
    if why:
        fallbacks.setdefault(C.tune_key(NAME, p), why)
        return dict(t02_persistent.gemm(p), kernel=t02_persistent.NAME, fallback=why), None
    cfg = config or C.choose(NAME, p, candidates(p), default_config(p), run)
    try:
        compiled = run(p, cfg)
        return dict(cfg, kernel=NAME), compiled
    except Exception as e:  # noqa: BLE001  (compile errors of this Triton: degrade, say why)
        err = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
        loop_opts = [o for o in ("WS", "FLAT") if cfg.get(o)]  # loop attributes another Triton may refuse
        if loop_opts:
            _fallback(C.tune_key(NAME, p, "loop"), f"{'+'.join(loop_opts)} failed ({err}); ran without")
            cfg2 = dict(cfg, WS=False, FLAT=False)
            try:
                compiled = run(p, cfg2)
                return dict(cfg2, kernel=NAME), compiled
            except Exception as e2:  # noqa: BLE001
                err = f"{type(e2).__name__}: {str(e2).splitlines()[0][:200] if str(e2) else ''}"
        _fallback(C.tune_key(NAME, p), f"TMA kernel failed ({err}); ran {t02_persistent.NAME}")
        return dict(t02_persistent.gemm(p), kernel=t02_persistent.NAME, fallback=err), None


def launch(a, b, c, stream=None):
    """The registry's launcher (what `matmul(kernel="auto")` reaches): the package's per-shape
    dispatch, so small-M products go to split-K where it tuned faster."""
    from . import auto_gemm

    with C.on_stream(stream):
        auto_gemm(C.problem_2d(a, b, c))


def traffic(m, n, k, s, bm=128, bn=256):
    return (m * k * ceil_div(n, bn) + k * n * ceil_div(m, bm) + m * n) * float(s)


