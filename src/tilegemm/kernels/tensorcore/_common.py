"""What the three Triton rungs share: the problem description, tile order, epilogue, and the tuner.

A `Problem` is one C = alpha·scale_a·scale_b·(A @ B) + beta·C_in on torch tensors, 2-D or
batched 3-D (a 2-D operand broadcasts over the batch with stride 0). Every operand is passed
with its strides, so transposed views run without copies.

Configurations (tile sizes, warps, stages) are tuned once per GPU, precision, layout and shape
bucket (each of M, N, K rounded up to a power of two) and the winner is kept in a JSON file,
`~/.cache/tilegemm/tensorcore.json` (directory from TILEGEMM_CACHE_DIR), so later processes skip
the tuning. TILEGEMM_AUTOTUNE=0 uses a heuristic configuration and never tunes;
TILEGEMM_TUNE_BUDGET_S caps the seconds spent tuning one key (default 30).
"""

from __future__ import annotations

import json
import math
import os
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass, field

import torch
import triton
import triton.language as tl

from ...sampling import alternate

SMEM_BUDGET = 227 * 1024  # bytes of shared memory one block may use on sm_90
INT32_MAX = 2**31 - 1

# precision name -> (torch input dtype, tl.dot input_precision)
PRECISIONS = {
    "fp16": (torch.float16, "ieee"),
    "bf16": (torch.bfloat16, "ieee"),
    "tf32": (torch.float32, "tf32"),
    "ieee": (torch.float32, "ieee"),
    "fp8": (None, "ieee"),  # float8_e4m3fn or float8_e5m2
}
FP8_DTYPES = (torch.float8_e4m3fn, torch.float8_e5m2)


def precision_of(dtype: torch.dtype) -> str:
    """Default precision for an input dtype: FP32 means exact IEEE, never TF32 silently."""
    if dtype == torch.float16:
        return "fp16"
    if dtype == torch.bfloat16:
        return "bf16"
    if dtype == torch.float32:
        return "ieee"
    if dtype in FP8_DTYPES:
        return "fp8"
    raise TypeError(f"tensor-core kernels take float16, bfloat16, float32 or float8 inputs; got {dtype}")


# ---- the problem ------------------------------------------------------------------------------


@dataclass
class Problem:
    a: torch.Tensor  # (M, K) or (B, M, K)
    b: torch.Tensor  # (K, N) or (B, K, N)
    c: torch.Tensor  # (M, N) or (B, M, N), written
    precision: str  # key of PRECISIONS
    alpha: float = 1.0
    beta: float = 0.0
    c_in: torch.Tensor | None = None  # read when beta != 0 (may be c itself)
    scale_a: torch.Tensor | None = None  # one-element float32 tensors (FP8)
    scale_b: torch.Tensor | None = None
    m: int = field(init=False)
    n: int = field(init=False)
    k: int = field(init=False)
    batch: int = field(init=False)

    def __post_init__(self):
        a, b, c = self.a, self.b, self.c
        self.m, self.k = a.shape[-2:]
        self.n = b.shape[-1]
        self.batch = max(a.shape[0] if a.dim() == 3 else 1, b.shape[0] if b.dim() == 3 else 1,
                         c.shape[0] if c.dim() == 3 else 1)
        if b.shape[-2] != self.k:
            raise ValueError(f"inner dimensions differ: a {tuple(a.shape)}, b {tuple(b.shape)}")
        if c.shape[-2] != self.m or c.shape[-1] != self.n:
            raise ValueError(f"c has shape {tuple(c.shape)}; the product is {self.m}×{self.n}")
        for x, what in ((a, "a"), (b, "b"), (c, "c"), (self.c_in, "c_in")):
            if x is None:
                continue
            if x.dim() == 3 and x.shape[0] not in (1, self.batch):
                raise ValueError(f"{what}: batch {x.shape[0]} does not broadcast to {self.batch}")
            (rows, cols), (s0, s1) = x.shape[-2:], x.stride()[-2:]
            if (rows - 1) * abs(s0) + (cols - 1) * abs(s1) > INT32_MAX:
                raise ValueError(f"{what}: one matrix spans more than 2^31 elements; split the product")
        if c.dim() == 2 and self.batch > 1:
            raise ValueError("c must be 3-D for a batched product")

    @property
    def has_beta(self) -> bool:
        return self.beta != 0.0 and self.c_in is not None

    @property
    def in_dtype(self) -> torch.dtype:
        return self.a.dtype

    @property
    def dot_precision(self) -> str:
        return PRECISIONS[self.precision][1]

    def bstride(self, x) -> int:
        """Batch stride, 0 for a 2-D operand (broadcast) or a batch of one."""
        return x.stride(0) if x is not None and x.dim() == 3 and x.shape[0] > 1 else 0

    def mat_strides(self, x) -> tuple[int, int]:
        return x.stride(-2), x.stride(-1)

    def layout(self) -> str:
        """'n' when an operand's rows are contiguous (row-major), 't' when its columns are."""
        def one(x):
            s0, s1 = self.mat_strides(x)
            return "n" if s1 == 1 else ("t" if s0 == 1 else "s")
        return one(self.a) + one(self.b)

    def flops(self) -> float:
        return 2.0 * self.batch * self.m * self.n * self.k


