"""Is a product right? A float64 reference, one tolerance table, and a report that helps.

Two tests, both must pass:
1. Elementwise: |c − ref| ≤ bound, with the classical forward-error bound for a length-K dot
   product, |ĉ − c| ≤ γ·(|A||B|), γ ≈ max(min(K, 16·sqrt(K)), K·ρ/2)·u, where u is the unit
   roundoff of the precision the kernel accumulates in and ρ = |ref| / |A||B| (1 where every term
   has one sign, whose roundings drift one way; FP8's ~14-bit accumulator keeps ρ = 0), plus the
   rounding of the inputs (TF32) and of the output (FP16/BF16). Any summation order satisfies it
   (the sqrt(K) form with overwhelming probability), while a missing tile, an unwritten element
   or a race misses by orders of magnitude (at one sign, by more than K·u/2: a tile of 32 in
   K = 4096 is 0.8%, the bound 1.2e-4).
2. Relative Frobenius error ‖c − ref‖ / ‖ref‖ below the dtype's tolerance (the headline number),
   or, with a full FP32 or FP64 accumulator, below 2·sqrt(K)·u or K·ρ·u/2 where that is larger
   (long sums: FP32 from K ≈ 7000; sums of one sign, ρ = ‖ref‖ / ‖|A||B|‖ near 1, from K ≈ 340).
Both carry the absolute terms of underflow: K products each rounded in the accumulation's subnormal
range (up to half its smallest spacing) and the output in its own (one spacing), so that a product
of tiny operands, correctly rounded to a subnormal or to 0, passes.
NaN and Inf never pass where the reference is finite. Outputs are poisoned with NaN before a
checked run (`poison`) so that an element no thread wrote shows up as NaN.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .errors import DTypeError, ShapeError


@dataclass(frozen=True)
class Tolerance:
    rel_fro: float  # largest accepted ‖c − ref‖_F / ‖ref‖_F
    u_acc: float  # unit roundoff of the accumulation
    u_in: float  # rounding applied to each input before multiplying (0: inputs used exactly)
    u_out: float  # rounding of the stored output
    why: str
    eta_out: float = 0.0  # absolute rounding of the output where it is subnormal (spacing there)
    eta_acc: float = 0.0  # absolute rounding of each product where it underflows in the accumulation's format


# Sums of one sign (ρ = |ref| / |A||B| = 1): recursive summation's error is Σ δ_i·s_i, |δ_i| ≤ u, over
# partial sums that grow to the total; growing evenly they average half of it, so K·u/2. Correct
# sequential FP32 sums of constants measured 0.07–0.22·K·u (K = 4096 to 2^20); the rigorous K·u
# would pass a sum short by a whole tile.
ONE_SIGN = 0.5

# Unit roundoffs: 2^-53 (FP64), 2^-24 (FP32), 2^-11 (FP16, TF32 inputs), 2^-8 (BF16), 2^-4 (E4M3).
TOLERANCES: dict[str, Tolerance] = {
    "float64": Tolerance(1e-12, 2.0**-53, 0, 2.0**-53,
                         "FP64 accumulation: errors near 1e-16·sqrt(K); 1e-12 leaves room for K up to 1e6",
                         eta_out=2.0**-1074, eta_acc=2.0**-1075),
    "float32": Tolerance(1e-5, 2.0**-24, 0, 2.0**-24,
                         "FP32 accumulation: random-sign errors grow like sqrt(K)·6e-8, about 4e-6 at K = 4096",
                         eta_out=2.0**-149, eta_acc=2.0**-150),
    # Tensor cores read FP32 operands as TF32 by dropping the low 13 bits (truncation, not
    # rounding: up to 2^-10 relative per input; seen at K = 1 on the H200).
    "tf32": Tolerance(5e-3, 2.0**-24, 2.0**-10, 2.0**-24,
                      "inputs cut to TF32's 10-bit mantissa (up to 2^-10 each, truncated); not IEEE FP32: ≈1e-3 expected",
                      eta_out=2.0**-149, eta_acc=2.0**-150),
    # Half-precision outputs: one unit in the last place (2u), since a kernel's conversion is not
    # always correctly rounded (one element in 131072 was 1 ulp off on the H200 at K = 1).
    "float16": Tolerance(2e-3, 2.0**-24, 0, 2.0**-10,
                         "FP16 inputs are exact, FP32 accumulation, FP16 output within 1 ulp (2^-10 ≈ 9.8e-4; "
                         "below 2^-14 the spacing is a fixed 2^-24)", eta_out=2.0**-24, eta_acc=2.0**-150),
    "bfloat16": Tolerance(1e-2, 2.0**-24, 0, 2.0**-7,
                          "BF16 inputs are exact, FP32 accumulation, BF16 output within 1 ulp (2^-7 ≈ 7.8e-3)",
                          eta_out=2.0**-133, eta_acc=2.0**-150),
    # Hopper's FP8 tensor cores do not accumulate in full FP32: about 14 mantissa bits are kept
    # (DeepSeek-V3 technical report, section 3.3.2), so u_acc = 2^-13 here; cuBLAS shows the same.
    "float8_e4m3fn": Tolerance(1e-2, 2.0**-13, 0, 2.0**-8,
                               "FP8 inputs (after scaling) are exact; Hopper FP8 MMA accumulates with ~14 bits; BF16 output",
                               eta_out=2.0**-133, eta_acc=2.0**-150),
    "float8_e5m2": Tolerance(1e-2, 2.0**-13, 0, 2.0**-8,
                             "FP8 inputs (after scaling) are exact; Hopper FP8 MMA accumulates with ~14 bits; BF16 output",
                             eta_out=2.0**-133, eta_acc=2.0**-150),
}


def tolerance_for(dtype: str, out_dtype: str | None = None) -> Tolerance:
    if dtype not in TOLERANCES:
        raise DTypeError(f"validate: no tolerance for dtype {dtype!r}; known: {', '.join(TOLERANCES)} (dtype= names the "
                         "precision the product was computed in)")
    tol = TOLERANCES[dtype]
    if out_dtype and out_dtype != dtype and out_dtype in TOLERANCES:
        o = TOLERANCES[out_dtype]
        tol = Tolerance(max(tol.rel_fro, o.rel_fro), tol.u_acc, tol.u_in, o.u_out, f"{tol.why}; output {out_dtype}",
                        o.eta_out, tol.eta_acc)
    return tol


def reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """A @ B in float64 on the host."""
    return np.asarray(a, dtype=np.float64) @ np.asarray(b, dtype=np.float64)


@dataclass
class Check:
    ok: bool
    kernel: str
    shape: tuple[int, int, int]
    dtype: str
    rel_err: float
    tol: float
    n_bad: int
    n_total: int
    n_nan: int
    n_inf: int
    max_abs_err: float
    first_bad: list[tuple[int, int, float, float]] = field(default_factory=list)

    def __str__(self) -> str:
        m, n, k = self.shape
        head = f"{self.kernel} {m}×{n}×{k} {self.dtype}: "
        if self.ok:
            return head + f"OK (rel. Frobenius error {self.rel_err:.2e} ≤ {self.tol:.2g})"
        lines = [head + f"WRONG: {self.n_bad} of {self.n_total} elements outside the bound"
                 f" ({100 * self.n_bad / max(self.n_total, 1):.1f}%), rel. Frobenius error {self.rel_err:.2e}"
                 f" (tolerance {self.tol:.2g}), max |error| {self.max_abs_err:.3g},"
                 f" NaN {self.n_nan}, Inf {self.n_inf}"]
        for i, j, want, got in self.first_bad:
            d = next((d for d in (6, 9, 12) if f"{want:.{d}g}" != f"{got:.{d}g}"), 17)  # digits that tell them apart
            lines.append(f"    C[{i}, {j}]: expected {want:.{d}g}, got {got:.{d}g}")
        return "\n".join(lines)


def check(c, a, b, *, dtype: str | None = None, kernel: str = "?", ref: np.ndarray | None = None,
          out_dtype: str | None = None, max_report: int = 5) -> Check:
    """Compare host result `c` with the float64 product of host inputs `a`, `b`."""
    a64 = np.asarray(a, dtype=np.float64)
    b64 = np.asarray(b, dtype=np.float64)
    if not (1 <= a64.ndim <= 2 and 1 <= b64.ndim <= 2) or a64.shape[-1] != b64.shape[0]:
        raise ShapeError(f"validate.check: a and b must be a matrix or a vector each, M×K and K×N; got shapes "
                         f"{a64.shape} and {b64.shape}" + (" (check a batch one product at a time)"
                                                           if max(a64.ndim, b64.ndim) > 2 else ""))
    with np.errstate(invalid="ignore", over="ignore"):  # (Inf in the inputs: the reference's NaN is the check's)
        ref = a64 @ b64 if ref is None else np.asarray(ref, dtype=np.float64)
    c64 = np.asarray(c, dtype=np.float64)
    dtype = dtype or np.asarray(a).dtype.name
    tol = tolerance_for(dtype, out_dtype)
    if c64.shape != ref.shape:
        raise ShapeError(f"validate.check: result shape {c64.shape} differs from the reference's {ref.shape}")
    a64, b64 = (a64 if a64.ndim == 2 else a64[None, :]), (b64 if b64.ndim == 2 else b64[:, None])  # a vector: a
    # row, or a column, as matmul takes it
    m, k = a64.shape
    n = b64.shape[1]
    c64, ref = c64.reshape(m, n), ref.reshape(m, n)
    full = tol.u_acc <= 2.0**-24  # a full FP32 (or FP64) accumulator
    with np.errstate(invalid="ignore", over="ignore"):
        absprod = np.abs(a64) @ np.abs(b64)
        # (rho: how little the product cancels, |ref| / |A||B| elementwise: 1 where every term has one
        # sign; with a full FP32 or FP64 accumulator only: FP8's ~14-bit one is modelled on random signs)
        rho = np.divide(np.abs(ref), absprod, out=np.zeros_like(ref), where=(absprod > 0) & full)
        gamma = _growth(k, rho) * tol.u_acc / max(1.0 - k * tol.u_acc, 0.5) + 2 * tol.u_in + tol.u_in**2
        # underflow: each of the K products may lose up to eta_acc, the output its format's spacing there
        # (a product of tiny operands, correctly rounded to 0 or a subnormal, is not wrong)
        eta = k * tol.eta_acc + tol.eta_out
        bound = gamma * absprod + tol.u_out * np.abs(ref) + eta + np.finfo(np.float64).tiny
        err = np.abs(c64 - ref)
        finite_ref = np.isfinite(ref)
        bad = np.where(finite_ref, ~(err <= bound), ~_same_nonfinite(c64, ref))
        ref_norm = np.linalg.norm(np.where(finite_ref, ref, 0.0))
        diff_norm = np.linalg.norm(np.where(finite_ref, c64 - ref, 0.0))
        scale = np.linalg.norm(np.where(finite_ref, absprod, 0.0))
    if not np.all(np.isfinite(c64[finite_ref])):
        rel = float("inf")
    else:
        rel = float(diff_norm / ref_norm) if ref_norm > 0 else float(diff_norm)
    # The Frobenius test: ‖C − ref‖ ≤ rel_fro·max(‖ref‖, ‖|A||B|‖/√K). Random signs give
    # ‖ref‖ ≈ ‖|A||B|‖/√K, so usually the second term changes nothing; where the product cancels
    # further (a dot product summing near zero) it is a floor at the size these operands' products
    # have, below which the inputs' own rounding already decides the digits (the elements' bound
    # is unchanged). Written as a tolerance relative to ‖ref‖, as reported.
    # The dtype's rel_fro is set for the K the lab runs (FP32: 1e-5, "about 4e-6 at K = 4096"); a
    # sum order's error grows like sqrt(K)·u_acc (recursive summation: about 0.6·sqrt(K)·u_acc), so
    # with a full FP32 (or FP64) accumulator the tolerance is at least twice that: FP32 from K ≈ 7000
    # up (a correct sequential kernel, cpu_naive, at 8×8×2^20 was 1.96e-5 and failed the fixed 1e-5).
    # Not FP8's: its 1% is set from what Hopper's ~14-bit accumulation measured, not from a model.
    # Where the product barely cancels (one sign: ρ = ‖ref‖/‖|A||B|‖ near 1) the partial sums grow
    # with K and their roundings share a sign (cpu_naive at 2×2×4096 on constant 0.1: 2.1e-5), and
    # ONE_SIGN·K·ρ·u_acc is the tolerance's floor (at random signs ρ ≈ 1/√K: below the term before it).
    rho = float(ref_norm / scale) if scale > 0 else 0.0
    rel_fro = (max(tol.rel_fro, 2.0 * np.sqrt(max(k, 1)) * tol.u_acc, ONE_SIGN * k * rho * tol.u_acc) if full
               else tol.rel_fro)
    rel_tol = rel_fro * max(1.0, float(scale / (ref_norm * np.sqrt(max(k, 1))))) if ref_norm > 0 else rel_fro
    floor = float(np.sqrt(m * n)) * eta  # the underflow terms, absolute: ‖C − ref‖ may be that much whatever ‖ref‖
    rel_tol += floor / ref_norm if ref_norm > 0 else floor
    n_bad = int(bad.sum())
    idx = np.argwhere(bad)[:max_report]
    first = [(int(i), int(j), float(ref[i, j]), float(c64[i, j])) for i, j in idx]
    errs = np.where(finite_ref, err, 0.0)
    seen = errs[~np.isnan(errs)]  # (all NaN: a result never written; nanmax would warn)
    max_err = float(seen.max()) if seen.size else (float("inf") if err.size else 0.0)
    if not np.isfinite(max_err) or np.isnan(err[finite_ref]).any():
        max_err = float("inf")
    ok = n_bad == 0 and rel <= rel_tol
    return Check(ok, kernel, (m, n, k), dtype, rel, rel_tol, n_bad, int(c64.size),
                 int(np.isnan(c64).sum()), int(np.isinf(c64).sum()), max_err, first)


def _growth(k: int, rho):
    """K for the worst case; beyond K = 256 the probabilistic 16·sqrt(K) (Higham & Mary 2019,
    whose λ·sqrt(K)·u bound holds with probability ≥ 1 − 2·exp(−λ²/2) per element) is tighter,
    where the roundings are independent. They are not where every term has one sign (ρ = |ref| /
    |A||B| = 1): the partial sums grow steadily and their roundings drift one way (a correct
    sequential FP32 sum of 65536 terms of 0.01 is 5e-4 off, twice 16·sqrt(K)·u). There ONE_SIGN·K·ρ
    (random signs give ρ ≈ 1/sqrt(K): under 16·sqrt(K), nothing changes)."""
    return np.maximum(min(k, 16.0 * np.sqrt(k)), ONE_SIGN * k * rho)


def _same_nonfinite(c, ref):
    return (np.isnan(c) & np.isnan(ref)) | (c == ref)


def poison(x) -> None:
    """Fill an output buffer with NaN so that elements a kernel never wrote are caught."""
    if isinstance(x, np.ndarray):
        x.fill(np.nan)
    elif type(x).__module__.split(".")[0] in ("torch", "cupy"):
        x.fill_(float("nan")) if hasattr(x, "fill_") else x.fill(np.nan)
    else:  # Numba device array (or the simulator's)
        x.copy_to_device(np.full(x.shape, np.nan, dtype=x.dtype))


def random_operands(m: int, n: int, k: int, dtype="float32", seed: int | None = None):
    """Fresh inputs in [-1, 1) (integer dtypes: ±1 … ±3, unsigned 1 … 3): never zeros (they hide
    unwritten outputs and bad indexing): uniform values cast to an integer dtype would all be 0 or -1."""
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind in "iu":
        signed = np.dtype(dtype).kind == "i"
        draw = lambda shape: (rng.integers(1, 4, size=shape)  # noqa: E731
                              * (rng.choice([-1, 1], size=shape) if signed else 1)).astype(dtype)
        return draw((m, k)), draw((k, n))
    a = rng.uniform(-1.0, 1.0, size=(m, k)).astype(dtype)
    b = rng.uniform(-1.0, 1.0, size=(k, n)).astype(dtype)
    return a, b


def integer_operands(m: int, n: int, k: int, dtype="float32", seed: int | None = None):
    """Small integers (|x| ≤ 3): every product and partial sum is exact in FP32 for K < 2^20/9."""
    rng = np.random.default_rng(seed)
    a = rng.integers(-3, 4, size=(m, k)).astype(dtype)
    b = rng.integers(-3, 4, size=(k, n)).astype(dtype)
    return a, b
