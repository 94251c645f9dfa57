"""Property cases of `tilegemm.gemm`, run in a process of their own (tests/test_properties.py
starts it): on a CPU under Triton's interpreter (TRITON_INTERPRET=1 must be set before triton is
imported), on a GPU as is. Prints one line, GEMM-PROPERTIES {"ran": N, "failed": F, "first": …}.

    python tests/_gemm_properties.py EXAMPLES [SEED]

Shapes (0, 1, primes, tile multiples ± 1), a batch with a 2-D operand broadcast, precisions
(fp16; FP32 inputs as ieee and tf32; on a GPU also bf16 and fp8), layouts (row-major, transposed
views, every other row and column), NumPy and torch operands, alpha/beta with an existing c,
the output dtype, and every rung by name; each result against alpha·A@B + beta·C in float64
within tilegemm.validate's bound for the precision, the inputs unchanged.
"""

from __future__ import annotations

import json
import sys

import numpy as np
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tilegemm
from tilegemm import validate

GPU = torch.cuda.is_available()
DEV = "cuda" if GPU else "cpu"
SPECIAL = [0, 1, 2, 3, 5, 7, 13, 16, 17, 31, 32, 33, 63, 64, 65]
RUNGS = ["auto", "tc_tiled", "tc_persistent", "tc_tma_persistent", "tc_splitk", "tc_gemv"] + \
    (["tc_warp_specialized"] if GPU else [])
PRECISIONS = ["fp16", "ieee", "tf32"] + (["bf16", "fp8"] if GPU else [])
TOL = {"fp16": "float16", "bf16": "bfloat16", "ieee": "float32", "tf32": "tf32", "fp8": "float8_e4m3fn"}
STATS = {"ran": 0, "failed": 0, "first": None}


def _operand(rng, shape, dtype, layout):
    x = torch.from_numpy(rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)).to(dtype)
    if layout == "T" and x.dim() >= 2:
        x = x.transpose(-1, -2).contiguous().transpose(-1, -2)
    elif layout == "slice" and x.dim() >= 2:
        big = torch.zeros(*x.shape[:-2], 2 * x.shape[-2], 2 * x.shape[-1], dtype=dtype)
        big[..., ::2, ::2] = x
        x = big[..., ::2, ::2]
    return x.to(DEV)


def _fp8_as_gemm_sees_it(x: torch.Tensor) -> torch.Tensor:
    """x after gemm's documented FP8 quantisation (per-tensor scale amax / e4m3 max), dequantised:
    the FP8 bound holds for the product of what the tensor cores multiply, not of the FP32 inputs
    (e4m3 keeps 3 mantissa bits: the rounding alone moves a product by up to ~6%)."""
    if x.numel() == 0:
        return x
    xf = x.float()
    s = (xf.abs().nan_to_num(nan=0.0, posinf=0.0).amax() / torch.finfo(torch.float8_e4m3fn).max).clamp(
        min=torch.finfo(torch.float32).tiny)
    nan = float("nan")
    return (xf / s).nan_to_num(nan=nan, posinf=nan, neginf=nan).to(torch.float8_e4m3fn).float() * s