def scale_tensor(s, device) -> torch.Tensor:
    """A per-tensor scale as a one-element float32 tensor on `device` (no host sync)."""
    if isinstance(s, torch.Tensor):
        if s.numel() != 1:
            raise ValueError(f"per-tensor scales only: got a scale with {s.numel()} elements")
        return s.reshape(1).to(device=device, dtype=torch.float32)
    return torch.full((1,), float(s), dtype=torch.float32, device=device)


# ---- device facts, cached ---------------------------------------------------------------------

_DEV: dict = {}  # device index -> (multiprocessor count, (major, minor), name): read once per process


def _dev_index(device: torch.device) -> int:
    return device.index if device.index is not None else torch.cuda.current_device()


def device_facts(device: torch.device) -> tuple[int, tuple[int, int], str]:
    """(SM count, compute capability, name) of a CUDA device, cached: get_device_properties costs
    microseconds per call, which a small product cannot afford on every launch."""
    idx = _dev_index(device)
    facts = _DEV.get(idx)
    if facts is None:
        prop = torch.cuda.get_device_properties(idx)
        facts = _DEV[idx] = (prop.multi_processor_count, (prop.major, prop.minor), prop.name)
    return facts


def num_sms(device: torch.device) -> int:
    if device.type != "cuda":
        return 4  # the interpreter: any small number exercises the persistent loop
    return device_facts(device)[0]


def capability(device: torch.device) -> tuple[int, int]:
    if device.type != "cuda":
        return (9, 0)  # the interpreter takes the sm_90 paths (TMA descriptors are emulated)
    return device_facts(device)[1]


def gpu_name(device: torch.device) -> str:
    if device.type != "cuda":
        return "interpreter"
    return device_facts(device)[2]


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def _interpreter_numpy_shim() -> None:
    """Triton 3.6's interpreter turns a scalar tensor into an int with int(ndarray of shape (1,)),
    which NumPy 2.4 refuses ("only 0-dimensional arrays can be converted"), so any loop bounded
    by a run-time scalar fails under TRITON_INTERPRET=1. Re-patch `__index__` to take the one
    element. Only ever installed in interpreter mode."""
    import numpy as np
    from triton.runtime import interpreter as interp

    if getattr(interp, "_tilegemm_shim", False) or not hasattr(interp, "_patch_lang_tensor"):
        return
    original = interp._patch_lang_tensor

    def patched(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(np.asarray(self.handle.data).reshape(-1)[0]))

    interp._patch_lang_tensor = patched
    interp._tilegemm_shim = True


if interpreting():
    _interpreter_numpy_shim()


# ---- pieces of kernel shared by the rungs -----------------------------------------------------


