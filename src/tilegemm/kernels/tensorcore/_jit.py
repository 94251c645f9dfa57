"""Triton device helpers the rungs share: tile order, the MMA's register operand, the MMA itself (with
FP8's promotion to FP32 where asked), a TMA tile load, a masked main loop, the epilogue's scaling and
a masked store. Device code only; the host side is `_problem`."""

import triton
import triton.language as tl


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


@triton.jit
def dot(a, b, acc, PRECISION: tl.constexpr, PROMOTE: tl.constexpr):
    """acc + a @ b; PROMOTE > 0 (FP8): the MMA's partial sum joins acc in FP32 every PROMOTE of K
    (`_problem.Problem.promote`), else the MMA accumulates into acc itself."""
    if PROMOTE > 0:
        acc = tl.dot(a, b, acc, input_precision=PRECISION, max_num_imprecise_acc=PROMOTE)
    else:
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
    return acc


@triton.jit
def load_tile(desc, bid, off_r, off_c, R: tl.constexpr, CC: tl.constexpr, TRANS: tl.constexpr,
               BATCHED: tl.constexpr):
    """An R×CC tile at (off_r, off_c) through TMA descriptor desc (of batch bid where BATCHED);
    TRANS: stored transposed, so load CC×R and transpose."""
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
def mainloop_ptr(a_ptr, b_ptr, M, N, K, sam, sak, sbk, sbn, off_m, off_n,
                 BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, PRECISION: tl.constexpr,
                 WIDE: tl.constexpr = False, PROMOTE: tl.constexpr = 0):
    """acc[BM, BN] = A[off_m:+BM, :] @ B[:, off_n:+BN] with masked loads (zeros past the edges).
    WIDE: K's offsets and steps 64-bit too (off_m and off_n come 64-bit from the caller)."""
    offs_m = off_m + tl.arange(0, BM)
    offs_n = off_n + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    mask_m = offs_m[:, None] < M
    mask_n = offs_n[None, :] < N
    k_off = offs_k
    if WIDE:
        k_off = offs_k.to(tl.int64)
    a_ptrs = a_ptr + offs_m[:, None] * sam + k_off[None, :] * sak
    b_ptrs = b_ptr + k_off[:, None] * sbk + offs_n[None, :] * sbn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    step_a = BK * sak
    step_b = BK * sbk
    if WIDE:
        step_a = tl.cast(BK, tl.int64) * sak
        step_b = tl.cast(BK, tl.int64) * sbk
    for kt in range(0, tl.cdiv(K, BK)):
        k_left = K - kt * BK
        a = tl.load(a_ptrs, mask=mask_m & (offs_k[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & mask_n, other=0.0)
        acc = dot(a, b, acc, PRECISION, PROMOTE)
        a_ptrs += step_a
        b_ptrs += step_b
    return acc


@triton.jit
def scale_factors(sa, sb):
    """Two factors whose product, applied to the accumulator one after the other, is sa·sb: the one
    product (and 1) where it is a normal FP32 number, else sa and sb. Two small scales' product
    underflows (1e-20 · 1e-20 is a subnormal of 17 bits, not 24; 1e-23 · 1e-23 is 0) where the
    accumulator times one scale, then the other, is an ordinary number; two large ones' overflows."""
    s = sa * sb
    normal = (tl.abs(s) >= 1.1754943508222875e-38) & (tl.abs(s) <= 3.4028234663852886e38)
    return tl.where(normal, s, sa), tl.where(normal, 1.0, sb)


@triton.jit
def scale_acc(acc, i_ptr, sa_ptr, sb_ptr, M, N, sim, sin_, alpha, beta, off_m, off_n,
              BM: tl.constexpr, BN: tl.constexpr, HAS_BETA: tl.constexpr, HAS_SCALE: tl.constexpr):
    """alpha·scale_a·scale_b·acc (+ beta·C_in), in FP32."""
    if HAS_SCALE:
        first, second = scale_factors(tl.load(sa_ptr), tl.load(sb_ptr))
        acc = acc * first * second
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