def _case(m, n, k, batch, bcast, prec, la, lb, beta, alpha, out32, rung, numpy_in, seed):
    rng = np.random.default_rng(seed)
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp8": torch.float32}.get(prec, torch.float32)
    ashape = (batch, m, k) if batch and bcast != "a" else (m, k)
    bshape = (batch, k, n) if batch and bcast != "b" else (k, n)
    a, b = _operand(rng, ashape, dtype, la), _operand(rng, bshape, dtype, lb)
    oshape = (batch, m, n) if batch else (m, n)
    out_dtype = torch.float32 if out32 or prec in ("ieee", "tf32") else None
    odt = out_dtype or {"fp16": torch.float16, "bf16": torch.bfloat16, "fp8": torch.bfloat16}[prec]
    c0 = _operand(rng, oshape, odt, "C") if beta else None
    c = c0.clone() if beta else None
    a_keep, b_keep = a.clone(), b.clone()
    if numpy_in and dtype != torch.bfloat16 and not GPU:
        a, b = a.numpy(), b.numpy()
        c = c.numpy() if c is not None else None
    what = f"gemm {rung} {prec} a{ashape}:{la} b{bshape}:{lb} alpha {alpha} beta {beta} out {odt} numpy {numpy_in}"
    kw = dict(precision="auto" if prec in ("fp16", "bf16", "ieee") else prec, alpha=alpha, beta=beta, kernel=rung)
    if out_dtype is not None:
        kw["out_dtype"] = out_dtype
    got = tilegemm.gemm(a, b, c=c, **kw) if beta else tilegemm.gemm(a, b, **kw)
    got = torch.as_tensor(got).cpu().double()
    assert tuple(got.shape) == oshape, f"{what}: shape {tuple(got.shape)}"
    a_in, b_in = (_fp8_as_gemm_sees_it(a_keep), _fp8_as_gemm_sees_it(b_keep)) if prec == "fp8" else (a_keep, b_keep)
    a64 = torch.broadcast_to(a_in.double().cpu(), (batch or 1,) + ashape[-2:]) if batch else a_in.double().cpu()[None]
    b64 = torch.broadcast_to(b_in.double().cpu(), (batch or 1,) + bshape[-2:]) if batch else b_in.double().cpu()[None]
    ref = alpha * (a64 @ b64) + (beta * c0.double().cpu().reshape(a64.shape[0], m, n) if beta else 0)
    g3 = got.reshape(ref.shape)
    for i in range(ref.shape[0]):
        chk = validate.check(g3[i].numpy(), (alpha * a64[i]).numpy(), b64[i].numpy(), dtype=TOL[prec],
                             out_dtype=str(odt).removeprefix("torch."), ref=ref[i].numpy(), kernel=what)
        assert chk.ok, f"{what}, batch {i}:\n{chk}"
    back = (lambda x: torch.as_tensor(x)) if numpy_in else (lambda x: x)
    assert torch.equal(back(a).cpu(), a_keep.cpu()) and torch.equal(back(b).cpu(), b_keep.cpu()), \
        f"{what}: an input was modified"


def main(examples: int, seed: int) -> None:
    dims = st.sampled_from(SPECIAL) | st.integers(0, 40)

    @settings(max_examples=examples, deadline=None, derandomize=not GPU, database=None,
              suppress_health_check=list(HealthCheck))
    @given(m=dims, n=dims, k=dims, batch=st.sampled_from([0, 0, 0, 2, 3]), bcast=st.sampled_from(["", "a", "b"]),
           prec=st.sampled_from(PRECISIONS), la=st.sampled_from(["C", "T", "slice"]),
           lb=st.sampled_from(["C", "T", "slice"]), beta=st.sampled_from([0.0, 0.0, 1.0, -0.5]),
           alpha=st.sampled_from([1.0, 1.0, 2.0, -0.25]), out32=st.booleans(), rung=st.sampled_from(RUNGS),
           numpy_in=st.booleans(), s=st.integers(0, 2**32 - 1))
    def prop(m, n, k, batch, bcast, prec, la, lb, beta, alpha, out32, rung, numpy_in, s):
        STATS["ran"] += 1
        try:
            _case(m, n, k, batch, bcast, prec, la, lb, beta, alpha, out32, rung, numpy_in, s ^ seed)
        except BaseException as e:
            STATS["failed"] += 1  # failing executions, hypothesis's shrinking included
            STATS["first"] = STATS["first"] or f"{type(e).__name__}: {e}"[:2000]
            STATS["last"] = f"{type(e).__name__}: {e}"[:2000]  # the shrunk case is replayed last
            raise

    try:
        prop()
    except BaseException:  # noqa: BLE001  (reported below; hypothesis has shrunk it)
        pass
    print("GEMM-PROPERTIES " + json.dumps(STATS), flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 0)
