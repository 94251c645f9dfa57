GEMV_STEP = 256  # K elements a warp's step: its 32 lanes × two 16-byte loads of a row
GEMV_ROWS = 16  # the decode form up to this many rows (x's step: rows × 256 × ks elements of shared memory)


@functools.lru_cache(maxsize=None)
def gemv_for(dtype_name: str, rows: int, cols: int, warps: int, has_bias: bool, ks: int = 1, ahead: bool = True):
    """The decode form of x @ Wᵀ for up to `rows` rows of x (a power of two), `cols` columns of C
    a warp, `warps` warps a block, of which each `ks` consecutive ones share their columns and split
    a block's step of K between them; `ahead`: a warp's loads of W's next step are issued before
    it multiplies the current one."""
    DT = numba.from_dtype(np.dtype(dtype_name))
    R, C, RC, C8, WARPS, KS = rows, cols, rows * cols, 8 * cols, warps, ks  # (constants: the local arrays' sizes)
    S = GEMV_STEP * KS  # a block's step of K
    AHEAD = ahead

    @cuda.jit
    def gemv_rows(x, w, c, bias):
        """C[:, n] = x @ W[n, :] (+ bias[0, n]) for a warp's C columns n: its lanes 16 bytes apart
        along each of the C rows of W (two 16-byte loads a row and step, a warp's 1 KB), x's step
        (R rows × S of K) staged in shared memory by the block once for its columns, each lane's
        R × C partial sums in registers, then summed across the warp (and the KS warps that split
        K) through shared memory. W is read once, its next step in flight while the current one is
        multiplied (AHEAD); x once a block."""
        xs = cuda.shared.array((R, S), DT, alignment=SMEM_ALIGN)
        part = cuda.shared.array((WARPS, R, 33), DT)  # (33: lane r's reads of row r spread over the banks)
        tid = cuda.threadIdx.x
        warp, lane = tid // 32, tid % 32
        n0 = (cuda.blockIdx.x * (WARPS // KS) + warp // KS) * C
        kw = warp % KS * GEMV_STEP  # this warp's part of a block's step
        M, K, N = x.shape[0], x.shape[1], w.shape[0]
        acc = cuda.local.array(RC, DT)
        wv = cuda.local.array(C8, DT)
        wn = cuda.local.array(C8, DT)
        for i in range(RC):
            acc[i] = DT(0)
        full = K // S * S
        if AHEAD and full > 0:
            for j in range(C):
                n = min(n0 + j, N - 1)  # (past N: a real row, read, never stored)
                wn[8 * j], wn[8 * j + 1], wn[8 * j + 2], wn[8 * j + 3] = ldg4(w, n, kw + lane * 4)
                wn[8 * j + 4], wn[8 * j + 5], wn[8 * j + 6], wn[8 * j + 7] = ldg4(w, n, kw + 128 + lane * 4)
        for k0 in range(0, full, S):
            if AHEAD:  # this step's W arrived (or is arriving); the next one's loads go out now
                for i in range(C8):
                    wv[i] = wn[i]
                if k0 + S < full:
                    for j in range(C):
                        n = min(n0 + j, N - 1)
                        kn = k0 + S + kw + lane * 4
                        wn[8 * j], wn[8 * j + 1], wn[8 * j + 2], wn[8 * j + 3] = ldg4(w, n, kn)
                        wn[8 * j + 4], wn[8 * j + 5], wn[8 * j + 6], wn[8 * j + 7] = ldg4(w, n, kn + 128)
            else:  # W first: its loads are in flight while x's step is staged
                for j in range(C):
                    n = min(n0 + j, N - 1)
                    wv[8 * j], wv[8 * j + 1], wv[8 * j + 2], wv[8 * j + 3] = ldg4(w, n, k0 + kw + lane * 4)
                    wv[8 * j + 4], wv[8 * j + 5], wv[8 * j + 6], wv[8 * j + 7] = ldg4(w, n, k0 + kw + 128 + lane * 4)
            for q in range(tid, R * (S // 4), 32 * WARPS):
                r, col = q // (S // 4), q % (S // 4) * 4
                a0 = a1 = a2 = a3 = DT(0)
                if r < M:
                    a0, a1, a2, a3 = ldg4(x, r, k0 + col)
                sts4(xs, r, col, a0, a1, a2, a3)
            cuda.syncthreads()
            for r in range(R):
                a0, a1, a2, a3 = lds4(xs, r, kw + lane * 4)
                b0, b1, b2, b3 = lds4(xs, r, kw + 128 + lane * 4)
                for j in range(C):
                    acc[r * C + j] += (a0 * wv[8 * j] + a1 * wv[8 * j + 1] + a2 * wv[8 * j + 2] + a3 * wv[8 * j + 3]
                                       + b0 * wv[8 * j + 4] + b1 * wv[8 * j + 5] + b2 * wv[8 * j + 6]
                                       + b3 * wv[8 * j + 7])
            cuda.syncthreads()
        for k in range(full + kw // 8 + lane, K, 32 * KS):  # K's tail, an element a lane (kw // 8: 32 a warp)
            for j in range(C):
                wk = at(w, min(n0 + j, N - 1), k)
                for r in range(R):
                    if r < M:
                        acc[r * C + j] += at(x, r, k) * wk
        for j in range(C):
            for r in range(R):
                part[warp, r, lane] = acc[r * C + j]
            cuda.syncthreads()
            if warp % KS == 0 and lane < M and n0 + j < N:  # lane r sums row r's partials (KS warps × 32)
                total = DT(0)
                for q in range(KS):
                    for i in range(32):
                        total += part[warp + q, lane, i]
                if has_bias:
                    total += bias[0, n0 + j]
                c[lane, n0 + j] = total
            cuda.syncthreads()

    return gemv_rows