@triton.jit
def grouped_tile(tile, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """Tile index -> (pid_m, pid_n), walking GROUP_M rows of tiles column by column, so that
    consecutive programs share A rows and B columns in L2."""
    per_group = GROUP_M * num_pid_n
    group = tile // per_group
    first_m = group * GROUP_M
    rows = tl.minimum(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (tile % per_group) % rows
    pid_n = (tile % per_group) // rows
    return pid_m, pid_n


@triton.jit
def mma_a(x, REG_A: tl.constexpr):
    """x as the MMA's A operand, forced into registers if REG_A. Triton leaves an A operand that
    comes straight from a load in shared memory, where wgmma reads 32-bit and 8-bit elements only
    K-major; a computed A operand goes to registers (wgmma's register-A form), which has no layout
    rule. An identity move (which ptxas removes) makes it computed. Not for the interpreter."""
    if REG_A:
        x = tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=x.dtype, is_pure=True,
                                      pack=32 // x.dtype.primitive_bitwidth)
    return x


def reg_a(p: "Problem", swap: bool) -> bool | None:
    """Whether the MMA's A operand must come from registers for p's layouts, computing C = A·B
    (swap False) or C^T = B^T·A^T (swap True); None when no choice works without a copy.
    16-bit wgmma reads either layout from shared memory. 32- and 8-bit wgmma read the B operand
    only K-major, and the A operand K-major or from registers."""
    if p.a.element_size() == 2:
        return False
    a_k, b_k = is_kmajor(p.a, "a"), is_kmajor(p.b, "b")
    mma_a_k, mma_b_k = (b_k, a_k) if swap else (a_k, b_k)
    if not mma_b_k:
        return None
    return not mma_a_k


def mma_form(cfg: dict) -> dict:
    """A configuration's SWAP and REG_A launch arguments (REG_A off under the interpreter, which
    has no inline assembly)."""
    return {"SWAP": bool(cfg.get("SWAP")), "REG_A": bool(cfg.get("REG_A")) and not interpreting()}


def is_kmajor(x: torch.Tensor, which: str) -> bool:
    """Is operand `which` ("a": M×K, "b": K×N) stored with K contiguous?"""
    return x.stride(-1) == 1 if which == "a" else x.stride(-2) == 1


def swap_form(p: "Problem", bm: int) -> dict | None:
    """The swapped form (C^T = B^T·A^T) worth trying for a tile of bm rows, or None: where a tile
    under 64 rows would otherwise miss wgmma (its M is 64; swapped, the tile is its N, 8…256), or
    where the plain form needs a copy. Not for bm > 128 (wgmma N = 256): Triton 3.6 computed 0.7%
    of C wrong there on the H200."""
    swapped = reg_a(p, True)
    if swapped is None or bm > 128 or not (bm < 64 or reg_a(p, False) is None):
        return None
    return {"SWAP": True, "REG_A": swapped}


@triton.jit
def mainloop_ptr(a_ptr, b_ptr, M, N, K, sam, sak, sbk, sbn, off_m, off_n,
                 BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, PRECISION: tl.constexpr):
    """acc[BM, BN] = A[off_m:+BM, :] @ B[:, off_n:+BN] with masked loads (zeros past the edges)."""
    offs_m = off_m + tl.arange(0, BM)
    offs_n = off_n + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    mask_m = offs_m[:, None] < M
    mask_n = offs_n[None, :] < N
    a_ptrs = a_ptr + offs_m[:, None] * sam + offs_k[None, :] * sak
    b_ptrs = b_ptr + offs_k[:, None] * sbk + offs_n[None, :] * sbn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for kt in range(0, tl.cdiv(K, BK)):
        k_left = K - kt * BK
        a = tl.load(a_ptrs, mask=mask_m & (offs_k[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & mask_n, other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
        a_ptrs += BK * sak
        b_ptrs += BK * sbk
    return acc


@triton.jit
def scale_acc(acc, i_ptr, sa_ptr, sb_ptr, M, N, sim, sin_, alpha, beta, off_m, off_n,
              BM: tl.constexpr, BN: tl.constexpr, HAS_BETA: tl.constexpr, HAS_SCALE: tl.constexpr):
    """alpha·scale_a·scale_b·acc (+ beta·C_in), in FP32."""
    if HAS_SCALE:
        acc = acc * (tl.load(sa_ptr) * tl.load(sb_ptr))
    acc = acc * alpha
    if HAS_BETA:
        offs_m = off_m + tl.arange(0, BM)
        offs_n = off_n + tl.arange(0, BN)
        mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
        c_in = tl.load(i_ptr + offs_m[:, None] * sim + offs_n[None, :] * sin_, mask=mask, other=0.0)
        acc += beta * c_in.to(tl.float32)
    return acc


@triton.jit
def store_ptr(acc, c_ptr, M, N, scm, scn, off_m, off_n, BM: tl.constexpr, BN: tl.constexpr):
    offs_m = off_m + tl.arange(0, BM)
    offs_n = off_n + tl.arange(0, BN)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(c_ptr + offs_m[:, None] * scm + offs_n[None, :] * scn, acc.to(c_ptr.dtype.element_ty), mask=mask)


def epilogue_args(p: Problem):
    """(c_in, scale_a, scale_b) tensors to pass; unused ones point at c (never read)."""
    c_in = p.c_in if p.has_beta else p.c
    sa = p.scale_a if p.scale_a is not None else p.c
    sb = p.scale_b if p.scale_b is not None else p.c
    return c_in, sa, sb


# ---- configurations ---------------------------------------------------------------------------


def cfg(bm, bn, bk, warps, stages, group=8, **extra) -> dict:
    return dict(BM=bm, BN=bn, BK=bk, GROUP_M=group, num_warps=warps, num_stages=stages, **extra)


def smem_bytes(c: dict, in_size: int, out_size: int, tma_store: bool) -> int:
    """Pipelined A and B tiles, plus the C tile staged for a TMA store."""
    pipe = (c["BM"] * c["BK"] + c["BK"] * c["BN"]) * in_size * c["num_stages"]
    return pipe + (c["BM"] * c["BN"] * out_size if tma_store else 0)


# Known-good configurations, tried first (a tuning budget that runs out cannot lose them): the
# H200 winners of runs 2 and 3 by operand width and regime. (BM, BN, BK, warps, stages)
SEEDS = {
    1: {"big": [(128, 256, 128, 8, 3)], "mid": [(64, 128, 128, 4, 4), (128, 64, 128, 4, 4)],
        "small": [(64, 64, 256, 4, 4), (16, 64, 256, 4, 5)]},
    2: {"big": [(128, 256, 64, 8, 3)], "mid": [(64, 128, 64, 4, 4), (128, 64, 64, 4, 4)],
        "small": [(64, 64, 128, 4, 4), (16, 32, 256, 4, 4)]},
    4: {"big": [(128, 256, 32, 8, 3)], "mid": [(64, 128, 32, 4, 4), (128, 64, 32, 4, 4)],
        "small": [(32, 64, 64, 4, 4), (16, 64, 64, 4, 4)]},
}


def _mid_configs(size: int) -> list[dict]:
    """Tiles for products with few 128×128 tiles for the SMs (1024³: 64 of them for 132 SMs):
    64×128, 128×64 and 64×64, BK one or two 128-byte rows, 4 warps, 3–5 stages."""
    bk = {1: 128, 2: 64, 4: 32}.get(size, 64)
    return [cfg(64, 128, bk, 4, 4), cfg(128, 64, bk, 4, 4), cfg(64, 64, 2 * bk, 4, 4), cfg(64, 128, 2 * bk, 4, 3),
            cfg(128, 64, 2 * bk, 4, 3), cfg(64, 64, bk, 4, 5), cfg(64, 128, bk, 4, 3), cfg(64, 64, 2 * bk, 2, 3),
            cfg(128, 64, bk, 8, 5)]


def seeded(configs: list[dict], size: int, regime: str) -> list[dict]:
    """configs with this width's and regime's known-good ones moved (or added) to the front."""
    def sig(c):
        return (c["BM"], c["BN"], c["BK"], c["num_warps"], c["num_stages"])
    front = [cfg(*t) for t in SEEDS.get(size, {}).get(regime, [])]
    seen = {sig(c) for c in front}
    return front + [c for c in configs if sig(c) not in seen and not seen.add(sig(c))]


def few_tiles(p: Problem) -> bool:
    """Fewer 128×128 tiles of C than twice the SMs: smaller tiles may fill the GPU better."""
    tiles = -(-p.m // 128) * -(-p.n // 128) * p.batch
    return tiles < 2 * num_sms(p.a.device)


def base_configs(p: Problem) -> list[dict]:
    """The candidate space before pruning, by operand width and by M (known-good ones first)."""
    size = p.a.element_size()
    m = p.m
    if size == 1:  # FP8
        big = [cfg(128, 256, 128, 8, 3), cfg(128, 128, 128, 8, 4), cfg(256, 128, 128, 8, 3),
               cfg(128, 128, 128, 4, 4)]
        small = [cfg(64, 128, 128, 4, 4), cfg(64, 64, 256, 4, 4), cfg(32, 64, 256, 4, 4), cfg(16, 64, 256, 4, 5),
                 cfg(16, 32, 256, 4, 4), cfg(16, 64, 512, 4, 3), cfg(16, 32, 512, 4, 4)]
        decode = []
    elif size == 2:  # FP16 / BF16
        big = [cfg(128, 256, 64, 8, 3), cfg(128, 256, 64, 8, 4), cfg(128, 128, 64, 8, 4), cfg(256, 128, 64, 8, 3),
               cfg(128, 128, 64, 4, 4)]
        small = [cfg(64, 128, 64, 4, 4), cfg(64, 64, 128, 4, 4), cfg(32, 64, 128, 4, 4), cfg(16, 64, 128, 4, 5),
                 cfg(16, 32, 256, 4, 4)]
        decode = []
    else:  # FP32 inputs (TF32 or IEEE)
        # TF32: 128×256×32 (3 stages, 2 consumer warpgroups) won runs 2–4; the others test deeper
        # pipelines (4–5 stages of BK = 32) and BK = 64
        big = [cfg(128, 256, 32, 8, 3), cfg(128, 256, 32, 8, 4), cfg(128, 128, 64, 8, 3), cfg(128, 128, 32, 8, 5),
               cfg(256, 128, 32, 8, 3), cfg(128, 128, 32, 4, 4)]
        small = [cfg(64, 128, 32, 4, 4), cfg(64, 64, 64, 4, 4), cfg(32, 64, 64, 4, 4), cfg(16, 64, 64, 4, 4)]
        # decode: 32 columns a program, 128 programs at 4096 columns, each over all of K with no
        # split to reduce (cuBLAS's GEMV there: 128 blocks; docs/perf-notes.md, 29)
        decode = [cfg(16, 32, 128, 4, 4), cfg(16, 32, 256, 4, 3)]
    if m <= 16:
        return seeded((small[3:] if size == 1 else small[-3:]) + decode, size, "small")
    if m <= 64:
        return seeded(small[:4] if size == 1 else small, size, "small")
    if m <= 256:
        return seeded(small[:2] + _mid_configs(size)[:3] + big, size, "small")
    if few_tiles(p):
        mid = _mid_configs(size)
        return seeded(mid[:2] + big[:1] + mid[2:] + big[-1:], size, "mid")
    return seeded(big, size, "big")


def prune(configs: list[dict], p: Problem, tma_store: bool) -> list[dict]:
    """Drop configurations that overflow shared memory, and tiles far larger than the problem."""
    ins, outs = p.a.element_size(), p.c.element_size()
    keep = []
    for c in configs:
        if smem_bytes(c, ins, outs, tma_store) > SMEM_BUDGET:
            continue
        if c["BM"] > 2 * max(triton.next_power_of_2(p.m), 16) or c["BN"] > 2 * max(triton.next_power_of_2(p.n), 16):
            continue
        keep.append(c)
    return keep or [min(configs, key=lambda c: c["BM"] * c["BN"])]


def shape_bucket(p: Problem) -> str:
    def up(x):
        return triton.next_power_of_2(max(int(x), 1))
    return f"{up(p.m)}x{up(p.n)}x{up(p.k)}" + (f"b{p.batch}" if p.batch > 1 else "")


# ---- the tuner and its cache ------------------------------------------------------------------

_LOCK = threading.Lock()
_CACHE: dict | None = None
last_tuning: dict = {}  # what the most recent tuning did: key, seconds, timings, failures
tuning_log: list = []  # every tuning of this process: key, seconds, the fastest few (ms, config)


def cache_path() -> str:
    root = os.environ.get("TILEGEMM_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "tilegemm")
    return os.path.join(root, "tensorcore.json")


def _load_cache() -> dict:
    global _CACHE
    if _CACHE is None:
        try:
            with open(cache_path()) as f:
                _CACHE = json.load(f)
        except (OSError, ValueError):
            _CACHE = {}
    return _CACHE


def _save_cache() -> None:
    path = cache_path()
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tensorcore.", suffix=".json")
        with os.fdopen(fd, "w") as f:
            json.dump(_CACHE, f, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only home: tune again next process, still correct


def reset_cache() -> None:
    """Forget the in-memory copy (the next lookup rereads the file) and the per-process memo."""
    global _CACHE
    _CACHE = None
    _MEMO.clear()
    for plans in PLAN_CACHES:
        plans.clear()


# Per-process memo of resolved configurations: tune key -> cache entry. `choose` consults it before
# the JSON cache (no lock, no file); rungs keep their own launch plans on top of it.
_MEMO: dict = {}
PLAN_CACHES: list = []  # the rungs' launch-plan dicts, emptied by reset_cache


def autotune_enabled() -> bool:
    return os.environ.get("TILEGEMM_AUTOTUNE", "1").strip() not in ("0", "") and not interpreting()


TUNER_VERSION = "v8"  # v2: short products timed in CUDA graphs; v3: SWAP/REG_A; v4: FLAT, no WS; v5: settle;
# v6: t05 swapped TF32 on one pipelined partition; v7: no-split decode tiles for FP32 inputs; v8: settle
# (eager) interleaves single samples in batches (sampling.alternate), as the bench does
SETTLE = 3  # the fastest few candidates of a tuning, re-timed against each other (settle) before one wins
GRAPH_FLOPS = 2**35  # below this many FLOPs (2048³ is 2^34) a product is tuned on CUDA-graph replays


def tune_key(kernel_name: str, p: Problem, variant: str = "") -> str:
    return "|".join([
        kernel_name, gpu_name(p.a.device), p.precision, str(p.a.dtype).removeprefix("torch."),
        str(p.c.dtype).removeprefix("torch."), p.layout(), "beta" if p.has_beta else "nobeta",
        shape_bucket(p), variant, TUNER_VERSION,
    ])


HOLD_CYCLES = 1_000_000  # the hold before each tuning sample: ≈ 0.5–0.7 ms at the H200's 1.4–2 GHz
HOLD_MS = 0.8  # a sample's time besides the call: the hold and the flush
SETTLE_MIN = 20  # samples of each candidate, at least, in settle's eager re-timing (its budget notwithstanding)


def _flush_buffer() -> torch.Tensor:
    """256 MB to zero before each sample (over 4× the H200's L2, as triton.testing.do_bench)."""
    return torch.empty(64 * 2**20, dtype=torch.int32, device="cuda")


def _held_samples(fn, n: int, flush: torch.Tensor) -> list[float]:
    """n device times of fn() in ms: before each, L2 flushed (flush zeroed: 256 MB, as
    triton.testing.do_bench does) and then the GPU held busy (torch.cuda._sleep) while the host
    enqueues the start event, fn's launch and the end event, so the events bracket fn's kernels
    only, however long fn takes on the host."""
    pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
    for start, end in pairs:
        flush.zero_()
        torch.cuda._sleep(HOLD_CYCLES)
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in pairs]


def time_ms(fn, budget_ms: float = 60.0, graph: bool = False) -> float:
    """Median device time of fn() in ms.

    graph=False: one launch per sample, L2 flushed before each and the GPU held busy while fn is
    launched (_held_samples). Without the hold (triton.testing.do_bench), a launch whose Python
    side outlasts the flush is timed too: a forced configuration builds its TMA descriptors on
    every call (0.1 ms and more), which on a 0.1 ms product made t05 look 15% slower than it runs
    and lost it the t03/t05 verdict (docs/perf-notes.md, 26).
    graph=True: launches captured back to back in a CUDA graph and replayed
    (triton.testing.do_bench_cudagraph; L2 warm). For a product whose GPU time is a few µs a
    Python launch (20–100 µs) takes longer than the kernel, so eager samples time the host,
    rank configurations by launch overhead rather than by kernel speed, and pick by noise."""
    if graph:
        try:
            return float(triton.testing.do_bench_cudagraph(fn, rep=max(budget_ms / 2, 5.0), return_mode="median"))
        except Exception:  # noqa: BLE001  (a launch that cannot be captured is timed eagerly)
            torch.cuda.synchronize()
    fn()
    torch.cuda.synchronize()
    flush = _flush_buffer()
    est = max(statistics.median(_held_samples(fn, 3, flush)), 1e-3)
    for _ in range(min(100, int(max(budget_ms / 4, 2.0) / est) + 1)):  # warm-up, as do_bench's
        fn()
    per_sample = est + HOLD_MS
    return float(statistics.median(_held_samples(fn, max(5, min(500, int(budget_ms / per_sample))), flush)))


def settle(fns, budget_ms: float, graph: bool, rounds: int = 4) -> list[float]:
    """Each fn's median device time in ms, the fns timed against each other in alternating
    batches, the order reversed every round (sampling.alternate, the bench's rule). Timed once each
    in a fixed order, the later ones run on a GPU that has been working longer, whose clocks have
    dropped further under its power cap (docs/perf-notes.md, 22–23).

    Eager (graph=False): batches of five held samples (_held_samples: L2 flushed, the GPU held
    while the call is launched), until every median is known to 0.1%, or about
    budget_ms·rounds·len(fns) is spent and every fn has SETTLE_MIN samples, or 100 samples
    each. Before v8 each round timed each fn as one block (time_ms), which left whole blocks on
    either side of a drift: two such re-timings of the same four 8192³ configurations ranked
    them in opposite orders (docs/perf-notes.md, 31).
    graph=True: `rounds` rounds of one time_ms (itself a median of CUDA-graph replays) each."""
    if not fns:
        return []
    if graph:
        takers = [lambda n, f=f: [time_ms(f, budget_ms=budget_ms, graph=True) for _ in range(n)] for f in fns]
        series, _ = alternate(takers, budget_s=math.inf, min_reps=rounds, max_reps=rounds, target_rse=0.0, batch=1)
    else:
        flush = _flush_buffer()
        for f in fns:  # warm (the fns have run before: compiled, tuned)
            _held_samples(f, 1, flush)
        takers = [lambda n, f=f: _held_samples(f, n, flush) for f in fns]
        series, _ = alternate(takers, budget_s=budget_ms * rounds * len(fns) / 1e3, min_reps=SETTLE_MIN,
                              max_reps=100, target_rse=0.001, floor=SETTLE_MIN)
    return [statistics.median(t) for t in series]


def trial_problem(p: Problem) -> Problem:
    """p with a scratch output, for tuning: C (and C_in, which may be C itself) stays untouched."""
    return Problem(p.a, p.b, torch.empty_like(p.c), p.precision, p.alpha, p.beta, p.c_in, p.scale_a, p.scale_b)


def cached_entry(key: str) -> dict | None:
    """A tuning-cache entry: this process's, else the file's."""
    hit = _MEMO.get(key)
    if hit is None:
        with _LOCK:
            hit = _load_cache().get(key)
        if hit is not None:
            _MEMO[key] = hit
    return hit


def store_entry(key: str, entry: dict) -> None:
    with _LOCK:
        _load_cache()[key] = entry
        _save_cache()
    _MEMO[key] = entry


class _Probe:
    """Checks a tuning candidate's output: up to 16 rows × 256 columns (batch 0) against a float64
    product of the same inputs, to the precision's tolerance (validate.check). A configuration
    that Triton compiles wrongly (seen: a race in one swapped TF32 tile shape, 0.7% of elements
    off) fails here instead of winning on speed."""

    def __init__(self, p: Problem):
        from ... import validate

        self.p, self.validate = p, validate
        g = torch.Generator(device="cpu").manual_seed(p.m * 31 + p.n * 17 + p.k)
        self.rows = torch.randperm(p.m, generator=g)[:16].to(p.c.device)
        self.cols = torch.randperm(p.n, generator=g)[:256].to(p.c.device)
        a = p.a[0] if p.a.dim() == 3 else p.a
        b = p.b[0] if p.b.dim() == 3 else p.b
        scale = float(p.alpha)
        if p.scale_a is not None:
            scale *= float(p.scale_a.double().prod() * p.scale_b.double().prod())
        self.a = (take(a, 0, self.rows).double() * scale).cpu().numpy()
        self.b = take(b, 1, self.cols).double().cpu().numpy()
        self.ref = self.a @ self.b
        if p.has_beta:
            ci = p.c_in[0] if p.c_in.dim() == 3 else p.c_in
            self.ref = self.ref + float(p.beta) * ci[self.rows][:, self.cols].double().cpu().numpy()
        self.tol = {"fp16": "float16", "bf16": "bfloat16", "tf32": "tf32", "ieee": "float32"}.get(
            p.precision, "float8_e4m3fn")
        names = {torch.float16: "float16", torch.bfloat16: "bfloat16", torch.float32: "float32"}
        self.out = names.get(p.c.dtype)

    def wrong(self) -> str:
        c = self.p.c[0] if self.p.c.dim() == 3 else self.p.c
        got = c[self.rows][:, self.cols].double().cpu().numpy()
        chk = self.validate.check(got, self.a, self.b, dtype=self.tol, ref=self.ref, out_dtype=self.out)
        return "" if chk.ok else str(chk).splitlines()[0][:300]


def take(x: torch.Tensor, dim: int, idx: torch.Tensor) -> torch.Tensor:
    """index_select, through a uint8 view for FP8 (the same bytes)."""
    if x.element_size() == 1 and x.is_floating_point():
        return x.view(torch.uint8).index_select(dim, idx).view(x.dtype)
    return x.index_select(dim, idx)


def choose(kernel_name: str, p: Problem, candidates: list[dict], default: dict, run, variant: str = "") -> dict:
    """The configuration for this problem: cached, heuristic (no tuning), or tuned now.

    run(p, config) launches once. Tuning writes into a scratch output so that C (and C_in, which
    may be C itself) is untouched; a configuration that fails to compile or launch is skipped and
    recorded in `last_tuning['failed']`.
    """
    return choose_entry(kernel_name, p, candidates, default, run, variant)["config"]


def choose_entry(kernel_name: str, p: Problem, candidates, default: dict, run, variant: str = "") -> dict:
    """`choose`, returning the whole cache entry: {"config": …, "ms": tuned median or None}.
    candidates may be a list or a zero-argument callable (built only when tuning happens)."""
    if not autotune_enabled() or p.c.device.type != "cuda":
        return {"config": default, "ms": None}
    key = tune_key(kernel_name, p, variant)
    hit = cached_entry(key)
    if hit is not None:
        return hit
    if callable(candidates):
        candidates = candidates()
    budget_s = float(os.environ.get("TILEGEMM_TUNE_BUDGET_S", "30"))
    trial = trial_problem(p)
    scratch = trial.c
    graph = p.flops() < GRAPH_FLOPS
    t0 = time.perf_counter()
    timings, failed, skipped = [], [], 0
    probe = _Probe(trial)
    per_ms = min(60.0, max(10.0, budget_s * 1000 / (4 * len(candidates))))
    for c in candidates:
        if time.perf_counter() - t0 > budget_s and timings:
            skipped += 1  # the tuning budget is spent: not timed, and not a failure
            continue
        try:
            scratch.fill_(float("nan"))
            run(trial, c)
            torch.cuda.synchronize(p.c.device)
            wrong = probe.wrong()
            if wrong:  # never pick a fast configuration that computes something else
                failed.append((c, "wrong result: " + wrong))
                continue
            timings.append((time_ms(lambda: run(trial, c), budget_ms=per_ms, graph=graph), c))
        except Exception as e:  # noqa: BLE001  (a config that does not compile is information, not an error)
            failed.append((c, f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"))
    if not timings:
        last_tuning.clear()
        last_tuning.update(key=key, seconds=time.perf_counter() - t0, timings=[], failed=failed, config=default)
        return {"config": default, "ms": None}
    timings.sort(key=lambda t: t[0])
    first, settled = list(timings), 0  # the single pass, kept for the log
    if len(timings) > 1:  # the fastest few, again, against each other (settle); they are known to run
        top = timings[:SETTLE]
        try:
            again = settle([lambda c=c: run(trial, c) for _, c in top], budget_ms=per_ms, graph=graph)
            timings = sorted(zip(again, (c for _, c in top)), key=lambda t: t[0]) + timings[SETTLE:]
            settled = len(top)
        except Exception as e:  # noqa: BLE001  (the single pass stands; the log says why)
            failed.append((top[0][1], f"settle: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"))
    seconds = time.perf_counter() - t0
    best_ms, best = timings[0]
    entry = dict(config=best, ms=best_ms, timing="graph" if graph else "eager", tune_s=round(seconds, 3),
                 tried=len(timings), failed=len(failed), skipped=skipped, settled=settled,
                 m=p.m, n=p.n, k=p.k, when=time.strftime("%Y-%m-%dT%H:%M:%S"))
    store_entry(key, entry)
    last_tuning.clear()
    last_tuning.update(key=key, seconds=seconds, timings=timings, failed=failed, config=best)
    del tuning_log[:-255]
    tuning_log.append(dict(key=key, seconds=round(seconds, 2), tried=len(timings), failed=len(failed), skipped=skipped,
                           fastest=[(round(ms, 5), c) for ms, c in timings[:6]],
                           single_pass=[(round(ms, 5), c) for ms, c in first[:SETTLE]]))
    return entry


# ---- launching on the caller's stream ---------------------------------------------------------


class on_stream:
    """`with on_stream(s):` runs Triton launches on torch stream s (None: the current one)."""

    def __init__(self, stream):
        self.ctx = torch.cuda.stream(stream) if isinstance(stream, torch.cuda.Stream) else None

    def __enter__(self):
        if self.ctx is not None:
            self.ctx.__enter__()

    def __exit__(self, *exc):
        if self.ctx is not None:
            return self.ctx.__exit__(*exc)
        return False


def problem_2d(a, b, c) -> Problem:
    """The registry's launch(a, b, c): C = A @ B with the precision the input dtype implies."""
    return Problem(a, b, c, precision_of(a.dtype))


def geomean(xs) -> float:
    xs = [x for x in xs if x and x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")
