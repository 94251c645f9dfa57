"""Tensor-core (Triton) kernels: registration, the interpreter on CPU, and every dtype × layout × awkward
shape on a GPU.

Triton's interpreter (TRITON_INTERPRET=1) must be switched on before triton is first imported, and
other test modules import triton too, so the CPU checks run in a fresh Python process. The
interpreter computes FP16 and FP32 dots correctly on CPU tensors (BF16 it gets wrong, silently), so
those two run here; the rest needs a GPU (`pytest -m gpu`).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import tilegemm
from tilegemm import registry, validate

triton = pytest.importorskip("triton")
torch = pytest.importorskip("torch")

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
TC_NAMES = ("tc_tiled", "tc_persistent", "tc_tma_persistent")
ALL_TC = TC_NAMES + ("tc_splitk", "tc_gemv")


# ---- registration (no GPU needed) --------------------------------------------------------------


def test_rungs_registered_for_half_precisions_only():
    for name in TC_NAMES:
        k = registry.get(name)
        assert k.backend == "tensorcore"
        assert set(k.dtypes) == {"float16", "bfloat16"}, "TF32 is not FP32: float32 must not reach auto"
        assert k.auto_rank > 0 and not k.teaching
        assert k.doc.splitlines()[0], "each rung opens with a docstring"
        assert k.traffic(4096, 4096, 4096, 2) >= registry.bytes_compulsory(4096, 4096, 4096, 2)
    ranks = [registry.get(n).auto_rank for n in TC_NAMES]
    assert ranks == sorted(ranks) and len(set(ranks)) == 3
    assert registry.get("tc_tma_persistent").requires == "sm_90"


def test_import_is_light_and_rungs_load_on_first_use():
    """`import tilegemm` registers the tensor-core rungs without importing torch or Triton (about
    two seconds); the first use of a rung loads them."""
    code = textwrap.dedent("""
        import sys
        import tilegemm
        from tilegemm import registry
        assert "torch" not in sys.modules and "triton" not in sys.modules, "imported eagerly"
        k = registry.get("tc_tma_persistent")
        assert k.traffic(256, 256, 256, 2) > 0
        assert "triton" in sys.modules and "tilegemm.kernels.tensorcore.t03_tma_persistent" in sys.modules
        print("ok")
    """)
    # one rung imported on its own first (scripts and tests do) must not stop the others loading
    first_one = textwrap.dedent("""
        import sys
        from tilegemm.kernels import tensorcore as tc
        from tilegemm.kernels.tensorcore import t04_splitk  # noqa: F401
        assert tc.load()
        assert tc.rung_module("tc_tma_persistent").NAME == "tc_tma_persistent"
        print("ok")
    """)
    for snippet in (code, first_one):
        out = subprocess.run([sys.executable, "-c", snippet], capture_output=True, text=True, timeout=300,
                             env=dict(os.environ, TRITON_INTERPRET="0"))
        assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU message")
def test_not_runnable_without_gpu_says_why():
    ok, why = registry.get("tc_tiled").runnable()
    assert not ok and "CUDA GPU" in why


def test_configs_fit_shared_memory_and_shape():
    from tilegemm.kernels.tensorcore import _problem as P
    from tilegemm.tuning import space as S

    for dt in (torch.float16, torch.float32, torch.float8_e4m3fn):
        for m in (1, 16, 100, 128, 4096):
            a = torch.empty(m, 512, dtype=dt)
            b = torch.empty(512, 1024, dtype=dt)
            c = torch.empty(m, 1024, dtype=torch.float16)
            p = P.Problem(a, b, c, P.precision_of(dt))
            cands = S.candidates(S.T03, p)
            assert cands
            for cfg in cands:
                assert S.smem_bytes(cfg, a.element_size(), 2, cfg["C_TMA"]) <= S.SMEM_BUDGET, cfg
                assert cfg["BM"] <= 2 * max(triton.next_power_of_2(m), 16), (m, cfg)
    # 128×256×64 BF16 with 4 stages and its C tile does not fit; the pruner must drop it
    big = S.cfg(128, 256, 64, 8, 4)
    assert S.smem_bytes(big, 2, 2, True) > S.SMEM_BUDGET
    a = torch.empty(4096, 4096, dtype=torch.bfloat16)
    p = P.Problem(a, a, a, "bf16")
    assert big not in S.prune([big, S.cfg(128, 128, 64, 8, 4)], p, tma_store=True)


def test_shape_bucket_and_layout():
    from tilegemm.kernels.tensorcore import _problem as P
    from tilegemm.tuning import space as S

    a = torch.empty(100, 3000, dtype=torch.float16)
    b = torch.empty(3000, 5000, dtype=torch.float16)
    p = P.Problem(a, b, torch.empty(100, 5000, dtype=torch.float16), "fp16")
    assert S.shape_bucket(p) == "112x5120x3072"  # a quarter octave apart past 8
    assert [S.grid_up(x) for x in (1, 3, 8, 9, 100, 2048, 2049, 3000, 12345, 14336)] == \
        [1, 4, 8, 10, 112, 2048, 2560, 3072, 14336, 14336]
    batched = P.Problem(torch.empty(4, 64, 100, dtype=torch.float16), torch.empty(4, 100, 3000, dtype=torch.float16),
                        torch.empty(4, 64, 3000, dtype=torch.float16), "fp16")
    assert S.shape_bucket(batched) == "64x3072x112b4"
    assert p.layout() == "nn" and P.Problem(a, b.t().contiguous().t(), p.c, "fp16").layout() == "nt"


# ---- the interpreter, in a fresh process --------------------------------------------------------

INTERP_SCRIPT = textwrap.dedent(r"""
    import json, os, sys
    assert os.environ.get("TRITON_INTERPRET") == "1"
    import numpy as np, torch
    from tilegemm import dispatch, validate
    from tilegemm.kernels.tensorcore import _problem as C, t01_tiled, t02_persistent, t03_tma_persistent, t04_splitk
    from tilegemm.kernels.tensorcore import t06_gemv
    from tilegemm.tuning.space import cfg as tile
    torch.manual_seed(0)
    out = []

    def operand(shape, dt, layout):
        x = (torch.rand(*shape, dtype=torch.float32) * 2 - 1).to(dt)
        if layout == "t":  # same values, column-major storage: a transposed view, no copy later
            x = x.transpose(-1, -2).contiguous().transpose(-1, -2)
        return x

    def run(mod, m, n, k, dt, prec, la="n", lb="n", batch=0, bcast=False, alpha=1.0, beta=0.0, cfg=None):
        ashape = (batch, m, k) if batch else (m, k)
        bshape = (k, n) if (bcast or not batch) else (batch, k, n)
        a, b = operand(ashape, dt, la), operand(bshape, dt, lb)
        cshape = (batch, m, n) if batch else (m, n)
        c0 = (torch.rand(*cshape) * 2 - 1).to(dt)
        c = c0.clone() if beta else torch.full(cshape, float("nan"), dtype=dt)
        prob = C.Problem(a, b, c, prec, alpha, beta, c if beta else None)
        tma = bool((cfg or {}).get("TMA")) and mod is t04_splitk and t04_splitk.tma_ready(prob)
        used = dispatch.run_problem(prob, mod.NAME, config=cfg)
        a64, b64, c64 = a.double().numpy(), b.double().numpy(), c.double().numpy()
        tol = {"ieee": "float32", "fp16": "float16"}[prec]
        for i in range(max(batch, 1)):
            ai = a64[i] if batch else a64
            bi = b64 if (bcast or not batch) else b64[i]
            ref = alpha * (ai @ bi) + (beta * c0.double().numpy()[i if batch else slice(None)] if beta else 0)
            ci = c64[i] if batch else c64
            # alpha/beta: compare against ref through check's |A||B| bound with a scaled A
            chk = validate.check(ci, alpha * ai, bi, dtype=tol, kernel=mod.NAME, ref=ref)
            out.append(dict(kernel=mod.NAME, ran=used.get("kernel", mod.NAME), shape=[m, n, k], prec=prec,
                            layout=la + lb, batch=batch, bcast=bcast, beta=beta, ok=bool(chk.ok),
                            rel=chk.rel_err, msg=str(chk), split=(cfg or {}).get("SPLIT"),
                            fused=bool((cfg or {}).get("FUSED")), swap=bool((cfg or {}).get("SWAP")),
                            tma_asked=bool((cfg or {}).get("TMA")), tma=tma))

    # C^T = B^T·A^T (SWAP) with forced configurations: every layout, edge tiles, batch, alpha/beta
    sw3 = dict(tile(16, 32, 16, 4, 2), C_TMA=False, WS=False, SWAP=True, REG_A=True)
    for la in "nt":
        for lb in "nt":
            run(t03_tma_persistent, 20, 36, 28, torch.float32, "ieee", la, lb, cfg=sw3)
            run(t03_tma_persistent, 40, 24, 56, torch.float16, "fp16", la, lb, cfg=sw3)
            for f in ({}, {"FUSED": True}):
                run(t04_splitk, 5, 40, 50, torch.float32, "ieee", la, lb, cfg=dict(sw3, SPLIT=3, **f))
                run(t04_splitk, 17, 24, 40, torch.float16, "fp16", la, lb, cfg=dict(sw3, SPLIT=2, **f))
    run(t03_tma_persistent, 20, 24, 32, torch.float16, "fp16", batch=3, cfg=sw3)
    run(t03_tma_persistent, 40, 32, 48, torch.float32, "ieee", alpha=0.5, beta=2.0, cfg=sw3)
    run(t04_splitk, 9, 16, 48, torch.float32, "ieee", batch=2, bcast=True, cfg=dict(sw3, SPLIT=2))
    run(t04_splitk, 19, 33, 70, torch.float32, "ieee", alpha=0.5, beta=2.0, cfg=dict(sw3, SPLIT=3, FUSED=True))

    # split-K, with a second reduction kernel and fused (the last slice of a tile sums it): K not a
    # multiple of BK, more slices than K steps (empty slices), batch, alpha/beta
    for fused in (False, True):
        f = dict(FUSED=True) if fused else {}
        for split in (1, 2, 3, 5, 9):
            sk = dict(tile(16, 32, 16, 4, 2), SPLIT=split, **f)
            run(t04_splitk, 3, 40, 50, torch.float16, "fp16", cfg=sk)     # 4 K steps of 16, last one partial
            run(t04_splitk, 17, 33, 37, torch.float32, "ieee", cfg=sk)
            run(t04_splitk, 5, 24, 20, torch.float32, "ieee", la="t", lb="t", cfg=sk)
        run(t04_splitk, 1, 64, 16, torch.float16, "fp16", cfg=dict(tile(16, 64, 16, 4, 2), SPLIT=4, **f))  # split > K steps
        run(t04_splitk, 20, 24, 40, torch.float16, "fp16", batch=2, cfg=dict(tile(16, 16, 16, 4, 2), SPLIT=3, **f))
        run(t04_splitk, 9, 16, 48, torch.float32, "ieee", batch=2, bcast=True, cfg=dict(tile(16, 16, 16, 4, 2), SPLIT=2, **f))
        run(t04_splitk, 19, 33, 70, torch.float32, "ieee", alpha=0.5, beta=2.0, cfg=dict(tile(16, 32, 16, 4, 2), SPLIT=3, **f))

    # split-K with A and B through TMA descriptors: every layout, plain and swapped, edge tiles,
    # K past the last whole step, more slices than steps, alpha/beta; and TMA asked for rows that
    # are not 16-byte aligned, which run with pointer loads
    for f in ({}, {"FUSED": True}):
        for la in "nt":
            for lb in "nt":
                run(t04_splitk, 24, 40, 56, torch.float16, "fp16", la, lb, cfg=dict(tile(16, 32, 16, 4, 2), SPLIT=3, TMA=True, **f))
                run(t04_splitk, 20, 36, 28, torch.float32, "ieee", la, lb, cfg=dict(sw3, SPLIT=2, TMA=True, **f))
        run(t04_splitk, 8, 32, 16, torch.float16, "fp16", cfg=dict(tile(16, 32, 16, 4, 2), SPLIT=4, TMA=True, **f))
        run(t04_splitk, 19, 36, 72, torch.float32, "ieee", alpha=0.5, beta=2.0, cfg=dict(tile(16, 32, 16, 4, 2), SPLIT=3, TMA=True, **f))
        run(t04_splitk, 17, 33, 37, torch.float32, "ieee", cfg=dict(tile(16, 32, 16, 4, 2), SPLIT=2, TMA=True, **f))

    for mod in (t01_tiled, t02_persistent, t03_tma_persistent, t04_splitk):
        for (m, n, k) in [(1, 1, 1), (5, 23, 7), (33, 17, 40), (64, 48, 80), (1, 64, 32), (70, 1, 96)]:
            for dt, prec in ((torch.float16, "fp16"), (torch.float32, "ieee")):
                run(mod, m, n, k, dt, prec)
        for la in "nt":
            for lb in "nt":
                run(mod, 48, 40, 64, torch.float16, "fp16", la, lb)
                run(mod, 19, 21, 13, torch.float32, "ieee", la, lb)
        run(mod, 20, 24, 32, torch.float16, "fp16", batch=3)
        run(mod, 20, 24, 32, torch.float32, "ieee", batch=2, bcast=True)
        run(mod, 9, 11, 16, torch.float32, "ieee", batch=2, la="t", lb="t")
        run(mod, 40, 32, 48, torch.float32, "ieee", alpha=0.5, beta=2.0)
        run(mod, 31, 33, 35, torch.float16, "fp16", alpha=-1.5, beta=0.25)
    # t06, the GEMV form (M ≤ 4): K in one step, in several, and past its last whole step; every
    # layout, batch and a broadcast B, alpha/beta, and each of its candidate tiles once
    gv = dict(BN=4, BK=64, FOLD=4, num_warps=1, num_stages=1)  # 8 elements a thread: FOLD where B allows
    for (m, n, k) in [(1, 1, 1), (1, 23, 7), (3, 17, 40), (4, 64, 300), (2, 70, 130)]:
        for dt, prec in ((torch.float16, "fp16"), (torch.float32, "ieee")):
            run(t06_gemv, m, n, k, dt, prec, cfg=gv if k > 16 else None)
    for la in "nt":
        for lb in "nt":
            run(t06_gemv, 3, 21, 37, torch.float32, "ieee", la, lb, cfg=gv)
    # FOLD taken (B K-major, rows 16-byte aligned): K within one step, across several, past the last
    for (m, n, k), dt, prec in (((3, 21, 48), torch.float32, "ieee"), ((2, 24, 208), torch.float16, "fp16"),
                                ((4, 9, 160), torch.float32, "ieee")):
        p = C.Problem(operand((m, k), dt, "n"), operand((k, n), dt, "t"), torch.empty(m, n, dtype=dt), prec)
        assert t06_gemv.fold(p, gv) == 4
        run(t06_gemv, m, n, k, dt, prec, "n", "t", cfg=gv)
    run(t06_gemv, 2, 24, 32, torch.float16, "fp16", batch=3)
    run(t06_gemv, 4, 20, 32, torch.float32, "ieee", batch=2, bcast=True, cfg=gv)
    run(t06_gemv, 1, 40, 48, torch.float32, "ieee", alpha=0.5, beta=2.0, cfg=gv)
    run(t06_gemv, 4, 33, 35, torch.float16, "fp16", alpha=-1.5, beta=0.25)
    from tilegemm.tuning import space as S
    for c in S.candidates(S.T06, C.Problem(torch.empty(1, 1100), torch.empty(1100, 36), torch.empty(1, 36), "ieee")):
        run(t06_gemv, 1, 36, 1100, torch.float32, "ieee", cfg=c)  # K past 1024: every candidate as seeded
    print("RESULTS" + json.dumps(out))
""")


def _interpreted(script: str, timeout: int) -> object:
    """Run `script` in a fresh process under Triton's interpreter (TRITON_INTERPRET is read at
    import) and return what it printed after RESULTS, as JSON."""
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""),
               TILEGEMM_AUTOTUNE="0")
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=timeout)
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULTS")]
    assert proc.returncode == 0 and line, f"interpreter run failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    return json.loads(line[0][len("RESULTS"):])


@pytest.fixture(scope="module")
def interpreter_results():
    return _interpreted(INTERP_SCRIPT, 900)


@pytest.mark.parametrize("name", ALL_TC)
def test_interpreter_correct(interpreter_results, name):
    mine = [r for r in interpreter_results if r["kernel"] == name]
    assert len(mine) >= 20
    bad = [r["msg"] for r in mine if not r["ok"]]
    assert not bad, "\n".join(bad[:5])


def test_interpreter_gemv_form(interpreter_results):
    """t06 ran every case asked of it (M ≤ 4): all four layouts, batch, a broadcast B, alpha/beta,
    K within one step and across several, and each of its candidate tiles."""
    mine = [r for r in interpreter_results if r["kernel"] == "tc_gemv"]
    assert len(mine) >= 25 and all(r["ran"] == "tc_gemv" for r in mine)
    assert {r["layout"] for r in mine} == {"nn", "nt", "tn", "tt"}
    assert any(r["beta"] for r in mine) and any(r["batch"] for r in mine) and any(r["bcast"] for r in mine)
    assert {r["shape"][0] for r in mine} == {1, 2, 3, 4}


SCALES_SCRIPT = textwrap.dedent(r"""
    import json
    import numpy as np, torch, triton, triton.language as tl
    from tilegemm.kernels.tensorcore._jit import scale_acc

    @triton.jit
    def scaled(x_ptr, o_ptr, sa_ptr, sb_ptr, BM: tl.constexpr, BN: tl.constexpr):
        r = tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :]
        acc = scale_acc(tl.load(x_ptr + r), x_ptr, sa_ptr, sb_ptr, BM, BN, BN, 1, 1.0, 0.0, 0, 0, BM, BN, False, True)
        tl.store(o_ptr + r, acc)

    rng = np.random.default_rng(0)
    acc = torch.from_numpy((rng.uniform(1e3, 3e3, (16, 16)) * rng.choice([-1, 1], (16, 16))).astype(np.float32))
    out = []
    for sa, sb in [(3e-20, 3e-20), (1e-21, 1e-20), (2e-19, 4e-21), (1e-30, 1e30), (0.25, 4.0), (1.5e-3, 7.0)]:
        t_sa, t_sb = torch.tensor([sa]), torch.tensor([sb])
        o = torch.empty_like(acc)
        scaled[(1,)](acc, o, t_sa, t_sb, 16, 16)
        want = acc.double() * t_sa.double() * t_sb.double()
        out.append({"scales": [sa, sb], "rel": ((o.double() - want).abs() / want.abs()).max().item(),
                    "as_one_product": torch.equal(o, acc * (t_sa * t_sb))})
    print("RESULTS" + json.dumps(out))
""")


def test_fp8_scales_outside_fp32_range_scale_one_at_a_time():
    """The epilogue's scale_a·scale_b: where that product is not a normal FP32 number (3e-20² is a
    subnormal of 20 bits, not 24) the accumulator is scaled by one, then the other, and a result in
    FP32's normal range is right to two roundings (it was off by up to 3e-5 relative, and 0 where the
    product underflows); elsewhere it is the one product, as before. Under Triton's interpreter, on
    the helper every scaled rung's epilogue calls."""
    got = {tuple(r["scales"]): r for r in _interpreted(SCALES_SCRIPT, 300)}
    for scales in [(3e-20, 3e-20), (1e-21, 1e-20), (2e-19, 4e-21)]:
        assert got[scales]["rel"] <= 2.5e-7 and not got[scales]["as_one_product"], got[scales]
    for scales in [(1e-30, 1e30), (0.25, 4.0), (1.5e-3, 7.0)]:
        assert got[scales]["as_one_product"] and got[scales]["rel"] <= 1.2e-7, got[scales]


GEMM_REFUSALS = textwrap.dedent(r"""
    import json
    import numpy as np, torch, tilegemm
    h = lambda *s: torch.randn(*s).half()  # noqa: E731
    a, b = h(256, 256), h(256, 256)
    ro = np.zeros((4, 4), np.float16)
    ro.flags.writeable = False
    calls = {
        "c is a": lambda: tilegemm.gemm(a, b, c=a),
        "c is a view of b": lambda: tilegemm.gemm(a, b, c=b[:, :]),
        "batches 2 and 3": lambda: tilegemm.gemm(h(2, 5, 7), h(3, 7, 3)),
        "batches 2 and 3, K = 0": lambda: tilegemm.gemm(h(2, 5, 0), h(3, 0, 3)),
        "float64": lambda: tilegemm.gemm(np.ones((4, 4)), np.ones((4, 4))),
        "int32": lambda: tilegemm.gemm(np.ones((4, 4), np.int32), np.ones((4, 4), np.int32)),
        "out_dtype half_": lambda: tilegemm.gemm(h(4, 4), h(4, 4), out_dtype="half_"),
        "read-only c": lambda: tilegemm.gemm(np.ones((4, 4), np.float16), np.ones((4, 4), np.float16), c=ro,
                                             beta=1.0),
        "NumPy with torch": lambda: tilegemm.gemm(np.ones((4, 4), np.float16), h(4, 4)),
        "batch 0 @ 2-D": lambda: tilegemm.gemm(h(0, 5, 7), h(7, 3)),
        "2-D @ batch 0": lambda: tilegemm.gemm(h(5, 7), h(0, 7, 3)),
        "batch 1 @ batch 0": lambda: tilegemm.gemm(h(1, 5, 7), h(0, 7, 3)),
        "batch 1 @ batch 3": lambda: tilegemm.gemm(h(1, 5, 7), h(3, 7, 3)),
        "c over scale_a": lambda: (lambda c: tilegemm.gemm(a, b, precision="fp8", out_dtype="float32", c=c,
                                                          scale_a=c[0, :1]))(torch.zeros(256, 256)),
    }
    out = {}
    for what, call in calls.items():
        try:
            out[what] = ["shape", list(call().shape)]
        except Exception as e:
            out[what] = [type(e).__name__, str(e)]
    print("RESULTS" + json.dumps(out))
""")


def test_interpreter_gemm_refuses_in_one_typed_line_and_takes_empty_batches():
    """gemm's own contract, as matmul's: a c that shares memory with a, b or a scale tensor (C would
    overwrite what the product reads: a wrong result at 256², where one tile is not all of it), batches that do not
    broadcast, a dtype or out_dtype it does not take, a read-only c, host arrays of two kinds; each
    a typed error. A batch of 0 broadcasts as torch's does."""
    got = _interpreted(GEMM_REFUSALS, 300)
    want = {"c is a": ("LayoutError", "c shares memory with a"), "c is a view of b": ("LayoutError", "with b"),
            "batches 2 and 3": ("ShapeError", "do not broadcast"), "batches 2 and 3, K = 0": ("ShapeError", "broadcast"),
            "float64": ("DTypeError", "got torch.float64"), "int32": ("DTypeError", "got torch.int32"),
            "out_dtype half_": ("DTypeError", "got half_"), "read-only c": ("LayoutError", "read-only"),
            "NumPy with torch": ("DTypeError", "pass both of one kind"),
            "c over scale_a": ("LayoutError", "c shares memory with scale_a")}
    for what, (error, match) in want.items():
        assert got[what][0] == error and match in got[what][1], (what, got[what])
    assert got["batch 0 @ 2-D"] == got["2-D @ batch 0"] == got["batch 1 @ batch 0"] == ["shape", [0, 5, 3]]
    assert got["batch 1 @ batch 3"] == ["shape", [3, 5, 3]]


ZERO_ALPHA = textwrap.dedent(r"""
    import json
    import numpy as np, torch, tilegemm
    torch.manual_seed(0)
    out = {}
    for dt, prec in ((torch.float16, "auto"), (torch.float32, "ieee"), (torch.float32, "tf32")):
        a, b = torch.randn(48, 32).to(dt), torch.randn(32, 40).to(dt)
        a[3, 5], b[7, 9] = float("nan"), float("inf")  # (every row of A @ B through row 3 or column 9: NaN)
        for alpha in (0.0, -0.0, 0):
            for beta in (0.0, 0.5):
                c = torch.randn(48, 40).to(dt if prec == "auto" else torch.float32)
                c[0, 0] = -0.0
                want = torch.addmm(c.float(), a.float(), b.float(), alpha=alpha, beta=beta)
                got = tilegemm.gemm(a, b, precision=prec, alpha=alpha, beta=beta, c=c.clone() if beta else None)
                host = tilegemm.gemm(a.numpy(), b.numpy(), precision=prec, alpha=alpha, beta=beta,
                                     c=c.clone().numpy() if beta else None)
                out[f"{dt} {prec} {alpha!r} {beta}"] = [
                    bool(torch.equal(got.float(), want.to(got.dtype).float())),
                    bool(torch.equal(torch.signbit(got.float()), torch.signbit(want.to(got.dtype).float()))),
                    bool(np.array_equal(host, got.numpy())), bool(torch.isnan(got).any())]
    print("RESULTS" + json.dumps(out))
""")


def test_interpreter_gemm_at_alpha_zero_computes_no_product():
    """alpha = 0 (0.0, -0.0 or the int 0) computes no product, as torch.addmm and BLAS: C = beta·C
    (zeros at beta 0), to the bit and the sign of each zero, with a NaN in A and an inf in B that
    A @ B would spread over rows and columns; host arrays as torch tensors. gemm multiplied A @ B
    by alpha: NaN where torch gives beta·C, and -0 where it gives +0."""
    got = _interpreted(ZERO_ALPHA, 300)
    assert len(got) == 18
    for what, (equal, signs, host, nan) in got.items():
        assert equal and signs and host and not nan, (what, got[what])


@pytest.mark.gpu
def test_gpu_gemm_at_alpha_zero_computes_no_product():
    """On the GPU, repeated (as a plan would serve it) and between calls of alpha 1 that do have
    plans: alpha = ±0 gives beta·C (zeros at beta 0) to the bit and the sign of each zero, with a
    NaN in A and an inf in B, as torch.addmm on the host (BLAS) does. (On CUDA, torch.addmm at
    alpha 0 and beta 0.5 gave a bfloat16 result unlike that: cuBLAS's, not the reference here.)
    Each precision's alpha-1 call still gives its product's NaN rows and inf columns."""
    a, b = torch.randn(256, 128, device="cuda"), torch.randn(128, 192, device="cuda")
    a[3, 5], b[7, 9] = float("nan"), float("inf")
    c = torch.randn(256, 192, device="cuda")
    c[0, 0] = -0.0
    for precision, dt in (("auto", torch.bfloat16), ("auto", torch.float16), ("tf32", torch.float32),
                          ("ieee", torch.float32)):
        x, y = a.to(dt), b.to(dt)
        odt = dt if precision == "auto" else torch.float32
        for alpha in (1.0, 0.0, -0.0, 1.0, 0.0, -0.0):
            for beta in (0.0, 0.5):
                got = tilegemm.gemm(x, y, precision=precision, alpha=alpha, beta=beta,
                                    c=c.to(odt).clone() if beta else None)
                if alpha == 0:
                    want = torch.addmm(c.to(odt).float().cpu(), x.float().cpu(), y.float().cpu(), alpha=alpha,
                                       beta=beta).to(odt)
                    got = got.cpu()
                    assert torch.equal(got, want) and torch.equal(torch.signbit(got), torch.signbit(want)), \
                        (precision, dt, alpha, beta)
                else:
                    want = torch.addmm(c.to(odt), x.to(odt), y.to(odt), alpha=alpha, beta=beta)
                    assert torch.equal(torch.isnan(got), torch.isnan(want)), (precision, dt, alpha, beta)


NEGATED = textwrap.dedent(r"""
    import json
    import torch, tilegemm
    torch.manual_seed(0)
    neg = torch._neg_view
    out = {}
    for dt, prec in ((torch.float16, "auto"), (torch.float32, "ieee")):
        a, b, a3 = torch.randn(48, 32).to(dt), torch.randn(32, 40).to(dt), torch.randn(2, 48, 32).to(dt)
        for what, x, y in (("a", neg(a), b), ("b", a, neg(b)), ("both", neg(a), neg(b)), ("batch", neg(a3), b)):
            got = tilegemm.gemm(x, y, precision=prec).double()
            out[f"{dt} {what}"] = (got - x.double() @ y.double()).abs().max().item()
        try:
            tilegemm.gemm(a, b, precision=prec, c=neg(torch.zeros(48, 40).to(dt)), beta=1.0)
            out[f"{dt} c"] = "accepted"
        except Exception as e:
            out[f"{dt} c"] = [type(e).__name__, str(e)]
        with torch.inference_mode():
            frozen = torch.zeros(48, 40).to(dt)
        try:
            tilegemm.gemm(a, b, precision=prec, c=frozen, beta=1.0)
            out[f"{dt} inference c"] = "accepted"
        except Exception as e:
            out[f"{dt} inference c"] = [type(e).__name__, str(e)]
        with torch.inference_mode():
            got = tilegemm.gemm(a, b, precision=prec, c=frozen, beta=1.0)
        out[f"{dt} inference c inside"] = [got.data_ptr() == frozen.data_ptr(),
                                           (frozen.double() - a.double() @ b.double()).abs().max().item()]
    print("RESULTS" + json.dumps(out))
""")


def test_interpreter_gemm_multiplies_a_lazy_negations_values():
    """A lazy negation (torch's neg bit: torch._neg_view(t), z.conj().imag) is a view whose memory
    holds the negated values, and the kernels read memory: gemm multiplies its values (a, b, both,
    a batch), and refuses one as c, which it writes (LayoutError). Under the interpreter torch CPU
    tensors go to the kernels as CUDA tensors do on a GPU (its test: test_matmul_semantics). A c
    that is an inference tensor is refused outside inference mode (AutogradError, as torch refuses
    the in-place write) and written inside it."""
    got = _interpreted(NEGATED, 300)
    for dt in ("torch.float16", "torch.float32"):
        tol = 0.05 if dt == "torch.float16" else 1e-4
        for what in ("a", "b", "both", "batch"):
            assert got[f"{dt} {what}"] < tol, (dt, what, got)
        assert got[f"{dt} c"][0] == "LayoutError" and "lazy negation" in got[f"{dt} c"][1], got
        assert got[f"{dt} inference c"][0] == "AutogradError", got
        assert "inference tensor" in got[f"{dt} inference c"][1], got
        assert got[f"{dt} inference c inside"][0] and got[f"{dt} inference c inside"][1] < tol, got


def test_interpreter_splitk_edge_cases(interpreter_results):
    """Split counts 1…9 over 4 K steps (empty slices write zeros), K not a multiple of BK."""
    mine = [r for r in interpreter_results if r["kernel"] == "tc_splitk" and r.get("split")]
    assert {r["split"] for r in mine} >= {1, 2, 3, 4, 5, 9}
    assert {r["split"] for r in mine if r["fused"]} >= {1, 2, 3, 4, 5, 9}
    assert any(r["shape"][2] % 16 for r in mine) and any(r["batch"] for r in mine) and any(r["beta"] for r in mine)
    bad = [r["msg"] for r in mine if not r["ok"]]
    assert not bad, "\n".join(bad[:5])


def test_interpreter_splitk_tma(interpreter_results):
    """Split-K with TMA loads: all four layouts, plain and swapped, fused or not, K past the last
    whole step, empty slices, alpha/beta, each checked; rows TMA cannot describe fall back to
    pointer loads, and are right too."""
    mine = [r for r in interpreter_results if r["kernel"] == "tc_splitk" and r["tma_asked"]]
    took = [r for r in mine if r["tma"]]
    assert {r["layout"] for r in took} == {"nn", "nt", "tn", "tt"}
    assert {(r["swap"], r["fused"]) for r in took} == {(s, f) for s in (False, True) for f in (False, True)}
    assert any(r["beta"] for r in took) and any(r["shape"][2] % 16 for r in took) and any(r["split"] == 4 for r in took)
    assert any(not r["tma"] for r in mine)  # rows not 16-byte aligned: pointer loads
    bad = [r["msg"] for r in mine if not r["ok"]]
    assert not bad, "\n".join(bad[:5])


def test_interpreter_swapped_operands(interpreter_results):
    """C^T = B^T·A^T: both rungs, all four layouts, edge tiles, batch and alpha/beta, each checked."""
    mine = [r for r in interpreter_results if r.get("swap")]
    for name in ("tc_tma_persistent", "tc_splitk"):
        ran = [r for r in mine if r["ran"] == name]
        assert {r["layout"] for r in ran} == {"nn", "nt", "tn", "tt"}, name
        assert any(r["beta"] for r in ran) and any(r["batch"] for r in ran), name
    assert any(r["fused"] for r in mine)
    bad = [r["msg"] for r in mine if not r["ok"]]
    assert not bad, "\n".join(bad[:5])


WIDE_SCRIPT = textwrap.dedent(r"""
    import json, os
    assert os.environ.get("TRITON_INTERPRET") == "1"
    import torch
    from tilegemm import dispatch, validate
    from tilegemm.kernels.tensorcore import _problem as C, t01_tiled, t02_persistent, t03_tma_persistent, t04_splitk
    from tilegemm.kernels.tensorcore import t06_gemv
    from tilegemm.tuning.space import cfg as tile
    torch.manual_seed(0)

    def spread(values, stride):
        # values in a view whose rows lie `stride` elements apart: a span past 2^31 elements in a
        # storage of 4-6 GB that is never touched but for these rows (the OS commits only their pages)
        r, c = values.shape
        big = torch.empty((r - 1) * stride + c, dtype=values.dtype)
        return big.as_strided((r, c), (stride, 1)).copy_(values)

    out = []
    RUNGS = ((t01_tiled, {}), (t02_persistent, {}), (t03_tma_persistent, dict(C_TMA=False, WS=False)),
             (t04_splitk, dict(SPLIT=3, FUSED=True)), (t04_splitk, dict(SPLIT=3)),
             (t06_gemv, {}))  # t06 forced past its M ≤ 4 (20 rows): its offsets are what is tested
    # M or N direction: row 19 of a 20-row view lies past 2^31 (BK = 16); K direction: K = 80 in
    # steps of BK = 64, each step and the 64th offset of a K stride past 2^31 (t04 splits K in 2)
    R_MN = (2**31 // 19 + 4096) // 8 * 8
    R_K = (2**31 // 63 + 4096) // 8 * 8
    CASES = [("a", 40, 16), ("b", 40, 16), ("b column-major", 40, 16), ("c and c_in", 40, 16),
             ("a column-major, K stride", 80, 64), ("b, K stride", 80, 64)]
    m, n = 20, 24
    for mod, extra in RUNGS:
        for which, k, bk in CASES:
            a, b, c0 = ((torch.rand(*s) * 2 - 1).half() for s in ((m, k), (k, n), (m, n)))
            beta = 0.5 if which == "c and c_in" else 0.0
            A = {"a": lambda: spread(a, R_MN), "a column-major, K stride": lambda: spread(a.T.contiguous(), R_K).T}.get(
                which, lambda: a)()
            B = {"b": lambda: spread(b, R_MN), "b column-major": lambda: spread(b.T.contiguous(), R_MN).T,
                 "b, K stride": lambda: spread(b, R_K)}.get(which, lambda: b)()
            Cc = spread(c0, R_MN) if beta else torch.full((m, n), float("nan"), dtype=torch.float16)
            p = C.Problem(A, B, Cc, "fp16", 1.0, beta, Cc if beta else None)
            spans = [C.span(x) for x in (A, B, Cc)]
            cfg = dict(tile(16, 16, bk, 4, 2), **extra) if mod is not t06_gemv else dict(BN=4, BK=bk, num_warps=4,
                                                                                          num_stages=1)
            if "SPLIT" in cfg and bk == 64:
                cfg["SPLIT"] = 2
            used = dispatch.run_problem(p, mod.NAME, config=cfg)
            ref = a.double().numpy() @ b.double().numpy() + beta * c0.double().numpy()
            chk = validate.check(Cc.double().numpy(), a.double().numpy(), b.double().numpy(), dtype="float16",
                                 kernel=mod.NAME, ref=ref)
            out.append(dict(kernel=used["kernel"], which=which, extra=sorted(extra), wide=p.too_large,
                            spans=spans, ok=bool(chk.ok), msg=str(chk)))
            del A, B, Cc, p
    print("RESULTS" + json.dumps(out))
""")


def test_interpreter_past_int32_offsets():
    """Each pointer path of t01-t04 with one operand spanning past 2^31 elements (a strided view
    into a 4-6 GB storage, only its rows touched): along M or N (A, B row- and column-major, C
    read with beta and written) and along K (A column-major and B row-major, whose K offsets and
    steps pass 2^31). The rungs compile 64-bit offsets for such a problem (WIDE). Without them
    the interpreter wraps the int32 offsets as the GPU does and reads or writes outside the
    storage (checked by hand when this was written: every pointer path crashed the process in
    at least one case; t03's TMA loads, addressed by the copy engine, never did)."""
    got = _interpreted(WIDE_SCRIPT, 600)
    assert len(got) == 36 and all(r["wide"] and max(r["spans"]) > 2**31 for r in got)
    assert {r["kernel"] for r in got} == {"tc_tiled", "tc_persistent", "tc_tma_persistent", "tc_splitk", "tc_gemv"}
    bad = [f"{r['kernel']} {r['extra']} {r['which']}: {r['msg']}" for r in got if not r["ok"]]
    assert not bad, "\n".join(bad)


REALIGN_SCRIPT = textwrap.dedent(r"""
    import json, torch
    from tilegemm.kernels import tensorcore as tc
    from tilegemm.kernels.tensorcore import t03_tma_persistent as t03
    base = torch.arange(40 * 37, dtype=torch.float32).reshape(40, 37).to(torch.float16)
    t3 = base[None]  # the caller's batch of one: the copy reads it, its first matrix is the operand
    cases = {"contiguous": (base, base), "column-major": (base[:30].t(), None),
             "batch of one": (t3[0], t3), "column slice": (base[:, 3:26], None), "one row of a slice": (base[:1, :33], None),
             "fp32 slice": (base.float()[5:, :33], None)}
    out = {}
    for name, (x, src) in cases.items():
        keep = x.clone()
        y, call = t03._realigned(x, x if src is None else src)
        tc.launch_calls([call])
        inner = 1 if y.stride(-1) == 1 else 0
        out[name] = dict(kernel=call.fn.fn.__name__, equal=bool(torch.equal(y, x)), untouched=bool(torch.equal(x, keep)),
                         aligned=y.stride(1 - inner) * y.element_size() % 128 == 0 and y.stride(inner) == 1)
    # A's and B's copies in one launch (two dtypes, as FP8's E4M3 and E5M2 may be)
    x1, x2 = base, base.float()[:30].t()
    keep = x1.clone(), x2.clone()
    (y1, c1), (y2, c2) = t03._realigned(x1, x1), t03._realigned(x2, x2)
    pair = t03._paired(c1, c2)
    tc.launch_calls([pair])
    out["pair"] = dict(kernel=pair.fn.fn.__name__, equal=bool(torch.equal(y1, x1) and torch.equal(y2, x2)),
                       untouched=bool(torch.equal(x1, keep[0]) and torch.equal(x2, keep[1])),
                       aligned=y1.stride(0) * 2 % 128 == 0 and y2.stride(1) * 4 % 128 == 0, scratch=len(pair.scratch))
    print("RESULTS" + json.dumps(out))
""")


def test_interpreter_realigning_copies():
    """A 2-D operand TMA cannot describe is copied to rows 128 bytes apart (16 is TMA's rule): a contiguous one (rows
    or columns) by realign_flat_kernel's aligned run, a slice by realign_kernel, a contiguous A and B
    together by realign_pair_kernel in one launch; every element in place, the source untouched."""
    got = _interpreted(REALIGN_SCRIPT, 300)
    assert all(r["equal"] and r["untouched"] and r["aligned"] for r in got.values()), got
    assert {n for n, r in got.items() if r["kernel"] == "realign_flat_kernel"} == \
        {"contiguous", "column-major", "batch of one", "one row of a slice"}
    assert {n for n, r in got.items() if r["kernel"] == "realign_kernel"} == {"column slice", "fp32 slice"}
    assert got["pair"]["kernel"] == "realign_pair_kernel" and got["pair"]["scratch"] == 2


FUSED_SUM_SCRIPT = textwrap.dedent(r"""
    import json, torch
    from tilegemm.kernels import tensorcore as tc
    from tilegemm.kernels.tensorcore import _problem as P, t04_splitk as t04
    from tilegemm.tuning.space import cfg as tile
    g = torch.Generator().manual_seed(7)
    out = {}
    for split in (1, 3, 5, 9):
        a = torch.randn(21, 600, generator=g)
        b = torch.randn(600, 40, generator=g)
        cs, stages = {}, []
        for form in ("two launches", 1, 2, 4):
            c = torch.full((21, 40), float("nan"))
            cfg = dict(tile(16, 32, 32, 4, 3), SPLIT=split, **({} if form == "two launches" else {"FUSED": True}))
            t04.reduce_width = lambda cfg, s, r=form: r  # read by the fused form only
            calls = t04.launches(P.Problem(a, b, c, "ieee"), cfg)
            tc.launch_calls(calls)
            cs[form] = c
            if form != "two launches":
                stages.append(P.named(calls[0])["SUM_STAGES"])  # what the launch was given
        ref = a.double() @ b.double()
        out[split] = dict(same=[bool(torch.equal(cs[f], cs["two launches"])) for f in (1, 2, 4)],
                          err=float((cs[1].double() - ref).abs().max() / ref.abs().max()), stages=stages)
    print("RESULTS" + json.dumps(out))
""")


def test_interpreter_fused_split_k_sums_the_same_however_many_it_loads_at_once():
    """The fused split-K's last slice loads RED partials at once (t04.reduce_width: 1, 2 or 4) and
    adds them in slice order, reading -0.0 past the last slice: the result is bit for bit the
    two-launch form's (whose reduction kernel adds them in the same order), for split counts
    below, at and past a multiple of RED (1, 3, 5, 9 slices), with the sum loop written as the
    pipelined one (t04.sum_stages: 5 slices one at a time, 9 one or two at a time; the launch is
    given SUM_STAGES = 3) and as the plain one. The interpreter runs tl.range as a plain loop: the
    pipelining itself is the GPU test's (test_gpu_pipelined_fused_sum_is_the_two_launch_sum_bit_for_bit)."""
    got = _interpreted(FUSED_SUM_SCRIPT, 600)
    assert sorted(got) == ["1", "3", "5", "9"]
    assert got["5"]["stages"] == [3, 0, 0] and got["9"]["stages"] == [3, 3, 0] and got["3"]["stages"] == [0, 0, 0]
    for split, r in got.items():
        assert r["same"] == [True, True, True], (split, r)
        assert r["err"] < 1e-5, (split, r)


def test_fused_reduction_width_keeps_its_registers():
    """reduce_width: 32 FP32 values a thread in flight at most, 4 partials at most, none past the
    slices (rounded up to a power of two): 16×64 tiles on 4 warps load 4, 32×64 two, 64×64 one
    (docs/perf-notes.md, 123)."""
    from tilegemm.kernels.tensorcore import t04_splitk as t04
    from tilegemm.tuning.space import cfg as tile

    assert [t04.reduce_width(tile(bm, 64, 64, 4, 4), 8) for bm in (16, 32, 64, 128)] == [4, 2, 1, 1]
    assert t04.reduce_width(tile(128, 128, 64, 8, 3), 16) == 1
    assert [t04.reduce_width(tile(16, 64, 128, 4, 4), s) for s in (1, 2, 3, 5)] == [1, 2, 4, 4]


def test_fused_sum_is_pipelined_from_four_groups_where_its_buffers_fit():
    """sum_stages: the fused kernel's sum loop is pipelined (3 stages) where it makes 4 or more
    groups of RED partials (TF32 64×64 tiles in 4 or 12 slices), not at 1-3 (the decode tiles'
    8 slices 4 at a time), where pipelining measured slower on the cold and device clocks; and only
    where its two groups of FP32 tiles fit in the main loop's ring (num_stages − 1 A and B tiles),
    whose shared memory they reuse: a 128×256 tile's (256 KB) did not fit on the H200 at all, a
    128×128's would have cost a program an SM (docs/perf-notes.md, 124)."""
    from tilegemm.kernels.tensorcore import t04_splitk as t04
    from tilegemm.tuning.space import cfg as tile

    t64 = tile(64, 64, 32, 4, 4)  # TF32: a ring of 3 × 16 KB, the sum's buffers 2 × 16 KB
    assert [t04.sum_stages(t64, s, 1, 4) for s in (1, 2, 3, 4, 12)] == [0, 0, 0, 3, 3]
    t16 = tile(16, 64, 128, 4, 4)
    assert [t04.sum_stages(t16, s, 4, 2) for s in (4, 8, 12, 13, 16)] == [0, 0, 0, 3, 3]
    assert t04.sum_stages(t16, 7, 2, 2) == 3 and t04.sum_stages(t16, 6, 2, 2) == 0
    assert t04.sum_stages(t16, 16, 4, 1) == 0  # FP8's ring at BK = 128 (30 KB) is under the sum's 32 KB
    assert t04.sum_stages(tile(16, 64, 256, 4, 4), 16, 4, 1) == 3
    assert t04.sum_stages(tile(128, 256, 64, 8, 4), 8, 1, 2) == 0  # 256 KB against a ring of 144 KB
    assert t04.sum_stages(tile(128, 128, 64, 8, 3), 8, 1, 2) == 0  # 128 KB against 64 KB
    assert t04.sum_stages(tile(128, 64, 32, 4, 4), 4, 1, 4) == 3  # TF32 512×1024×4096's entry: 64 KB in 72 KB


PAD_SCRIPT = textwrap.dedent(r"""
    import json, torch
    from tilegemm.kernels import tensorcore as tc
    from tilegemm.kernels.tensorcore import _problem as P, t03_tma_persistent as t03
    g = torch.Generator().manual_seed(5)
    a = torch.randn(40, 72, generator=g).half()          # rows of 144 bytes: 16-byte, not 128-byte aligned
    b = torch.randn(72, 48, generator=g).half()          # rows of 96 bytes
    b_col = torch.randn(48, 72, generator=g).half().t()  # column-major: columns of 144 bytes
    raw = torch.empty(72 * 64 + 64, dtype=torch.float16)  # rows of 128 bytes from a 128-byte aligned base: no copy
    at = (-raw.data_ptr() // 2) % 64
    b_fit = raw[at:at + 72 * 64].view(72, 64).copy_(torch.randn(72, 64, generator=g))
    out = {}
    for name, (bb, pad) in {"ab": (b, "ab"), "b": (b, "b"), "a": (b, "a"), "col": (b_col, "b"), "fit": (b_fit, "ab"),
                            "none": (b, ""), "kmajor": (b, "b")}.items():
        p = P.Problem(a, bb, torch.empty(40, bb.shape[1], dtype=torch.float16), "fp16")
        keep = (a.clone(), bb.clone())
        cfg = dict(PAD=pad, KMAJOR=name == "kmajor")
        x, y, copies = t03.operands(p, cfg)
        tc.launch_calls(copies)
        pitch = lambda t: (t.stride(0) if t.stride(1) == 1 else t.stride(1)) * t.element_size()  # noqa: E731
        out[name] = dict(copies=len(copies), padded=t03.padded(p, cfg), pitch=[pitch(x), pitch(y)],
                         equal=bool(torch.equal(x, a) and torch.equal(y, bb)),
                         untouched=bool(torch.equal(a, keep[0]) and torch.equal(bb, keep[1])),
                         same_a=x is a, same_b=y is bb)
    print("RESULTS" + json.dumps(out))
""")


def test_interpreter_pad_copies_operands_to_128_byte_rows():
    """PAD copies the operands it names whose rows are 16- but not 128-byte aligned to rows 128
    bytes apart (a column-major B by its columns), every element in place, the sources untouched;
    an operand already 128-byte aligned, or not named, is read where it is."""
    got = _interpreted(PAD_SCRIPT, 300)
    assert all(r["equal"] and r["untouched"] for r in got.values()), got
    assert got["ab"]["copies"] == 1 and got["ab"]["padded"] == "ab" and got["ab"]["pitch"] == [256, 128]  # one launch
    assert got["b"]["copies"] == 1 and got["b"]["same_a"] and got["b"]["pitch"] == [144, 128]
    assert got["a"]["copies"] == 1 and got["a"]["same_b"] and got["a"]["pitch"] == [256, 96]
    assert got["col"]["padded"] == "b" and got["col"]["pitch"] == [144, 256]
    assert got["fit"]["copies"] == 1 and got["fit"]["padded"] == "a" and got["fit"]["same_b"]
    assert got["none"]["copies"] == 0 and got["none"]["padded"] == ""
    # KMAJOR's copy of B (aligned by construction) is never realigned: a realigning copy reads the caller's tensor
    assert got["kmajor"]["copies"] == 0 and got["kmajor"]["padded"] == "" and not got["kmajor"]["same_b"]


def test_pad_forms_only_where_rows_miss_128_bytes_and_the_product_is_large():
    """The tuner times PAD forms (B's, A's, both) only for operands whose rows are 16- but not
    128-byte aligned, in products of at least 2048³'s M·N·K; t05's and t03's first tiles get them."""
    from tilegemm.kernels.tensorcore import _problem as C
    from tilegemm.tuning import space as S

    def prob(m, n, k):
        meta = dict(dtype=torch.bfloat16, device="meta")
        return C.Problem(torch.empty(m, k, **meta), torch.empty(k, n, **meta), torch.empty(m, n, **meta), "bf16")

    assert S.pad_forms(prob(3000, 5000, 7000)) == ["b", "a", "ab"]
    assert S.pad_forms(prob(3000, 3072, 7000)) == ["a"]     # B's rows: 6144 bytes
    assert S.pad_forms(prob(3072, 3000, 4096)) == ["b"]
    assert S.pad_forms(prob(3072, 3072, 3072)) == []        # every row 128-byte aligned
    assert S.pad_forms(prob(1000, 1000, 1000)) == []        # too small for a copy to pay
    p = prob(3000, 3000, 3000)
    t05 = S.candidates(S.T05, p)
    assert [c.get("PAD") for c in t05[:4]] == [None, "b", "a", "ab"] and len(t05) == 4 * len(S.candidates(S.T05, prob(3072, 3072, 3072)))
    assert {c.get("PAD") for c in S.candidates(S.T03, p)} == {None, "b", "a", "ab"}
    assert S.adapt(S.T03, prob(3000, 5000, 7000), dict(S.candidates(S.T03, p)[1]))["PAD"] == "b"
    assert S.as_t03(S.T05, t05[1])["PAD"] == "b"
    tf32 = C.Problem(*(torch.empty(*s, dtype=torch.float32, device="meta") for s in ((3000, 7000), (7000, 5000), (3000, 5000))),
                     "tf32")  # row-major B: some t03 forms copy it K-major first, and those get no PAD forms
    t03_forms = S.candidates(S.T03, tf32)
    assert any(c.get("KMAJOR") for c in t03_forms) and not any(c.get("KMAJOR") and c.get("PAD") for c in t03_forms)
    assert "PAD" not in (S.adapt(S.T03, tf32, dict(next(c for c in t03_forms if c.get("KMAJOR")), PAD="b")) or {})


def test_realigning_copy_takes_64_bit_offsets_past_2_31():
    """realign_flat_kernel's offsets are 32-bit while the aligned buffer spans less than 2^31
    elements, 64-bit from there, and so are realign_pair_kernel's where either copy's are (meta
    tensors: nothing is allocated)."""
    from tilegemm.kernels.tensorcore import _problem as P
    from tilegemm.kernels.tensorcore import t03_tma_persistent as t03

    calls = {}
    for (o, i), wide in (((46341, 46341), True), ((40000, 40001), False), ((3, 2**30 + 1), True), ((678, 12345), False),
                         ((46655, 46029), True)):
        x = torch.empty(o, i, dtype=torch.float16, device="meta")
        _, calls[o, i] = t03._realigned(x, x)
        assert calls[o, i].fn is t03.realign_flat_kernel and calls[o, i].args[-1] is wide, (o, i)
    # A pair is wide where either copy is, and splits its grid at the first copy's programs, counted on the host
    # (46655×46029 is 2^31 - 653 elements: the kernel's own cdiv would wrap in 32 bits)
    first, second = calls[46655, 46029], calls[678, 12345]
    pair = t03._paired(first, second)
    named = P.named(pair)
    assert named["WIDE"] is True and named["FIRST"] == first.grid[0] == -(-46655 * 46029 // t03.FLAT_BLOCK)
    assert pair.grid == (first.grid[0] + second.grid[0],) and named["src2"] is second.args[0]


def test_mma_operand_rules():
    """wgmma reads 32- and 8-bit B operands only K-major, A operands K-major or from registers."""
    from tilegemm.kernels.tensorcore import _problem as C
    from tilegemm.tuning import space as S

    def prob(dt, a_t, b_t, m=4096):
        a, b = torch.empty(m, 4096, dtype=dt), torch.empty(4096, 4096, dtype=dt)
        a = a.t().contiguous().t() if a_t else a
        b = b.t().contiguous().t() if b_t else b
        return C.Problem(a, b, torch.empty(m, 4096, dtype=torch.float32), C.precision_of(dt))

    f32 = torch.float32
    assert C.reg_a(prob(f32, False, True), False) is False        # both K-major: as is
    assert C.reg_a(prob(f32, True, True), False) is True          # A column-major: A from registers
    assert C.reg_a(prob(f32, False, False), False) is None        # row-major B cannot be wgmma's B
    assert C.reg_a(prob(f32, False, False), True) is True         # ... swapped, it is A, from registers
    assert C.reg_a(prob(f32, True, False), True) is None and C.reg_a(prob(f32, True, False), False) is None
    assert C.reg_a(prob(torch.float16, True, False), False) is False  # 16-bit: any layout from shared memory
    cands = S.candidates(S.T03, prob(f32, False, False))  # TF32, row-major B: no copy first (swapped), then a copy
    assert cands[0]["SWAP"] and cands[0]["REG_A"] and not cands[0].get("KMAJOR")
    assert any(c.get("KMAJOR") for c in cands) and all(c.get("SWAP") or c.get("KMAJOR") for c in cands)
    assert not any(c.get("SWAP") or c.get("KMAJOR") for c in S.candidates(S.T03, prob(f32, False, True)))
    small = S.candidates(S.T03, prob(torch.float16, False, False, m=16))  # 16-row tiles: swapped first
    assert small[0]["BM"] < 64 and small[0]["SWAP"] and not small[0]["REG_A"]


def test_tuning_probe_rejects_a_wrong_result():
    """The tuner checks each candidate's output before timing it (CPU tensors here, same code)."""
    from tilegemm.kernels.tensorcore import _problem as C
    from tilegemm.tuning import tuner

    for prec, dt in (("fp16", torch.float16), ("tf32", torch.float32)):
        a = (torch.rand(40, 300) * 2 - 1).to(dt)
        b = (torch.rand(300, 70) * 2 - 1).to(dt)
        c = torch.empty(40, 70, dtype=dt)
        p = C.Problem(a, b, c, prec)
        probe = tuner._Probe(p)
        c.copy_((a.double() @ b.double()).to(dt))
        assert probe.wrong() == ""
        c[probe.rows[3], probe.cols[5]] += 0.5  # one element off, as a race leaves it
        assert "WRONG" in probe.wrong()


def test_splitk_registered_and_candidates():
    from tilegemm.kernels.tensorcore import _problem as C
    from tilegemm.kernels.tensorcore import t04_splitk as t04
    from tilegemm.tuning import space as S

    k = registry.get("tc_splitk")
    assert k.backend == "tensorcore" and 0 < k.auto_rank < registry.get("tc_tiled").auto_rank
    assert k.doc.splitlines()[0]
    for dt in (torch.float16, torch.float32, torch.float8_e4m3fn):
        for m in (1, 16, 64, 128):
            a, b = torch.empty(m, 4096, dtype=dt), torch.empty(4096, 4096, dtype=dt)
            p = C.Problem(a, b, torch.empty(m, 4096, dtype=torch.float16), C.precision_of(dt))
            assert S.splitk_applicable(p, sms=132)
            cands = S.candidates(S.T04, p)
            fp8 = dt == torch.float8_e4m3fn
            tma = m > 16  # past decode, each form with TMA loads first (the operands allow it)
            assert 1 <= len(cands) <= (8 if tma else 4) * (14 if fp8 and m <= 16 else 10)
            assert all(bool(c.get("TMA")) == (tma and i % 2 == 0) for i, c in enumerate(cands))
            plain = [c for c in cands if not c.get("TMA")]
            assert not tma or [{k: v for k, v in c.items() if k != "TMA"} for c in cands[::2]] == plain
            assert plain[0].get("FUSED") and {**plain[0], "FUSED": False} == {**plain[1], "FUSED": False}
            if fp8 and m <= 16:  # Hopper's FP8 MMA is wgmma (64-row tiles): tried first
                assert cands[0]["BM"] == 64
            if m <= 16:  # 16-row tiles are wgmma's N when swapped (tried before mma.sync)
                i = next(i for i, c in enumerate(plain) if c["BM"] == 16)
                assert plain[i]["SWAP"] and plain[i + 1]["SWAP"] and not plain[i + 2].get("SWAP")
            for c in cands:
                assert c["BM"] <= max(64 if fp8 else 16, triton.next_power_of_2(m)) and c["SPLIT"] >= 1
                assert (c["BM"] * c["BK"] + c["BK"] * c["BN"]) * a.element_size() * c["num_stages"] <= S.SMEM_BUDGET
    big = torch.empty(8192, 8192, dtype=torch.float16)
    assert not S.splitk_applicable(C.Problem(big, big, big, "fp16"), sms=132)
    assert t04.k_per_split(50, 16, 9) == 16 and t04.k_per_split(4096, 128, 4) == 1024


def test_interpreter_tma_path_ran(interpreter_results):
    """Operands go through TMA descriptors (not the t02 fallback) even in the interpreter: aligned
    ones as they are, 2-D ones with rows not 16-byte aligned (5×23×7) after a realigning copy;
    batched unaligned ones fall back to t02, and every result is checked."""
    mine = [r for r in interpreter_results if r["kernel"] == "tc_tma_persistent"]
    assert {r["ran"] for r in mine if r["shape"] == [64, 48, 80]} == {"tc_tma_persistent"}
    assert {r["ran"] for r in mine if r["shape"] in ([5, 23, 7], [19, 21, 13])} == {"tc_tma_persistent"}
    assert {r["ran"] for r in mine if r["shape"] == [9, 11, 16]} == {"tc_persistent"}, "batched: t02, not a failure"


def test_checker_rejects_a_wrong_product():
    """The check the interpreter tests rely on must fail on an off-by-a-tile result."""
    a, b = validate.random_operands(33, 17, 40, "float16", seed=1)
    c = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float16)
    c[16:, :] = 0
    assert not validate.check(c, a, b, dtype="float16").ok


# ---- on a GPU ---------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _heuristic_configs(monkeypatch, request):
    """Correctness tests use the heuristic configuration: hundreds of cases, no tuning storm."""
    if "tuning_cache" not in request.node.name:
        monkeypatch.setenv("TILEGEMM_AUTOTUNE", "0")

GPU_SHAPES = [(1, 1, 1), (1, 4096, 4096), (16, 4096, 4096), (5, 23, 7), (127, 129, 65), (256, 512, 1), (1000, 1000, 1000),
              (512, 384, 4104)]
PRECISIONS = ["fp16", "bf16", "tf32", "ieee", "fp8"]
TOL = {"fp16": "float16", "bf16": "bfloat16", "tf32": "tf32", "ieee": "float32", "fp8": "float8_e4m3fn"}


def _gpu_operands(m, n, k, precision, la, lb, batch=0):
    g = torch.Generator(device="cuda").manual_seed(m * 131 + n * 7 + k)
    ash = (batch, m, k) if batch else (m, k)
    bsh = (batch, k, n) if batch else (k, n)
    a = torch.rand(ash, device="cuda", generator=g) * 2 - 1
    b = torch.rand(bsh, device="cuda", generator=g) * 2 - 1
    dt = {"fp16": torch.float16, "bf16": torch.bfloat16, "tf32": torch.float32, "ieee": torch.float32,
          "fp8": torch.float8_e4m3fn}[precision]
    a, b = a.to(dt), b.to(dt)
    if la == "t":
        a = a.transpose(-1, -2).contiguous().transpose(-1, -2)
    if lb == "t":
        b = b.transpose(-1, -2).contiguous().transpose(-1, -2)
    return a, b


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", ALL_TC + ("tc_warp_specialized", "auto"))
@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("layout", ["nn", "nt", "tn", "tt"])
@pytest.mark.parametrize("shape", GPU_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_gpu_every_dtype_layout_shape(kernel, precision, layout, shape):
    from tilegemm.tensorcore_api import gemm

    m, n, k = shape
    a, b = _gpu_operands(m, n, k, precision, layout[0], layout[1])
    sa = sb = None
    if precision == "fp8":
        sa, sb = torch.tensor([0.5], device="cuda"), torch.tensor([2.0], device="cuda")
    c = gemm(a, b, precision=precision, kernel=kernel, scale_a=sa, scale_b=sb)
    a64 = a.double() * (0.5 if sa is not None else 1)
    b64 = b.double() * (2.0 if sb is not None else 1)
    chk = validate.check(c.double().cpu().numpy(), a64.cpu().numpy(), b64.cpu().numpy(), dtype=TOL[precision],
                         kernel=kernel, out_dtype="bfloat16" if precision == "fp8" else None)
    assert chk.ok, str(chk)


@pytest.mark.gpu
def test_gpu_fp8_accumulation_fast_as_cublas_fast_and_promoted_as_its_default():
    """One-signed FP8 operands in [224, 448] at K = 8192, where the MMA's narrow accumulator drops
    the small addends of a long sum: with fast_accum (the default) every FP8 rung's error is
    torch._scaled_mm(use_fast_accum=True)'s (15.6% on the H100), where split-K's shorter sums lose
    less; with fast_accum=False each is within 2× of _scaled_mm's default mode (0.010%), t05's
    OVERLAP forms too (equal to it to the digit on the H100). A plan kept for one mode never serves
    the other."""
    from tilegemm import tuning
    from tilegemm.kernels.tensorcore import _problem as P
    from tilegemm.tensorcore_api import gemm

    g = torch.Generator(device="cuda").manual_seed(1)
    a = (torch.rand(256, 8192, device="cuda", generator=g) * 224 + 224).to(torch.float8_e4m3fn)
    b = (torch.rand(512, 8192, device="cuda", generator=g) * 224 + 224).to(torch.float8_e4m3fn).t()
    ref = a.double() @ b.double()
    one = torch.ones((), device="cuda")

    def rel(c):
        return ((c.double() - ref).norm() / ref.norm()).item()

    cublas = {fast: rel(torch._scaled_mm(a, b, one, one, out_dtype=torch.float32, use_fast_accum=fast))
              for fast in (True, False)}
    assert cublas[True] > 100 * cublas[False]  # (the case tells the modes apart)
    for kernel in ("auto", "tc_tiled", "tc_persistent", "tc_tma_persistent", "tc_splitk", "tc_warp_specialized"):
        if kernel != "auto" and not tuning.usable(kernel, P.Problem(a, b, torch.empty(256, 512, device="cuda"), "fp8",
                                                                    scale_a=one, scale_b=one)):
            continue
        for _ in range(2):  # the second call of each mode through its plan
            got = {fast: rel(gemm(a, b, kernel=kernel, scale_a=1.0, scale_b=1.0, out_dtype="float32",
                                  fast_accum=fast)) for fast in (True, False)}
            assert got[False] <= 2 * cublas[False], (kernel, got, cublas)
            if kernel != "tc_splitk":
                assert abs(got[True] - cublas[True]) <= 0.1 * cublas[True], (kernel, got, cublas)
            else:
                assert 10 * got[False] < got[True] <= cublas[True], (kernel, got, cublas)
    from tilegemm import dispatch
    from tilegemm.tuning import space as S

    s = P.scale_tensor(1.0, a.device)  # t05's OVERLAP forms (the promotion beside the next k-step's wgmma), forced
    p = P.Problem(a, b, torch.empty(256, 512, device="cuda"), "fp8", scale_a=s, scale_b=s, fast_accum=False)
    if tuning.usable(S.T05, p):
        over = [c for c in S.candidates(S.T05, p) if c.get("OVERLAP")]
        assert over
        for cfg in over:
            p.c.fill_(float("nan"))
            dispatch.run_problem(p, S.T05, config=cfg)
            assert rel(p.c) <= 2 * cublas[False], (cfg, rel(p.c), cublas)


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", [k for k in ALL_TC if k != "tc_gemv"] + ["tc_warp_specialized"])  # (t06: no FP8)
def test_gpu_fp8_tiny_scales(kernel):
    """Per-tensor scales whose product FP32 rounds to 0 (1e-22 · 5e-24): every FP8 rung's epilogue
    scales by one, then the other, and a product in FP32's normal range comes out right (it was 0).
    Operands of one sign in [224, 448], K = 512 (every element of C a normal number; at K = 8192
    the FP8 MMA's narrow accumulator drops a one-signed sum's small addends, 16% on the H100)."""
    from tilegemm import tuning
    from tilegemm.kernels.tensorcore import _problem as P
    from tilegemm.tensorcore_api import gemm

    ran = 0
    for m, n, k in ((1, 200, 512), (130, 264, 512), (64, 128, 512)):
        a, b = _gpu_operands(m, n, k, "tf32", "n", "t")
        a8, b8 = ((x.abs() * 224 + 224).to(torch.float8_e4m3fn) for x in (a, b))
        assert b8.stride(0) == 1  # B column-major, as t05's FP8 form takes it
        sa, sb = (P.scale_tensor(v, a.device) for v in (1e-22, 5e-24))
        assert (sa * sb).item() == 0.0
        if not tuning.usable(kernel, P.Problem(a8, b8, torch.empty(m, n, device="cuda"), "fp8", scale_a=sa,
                                               scale_b=sb)):
            continue
        c = gemm(a8, b8, precision="fp8", kernel=kernel, scale_a=sa, scale_b=sb, out_dtype="float32")
        a64, b64 = a8.double() * sa.double(), b8.double() * sb.double()
        chk = validate.check(c.double().cpu().numpy(), a64.cpu().numpy(), b64.cpu().numpy(), dtype="float8_e4m3fn",
                             out_dtype="float32", kernel=kernel)
        assert chk.ok and c.min().item() >= torch.finfo(torch.float32).tiny, f"{kernel} {m}x{n}x{k}: {chk}"
        ran += 1
    assert ran, f"{kernel} ran no FP8 shape"


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32", "float64"])
def test_gpu_fp8_quantiser_matches_the_torch_rule_bit_for_bit(dtype):
    """gemm's FP8 quantisation of a dense CUDA operand (_convert.fp8: two kernels) gives the bytes
    and the scale that the rule in torch's operations gives on the same GPU: s = max(amax · fp32(1/448),
    tiny) (torch's CUDA division by a number), x / s rounded to nearest even; NaN (0x7F) where x / s
    is not finite, and past 464 0x7F with x's sign, as torch 2.11's cast gives (where another torch
    saturates there, the reference is made so). Row-major, column-major, 3-D and offset operands;
    sizes under one block, odd, and past 1024 programs' first step; the caller's scale (1e-3: values
    past 464) and a scale of 1 with fixed values at e4m3's edges and ties; NaN of either sign, ±Inf,
    -0, FP32 subnormals (s = tiny), float64 past float32's range; an all-zero operand. The kernel
    path is checked to be the one gemm takes (_convert gives its calls) and its result compared to the rule's."""
    from tilegemm import tensorcore_api as api
    from tilegemm.kernels.tensorcore import _convert as conv, launch_calls

    dt = getattr(torch, dtype)
    g = torch.Generator(device="cuda").manual_seed(7)
    def rule(form, scale):  # the torch rule, on the GPU, with torch 2.11's NaN past 464 made explicit
        dense, conv.dense = conv.dense, lambda t: False
        try:
            qr, sr, todo = api._convert(form, torch.float8_e4m3fn, scale)
            assert todo == ()
        finally:
            conv.dense = dense
        r = form.float() / sr
        over = r.isfinite() & (r.abs() > conv.OVER)
        qr = qr.view(torch.uint8).clone()
        qr[over & (r < 0)] = 0xFF
        qr[over & (r >= 0)] = 0x7F
        return qr, sr

    edges = [448.0, -448.0, 464.0, -464.0, math.nextafter(464.0, math.inf), -470.0, 2.0 ** -10, 3 * 2.0 ** -10,
             2.0 ** -6 - 2.0 ** -10, float("nan"), -float("nan"), float("inf"), -float("inf"), -0.0, 1e-6, 7.5e-4]
    if dtype == "float64":
        edges += [1e39, -1e300, float(np.nextafter(np.float64(np.finfo(np.float32).max), np.inf))]
    cases = []
    for shape in [(1, 1), (3, 5), (37, 53), (2, 129, 65), (1100, 4096)]:
        x = (torch.randn(shape, device="cuda", generator=g) * 3).to(dt)
        y = x.clone()
        y.view(-1)[:min(len(edges), y.numel())] = torch.tensor(edges[:y.numel()], dtype=torch.float64).to(dt)
        cases += [(x, None), (x, torch.tensor([1e-3], device="cuda")), (y, 1.0), (y, None)]
    tiny = (torch.randn(40, 24, device="cuda", generator=g) * 1e-39).to(dt)  # (bf16/fp16: zeros, s = tiny too)
    cases += [(tiny, None), (torch.zeros(64, 64, device="cuda", dtype=dt), None)]
    for x, scale in cases:
        forms = [x] + ([x.transpose(-1, -2).contiguous().transpose(-1, -2)] if x.dim() >= 2 else [])
        forms += [x.view(-1)[1:]] if x.numel() > 1 else []  # (an offset start: data_ptr past the storage's)
        for form in forms:
            assert conv.dense(form)
            q, s, todo = api._convert(form, torch.float8_e4m3fn, scale)
            assert [c.fn for c in todo] == ([conv.quantise] if scale is not None else
                                            [conv.partial_amax, conv.quantise]), "not the kernel path"
            launch_calls(todo)
            qr, sr = rule(form, scale)
            assert q.is_cuda and q.dtype == torch.float8_e4m3fn and q.stride() == form.stride()
            assert torch.equal(s.view(torch.int32), sr.view(torch.int32)), (form.shape, scale, s, sr)
            diff = (q.view(torch.uint8) != qr).nonzero()
            assert not len(diff), (form.shape, form.stride(), scale, diff[:5].tolist(),
                                   [(form[tuple(i)].item(), hex(q.view(torch.uint8)[tuple(i)].item()),
                                     hex(qr[tuple(i)].item())) for i in diff[:5].tolist()])
    q, s = conv.fp8(torch.zeros(64, 64, device="cuda", dtype=dt))
    assert s.item() == torch.finfo(torch.float32).tiny and not q.float().any()


@pytest.mark.gpu
@pytest.mark.parametrize("src, dst", [("float32", "bfloat16"), ("float32", "float16"), ("float64", "bfloat16"),
                                      ("float64", "float16"), ("float64", "float32"), ("float16", "bfloat16"),
                                      ("bfloat16", "float16"), ("float16", "float32"), ("bfloat16", "float32")])
def test_gpu_the_cast_kernel_matches_torchs_cast_bit_for_bit(src, dst):
    """gemm's cast of a dense CUDA operand to the precision's dtype (_convert.cast_calls: one
    kernel, kept in a launch plan) gives torch's `.to()`, bit for bit (NaN as NaN: its payload is
    no value), laid out as the input: random values over a wide range, ties at the target's
    rounding, values past its range (to ±Inf), subnormals of both, ±0, ±Inf, NaN; row-major,
    column-major, 3-D and offset operands. gemm takes this path for such an operand."""
    from tilegemm import tensorcore_api as api
    from tilegemm.kernels.tensorcore import _convert as conv, launch_calls

    s_dt, d_dt = getattr(torch, src), getattr(torch, dst)
    g = torch.Generator(device="cuda").manual_seed(11)
    fin = torch.finfo(d_dt)
    edges = [0.0, -0.0, float("inf"), -float("inf"), float("nan"), fin.max, -fin.max, fin.tiny, fin.tiny / 4,
             fin.max * 1.01, 1 + fin.eps / 2, 1 + 1.5 * fin.eps, -(1 + fin.eps / 2), 65504.0, 65520.0, 3.0e38,
             torch.finfo(s_dt).tiny, torch.finfo(s_dt).max]
    for shape in [(1, 1), (3, 5), (37, 53), (2, 129, 65), (1100, 4096)]:
        x = torch.randn(shape, device="cuda", generator=g, dtype=torch.float64)
        x = (x * torch.exp2(torch.randint(-30, 30, shape, device="cuda", generator=g).double())).to(s_dt)
        e = torch.tensor(edges, dtype=torch.float64).to(s_dt)
        x.view(-1)[:min(len(e), x.numel())] = e[:x.numel()].to("cuda")
        forms = [x] + ([x.transpose(-1, -2).contiguous().transpose(-1, -2)] if x.dim() >= 2 else [])
        forms += [x.view(-1)[1:]] if x.numel() > 1 else []
        for form in forms:
            y, scale, todo = api._convert(form, d_dt, None)
            assert scale is None and [c.fn for c in todo] == [conv.cast], "not the kernel path"
            launch_calls(todo)
            want = form.to(d_dt)
            assert y.dtype == d_dt and y.stride() == form.stride()
            nan = want.isnan()
            assert torch.equal(y.isnan(), nan), (form.shape, src, dst)
            bits = {2: torch.int16, 4: torch.int32}[y.element_size()]
            diff = ((y.view(bits) != want.view(bits)) & ~nan).nonzero()
            assert not len(diff), (form.shape, form.stride(), diff[:5].tolist(),
                                   [(form[tuple(i)].item(), y[tuple(i)].item(), want[tuple(i)].item())
                                    for i in diff[:5].tolist()])


@pytest.mark.gpu
def test_gpu_fp8_float64_cuda_scales_are_read():
    """A float64 scale on the GPU is read as a host one is: past float32's range refused (it
    became inf, and C with it), below its smallest subnormal refused (0), and one in range gives
    the product that its float32 value gives."""
    from tilegemm.errors import DTypeError
    from tilegemm.tensorcore_api import gemm

    a, b = _gpu_operands(64, 128, 256, "tf32", "n", "t")
    for v, words in ((1e39, "past float32's range"), (-1e39, "past float32's range"),
                     (1e-50, "smaller in magnitude than float32's smallest subnormal")):
        s = torch.tensor([v], dtype=torch.float64, device="cuda")
        with pytest.raises(DTypeError, match=words):
            gemm(a, b, precision="fp8", scale_b=s)
        assert s.item() == v  # (the caller's scale untouched)
    s64 = torch.tensor([0.5], dtype=torch.float64, device="cuda")
    got = gemm(a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn), precision="fp8", scale_a=s64, scale_b=s64,
               out_dtype="float32")
    want = gemm(a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn), precision="fp8", scale_a=0.5, scale_b=0.5,
                out_dtype="float32")
    assert torch.equal(got, want)


@pytest.mark.gpu
@pytest.mark.parametrize("precision", ["fp16", "bf16", "tf32", "fp8"])
@pytest.mark.parametrize("out_dtype", ["float32", "bfloat16"])
def test_gpu_batched_broadcast_alpha_beta(precision, out_dtype):
    from tilegemm.tensorcore_api import gemm

    a, b3 = _gpu_operands(40, 72, 96, precision, "n", "n", batch=3)
    b2 = b3[1]
    c0 = torch.rand(3, 40, 72, device="cuda").to(getattr(torch, out_dtype))
    for b in (b3, b2):
        c = c0.clone()
        got = gemm(a, b, precision=precision, out_dtype=out_dtype, alpha=0.75, beta=-0.5, c=c)
        assert got is c
        for i in range(3):
            bi = (b[i] if b.dim() == 3 else b).double()
            ref = 0.75 * (a[i].double() @ bi) - 0.5 * c0[i].double()
            chk = validate.check(c[i].double().cpu().numpy(), 0.75 * a[i].double().cpu().numpy(), bi.cpu().numpy(),
                                 dtype=TOL[precision], ref=ref.cpu().numpy(), out_dtype=out_dtype)
            assert chk.ok, str(chk)


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", ALL_TC + ("tc_warp_specialized",))
@pytest.mark.parametrize("precision", ["fp16", "bf16", "tf32", "fp8"])
def test_gpu_bias_row_in_every_epilogue(kernel, precision):
    """A bias row (C_in one row of N broadcast over C's rows, beta 1: a linear layer's bias) is
    added by every rung's epilogue, t05's included (its only C_in; swapped for TF32), on decode,
    ragged and several-tile shapes, by the launch and by its plan at new addresses; the tuning
    class of such a product is the plain product's."""
    from tilegemm import dispatch, tuning
    from tilegemm.kernels.tensorcore import _problem as P
    from tilegemm.tuning import cache

    out = {"fp16": torch.float16, "tf32": torch.float32}.get(precision, torch.bfloat16)
    ran = 0
    for m, n, k in ((1, 200, 96), (4, 72, 40), (130, 264, 192), (300, 520, 264)):
        a, b = _gpu_operands(m, n, k, precision, "n", "t" if precision == "fp8" else "n")
        # (two scale tensors: a plan is refused where one tensor fills two slots)
        sa, sb = (P.scale_tensor(1.0, a.device) for _ in "ab") if precision == "fp8" else (None, None)
        bias = (torch.rand(n, device="cuda") * 4 - 2).to(out)
        p = P.Problem(a, b, torch.empty(m, n, dtype=out, device="cuda"), precision, 1.0, 1.0, bias.expand(m, n),
                      sa, sb)
        assert p.bias_row and cache.problem_class(p).endswith("|nobeta")
        if not tuning.usable(kernel, p):
            continue
        key = ("bias-row-test", kernel, precision, m, n, k)
        for i in range(3):  # the first call builds its plan; the next ones run by it, on a new bias
            if i:
                bias = (torch.rand(n, device="cuda") * 4 - 2).to(out)
                scales = (sa.data_ptr(), sb.data_ptr()) if sa is not None else (0, 0)  # the caller's scales
                c = dispatch._PLANS[key].run(a.data_ptr(), b.data_ptr(), None, *scales, None, bias.data_ptr())
            else:
                dispatch.run_problem(p, kernel, key)
                c = p.c
            ref = a.double() @ b.double() + bias.double()
            chk = validate.check(c.double().cpu().numpy(), a.double().cpu().numpy(), b.double().cpu().numpy(),
                                 dtype=TOL[precision], ref=ref.cpu().numpy(), out_dtype=str(out).removeprefix("torch."))
            assert chk.ok, (m, n, k, i, str(chk))
        dispatch._PLANS.pop(key)
        ran += 1
    no_fp8 = (kernel, precision) == ("tc_gemv", "fp8")  # t06 takes no FP8
    assert ran or no_fp8, f"{kernel} ran none of the shapes in {precision}"


@pytest.mark.gpu
def test_gpu_matmul_auto_picks_tensor_cores_and_returns_caller_kind():
    a, b = validate.random_operands(300, 200, 100, "float16", seed=3)
    assert "tc_" in tilegemm.explain(a, b)
    c = tilegemm.matmul(a, b)
    assert isinstance(c, np.ndarray) and c.dtype == np.float16
    assert validate.check(c, a, b, dtype="float16").ok
    ta = torch.from_numpy(a).cuda().bfloat16()
    tb = torch.from_numpy(b).cuda().bfloat16()
    tc = tilegemm.matmul(ta, tb)
    assert tc.is_cuda and tc.dtype == torch.bfloat16
    assert validate.check(tc.double().cpu().numpy(), ta.double().cpu().numpy(), tb.double().cpu().numpy(),
                          dtype="bfloat16").ok


@pytest.mark.gpu
@pytest.mark.parametrize("tma", [False, True])
@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("split", [1, 2, 7, 64])
@pytest.mark.parametrize("precision", ["fp16", "bf16", "tf32", "fp8"])
def test_gpu_splitk_explicit_splits(precision, split, fused, tma):
    """Forced split counts on a decode shape, K not a multiple of BK, 64 slices > K steps; fused:
    twice, so the second launch finds the tile counters the first one reset. TMA: tiles loaded
    by TMA (FP8's rows of 1,000 and 520 bytes are not 16-byte aligned: pointer loads there)."""
    from tilegemm import dispatch
    from tilegemm.kernels.tensorcore import _problem as C
    from tilegemm.tuning.space import cfg as tile

    m, n, k = 16, 520, 1000
    a, b = _gpu_operands(m, n, k, precision, "n", "n")
    out = torch.bfloat16 if precision == "fp8" else a.dtype
    c = torch.full((m, n), float("nan"), dtype=out, device="cuda")
    sa = sb = torch.ones(1, device="cuda") if precision == "fp8" else None
    bk = {"fp8": 128, "tf32": 32}.get(precision, 64)
    cfg = dict(tile(16, 64, bk, 4, 3), SPLIT=split, **({"FUSED": True} if fused else {}), **({"TMA": True} if tma else {}))
    for _ in range(2 if fused else 1):
        c.fill_(float("nan"))
        dispatch.run_problem(C.Problem(a, b, c, precision, scale_a=sa, scale_b=sb), "tc_splitk", config=cfg)
    chk = validate.check(c.double().cpu().numpy(), a.double().cpu().numpy(), b.double().cpu().numpy(),
                         dtype=TOL[precision], kernel="tc_splitk", out_dtype="bfloat16" if precision == "fp8" else None)
    assert chk.ok, str(chk)


@pytest.mark.gpu
@pytest.mark.parametrize("precision,bm,bk,split", [("tf32", 64, 32, 12), ("tf32", 64, 32, 4), ("bf16", 16, 128, 16),
                                                  ("fp8", 16, 256, 13)])
def test_gpu_pipelined_fused_sum_is_the_two_launch_sum_bit_for_bit(precision, bm, bk, split):
    """Where the fused kernel's sum is pipelined (t04.sum_stages: 4 or more groups of RED partials,
    the shapes of the H200 database's TF32 entries and of decode tiles in many slices, TMA loads),
    C is bit for bit the two-launch form's, whose reduction kernel adds the partials in the same
    order; twice, so the second launch finds the tile counters the first one reset."""
    from tilegemm import dispatch
    from tilegemm.kernels.tensorcore import _problem as C
    from tilegemm.kernels.tensorcore import t04_splitk as t04
    from tilegemm.tuning.space import cfg as tile

    m, n, k = (128, 256, 1536) if bm == 64 else (16, 320, 4096)
    a, b = _gpu_operands(m, n, k, precision, "n", "t" if precision == "fp8" else "n")
    out = torch.bfloat16 if precision == "fp8" else a.dtype
    sa = sb = torch.full((1,), 0.5, device="cuda") if precision == "fp8" else None
    p = C.Problem(a, b, torch.empty(m, n, dtype=out, device="cuda"), precision, scale_a=sa, scale_b=sb)
    cfg = dict(tile(bm, 64, bk, 4, 4), SPLIT=split, SWAP=True, REG_A=C.reg_a(p, True), TMA=True)
    assert t04.sum_stages(cfg, split, t04.reduce_width(cfg, split), a.element_size()) == 3
    got = {}
    for form in ("two launches", "fused", "fused again"):
        c = torch.full((m, n), float("nan"), dtype=out, device="cuda")
        dispatch.run_problem(C.Problem(a, b, c, precision, scale_a=sa, scale_b=sb), "tc_splitk",
                             config=dict(cfg, FUSED=True) if form != "two launches" else cfg)
        got[form] = c
    assert torch.equal(got["fused"], got["two launches"]) and torch.equal(got["fused again"], got["two launches"])
    chk = validate.check(got["fused"].double().cpu().numpy(), a.double().cpu().numpy() * (0.5 if sa is not None else 1),
                         b.double().cpu().numpy() * (0.5 if sb is not None else 1), dtype=TOL[precision],
                         kernel="tc_splitk", out_dtype="bfloat16" if precision == "fp8" else None)
    assert chk.ok, str(chk)


@pytest.mark.gpu
@pytest.mark.parametrize("precision", ["fp16", "bf16", "tf32", "fp8"])
@pytest.mark.parametrize("layout", ["nn", "nt", "tn", "tt"])
@pytest.mark.parametrize("bm", [16, 64])
def test_gpu_swapped_and_register_operands(precision, layout, bm):
    """Forced C^T = B^T·A^T and register-A configurations on wgmma (t03, t04 and t04 with TMA loads),
    each layout the operand rules allow, edge tiles in M, N and K."""
    from tilegemm import dispatch
    from tilegemm.kernels.tensorcore import _problem as C
    from tilegemm.tuning.space import cfg as tile

    m, n, k = 48 if bm == 16 else 208, 144, 208
    a, b = _gpu_operands(m, n, k, precision, layout[0], layout[1])
    out = torch.bfloat16 if precision == "fp8" else a.dtype
    sa = sb = torch.ones(1, device="cuda") if precision == "fp8" else None
    bk = {"fp8": 128, "tf32": 32}.get(precision, 64)
    ran = 0
    for swap in (True, False):
        c = torch.full((m, n), float("nan"), dtype=out, device="cuda")
        p = C.Problem(a, b, c, precision, scale_a=sa, scale_b=sb)
        reg = C.reg_a(p, swap)
        if reg is None:
            continue
        base = dict(tile(bm, 64, bk, 4, 3), SWAP=swap, REG_A=reg)
        for rung, cfg in (("tc_tma_persistent", dict(base, C_TMA=False, WS=False)),
                          ("tc_splitk", dict(base, SPLIT=2, FUSED=True)), ("tc_splitk", dict(base, SPLIT=2, TMA=True))):
            c.fill_(float("nan"))
            used = dispatch.run_problem(p, rung, config=cfg)
            assert used["kernel"] == rung
            chk = validate.check(c.double().cpu().numpy(), a.double().cpu().numpy(), b.double().cpu().numpy(),
                                 dtype=TOL[precision], kernel=f"{rung} {cfg}",
                                 out_dtype="bfloat16" if precision == "fp8" else None)
            assert chk.ok, str(chk)
            ran += 1
    # 32/8-bit with A column-major and B row-major: neither form avoids a copy (t03 copies instead)
    assert ran >= 3 or (precision in ("tf32", "fp8") and layout == "tn")


@pytest.mark.gpu
@pytest.mark.parametrize("precision", ["fp16", "bf16", "tf32", "fp8"])
@pytest.mark.parametrize("batch", [0, 3])
def test_gpu_flattened_loop(precision, batch):
    """FLAT (one loop over tile and k-step): several tiles per program (more tiles than SMs), edge
    tiles in M, N and K, alpha/beta, batched, C by TMA and by pointers."""
    from tilegemm import dispatch
    from tilegemm.kernels.tensorcore import _problem as C
    from tilegemm.tuning.space import cfg as tile

    m, n, k = 1000, 1000, 208  # K: an edge k-step, rows still 16-byte aligned (TMA) for FP8
    a, b = _gpu_operands(m, n, k, precision, "n", "t" if precision in ("tf32", "fp8") else "n", batch)
    out = torch.bfloat16 if precision == "fp8" else a.dtype
    sa = sb = torch.full((1,), 0.5, device="cuda") if precision == "fp8" else None
    shape = (batch, m, n) if batch else (m, n)
    c0 = torch.rand(shape, device="cuda").to(out)
    bk = {"fp8": 128, "tf32": 32}.get(precision, 64)
    for c_tma in ((False,) if batch else (False, True)):
        c = c0.clone()
        p = C.Problem(a, b, c, precision, alpha=1.5, beta=-0.5, c_in=c, scale_a=sa, scale_b=sb)
        assert -(-m // 64) * -(-n // 64) > C.num_sms(a.device)
        used = dispatch.run_problem(p, "tc_tma_persistent", config=dict(tile(64, 64, bk, 4, 3), C_TMA=c_tma, FLAT=True))
        assert used["kernel"] == "tc_tma_persistent" and used["FLAT"]
        ref = 1.5 * 0.25 ** (precision == "fp8") * (a.double() @ b.double()) - 0.5 * c0.double()
        err = ((c.double() - ref).abs().max() / ref.abs().max()).item()
        assert err < {"fp16": 2e-3, "bf16": 1e-2, "tf32": 2e-3, "fp8": 1e-2}[precision], err


@pytest.mark.gpu
def test_gpu_warp_specialize_is_a_no_op_on_hopper():
    """Triton 3.6 accepts warp_specialize on sm_90 and emits the same PTX, so the tuner does not
    try it. If this fails, a newer Triton specialises on this GPU: time WS again."""
    from tilegemm.kernels import tensorcore as tc
    from tilegemm.kernels.tensorcore import _problem as C
    from tilegemm.kernels.tensorcore import t03_tma_persistent as t03
    from tilegemm.tuning import space as S

    if C.capability(torch.device("cuda")) != (9, 0):
        pytest.skip("the claim is about sm_90")
    a, b = _gpu_operands(512, 512, 512, "fp16", "n", "n")
    p = C.Problem(a, b, torch.empty(512, 512, dtype=torch.float16, device="cuda"), "fp16")
    cfg = dict(S.cfg(128, 256, 64, 8, 3), C_TMA=True)
    def ptx(extra):  # the code: no debug sections or .file/.loc lines (source paths differ when one
        text = tc.launch_calls(t03.launches(p, dict(cfg, **extra)))[0].asm["ptx"]  # kernel came from Triton's disk cache)
        code = text.split("\t.section\t.debug")[0]
        return [line for line in code.splitlines() if not line.lstrip().startswith((".file", ".loc"))]

    plain = ptx({"WS": False})
    assert ptx({"WS": True}) == plain
    assert ptx({"FLAT": True}) != plain
    assert not any(c.get("WS") for c in S.candidates(S.T03, p))


@pytest.mark.gpu
def test_gpu_warp_specialized_fp8_e5m2():
    """e5m2 operands (wider range, 2 mantissa bits) through t05 with scales, against float64."""
    from tilegemm import dispatch
    from tilegemm.kernels.tensorcore import _problem as C
    from tilegemm.kernels.tensorcore import t05_warp_specialized as t05
    from tilegemm.tuning import space as S

    m, n, k = 2100, 2056, 528
    a32, b32 = _gpu_operands(m, n, k, "tf32", "n", "t")
    a, b = a32.to(torch.float8_e5m2), b32.to(torch.float8_e5m2)
    assert b.stride(0) == 1  # the cast keeps B column-major
    sa, sb = torch.tensor([0.25], device="cuda"), torch.tensor([4.0], device="cuda")
    c = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
    p = C.Problem(a, b, c, "fp8", scale_a=sa, scale_b=sb)
    assert t05.usable(p) == ""
    used = dispatch.run_problem(p, S.T05, config=S.default(S.T05, p))
    assert used["kernel"] == t05.NAME
    a64, b64 = a.double() * 0.25, b.double() * 4.0
    chk = validate.check(c.double().cpu().numpy(), a64.cpu().numpy(), b64.cpu().numpy(), dtype="float8_e5m2",
                         out_dtype="bfloat16", kernel=t05.NAME)
    assert chk.ok, str(chk)


def test_settle_cancels_a_drifting_clock(monkeypatch):
    """On a GPU that slows by 1% with every timing (clocks falling under a power cap), one pass in a
    fixed order picks whichever went first; settle's alternating rounds pick the faster kernel
    (graph mode: rounds of one time_ms each)."""
    from tilegemm.tuning import timer as C

    calls = []

    def drifting(fn, budget_ms=0.0, graph=False):
        calls.append(fn)
        return fn() * (1 + 0.01 * (len(calls) - 1))

    monkeypatch.setattr(C, "time_ms", drifting)
    slow, fast = (lambda: 1.005), (lambda: 1.000)
    single = [C.time_ms(f) for f in (slow, fast)]
    assert single[0] < single[1]  # one pass, slow first: the order wins
    calls.clear()
    ms = C.settle([slow, fast], budget_ms=1.0, graph=True, rounds=4)
    assert ms[1] < ms[0] and len(calls) == 8
    assert calls[:4] == [slow, fast, fast, slow]  # the order reversed every round


def test_settle_interleaves_single_samples(monkeypatch):
    """Eager settle takes held samples in batches of five, alternating ABBA, at least SETTLE_MIN of
    each, so a drift of 0.1% a sample cannot beat a kernel 0.5% faster."""
    from tilegemm.tuning import timer as C

    taken = []

    def held(fn, n, flush):
        out = []
        for _ in range(n):
            taken.append(fn)
            out.append(fn() * (1 + 0.001 * len(taken)))
        return out

    monkeypatch.setattr(C, "_held_samples", held)
    monkeypatch.setattr(C, "_flush_buffer", lambda: None)
    slow, fast = (lambda: 1.005), (lambda: 1.000)
    ms = C.settle([slow, fast], budget_ms=0.0, graph=False)  # the budget is spent at once
    assert ms[1] < ms[0]
    timed = taken[2:]  # after one warm sample each
    assert timed[:20] == [slow] * 5 + [fast] * 10 + [slow] * 5  # batches of five, ABBA
    assert timed.count(slow) == timed.count(fast) == C.SETTLE_MIN  # the budget cannot cut below it
    assert C.settle([], budget_ms=1.0, graph=False) == []


@pytest.mark.gpu
def test_gpu_tuner_times_device_time_not_the_launch():
    """A call that spends 80 µs on the host and a few µs on the GPU: the tuner's eager timing
    (L2 flush, then a hold while the call is launched) reports the GPU's few µs."""
    import time

    from tilegemm.tuning import timer as C

    x = torch.zeros(1024, device="cuda")

    def slow_launch():
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 80e-6:
            pass
        x.add_(1.0)

    assert C.time_ms(slow_launch, budget_ms=20.0) < 0.04


@pytest.mark.gpu
def test_gpu_tuner_settles_and_caches_the_t03_t05_verdict(tmp_path, monkeypatch):
    """A tuning re-times its fastest few against each other (the entry says how many), and the
    t03-or-t05 choice is stored once per bucket and reused without timing again."""
    from tilegemm import dispatch
    from tilegemm.kernels.tensorcore import _problem as P
    from tilegemm.tuning import cache, tuner

    monkeypatch.setenv("TILEGEMM_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TILEGEMM_AUTOTUNE", "1")
    monkeypatch.setenv("TILEGEMM_TUNE_BUDGET_S", "3")
    cache.reset()
    a, b = _gpu_operands(4096, 4096, 1024, "bf16", "n", "n")
    c = torch.empty(4096, 4096, dtype=torch.bfloat16, device="cuda")
    p = P.Problem(a, b, c, "bf16")
    used = dispatch.run_problem(p)
    assert "tuned now" in used["source"]
    names = ("tc_tma_persistent", "tc_warp_specialized")
    entries = {n: cache.cached_entry(cache.tune_key(n, p)) for n in names}
    assert all(e and e["tried"] >= 2 and e["settled"] >= 2 for e in entries.values()), entries  # re-timed
    cache.reset()  # from here on, what the file holds
    verdict = cache.cached_entry(cache.tune_key("+".join(names), p))
    assert verdict["winner"] in names and set(verdict["ms"]) == set(names)
    assert verdict["configs"] == {name: e["config"] for name, e in entries.items()}
    ref = a.double() @ b.double()
    assert float((c.double() - ref).norm() / ref.norm()) < 1e-2
    tuner.tuning_log.clear()
    again = dispatch.run_problem(p)
    assert not tuner.tuning_log and "your tuning cache" in again["source"]  # the decision came from the file


@pytest.mark.gpu
def test_gpu_tuner_never_picks_a_wrong_configuration(tmp_path, monkeypatch):
    from tilegemm.kernels.tensorcore import _problem as P
    from tilegemm.tuning import cache, tuner
    from tilegemm.tuning.space import cfg as tile

    monkeypatch.setenv("TILEGEMM_CACHE_DIR", str(tmp_path))
    cache.reset()
    a, b = _gpu_operands(256, 256, 256, "fp16", "n", "n")
    p = P.Problem(a, b, torch.empty(256, 256, dtype=torch.float16, device="cuda"), "fp16")

    def run(rung, q, cfg):
        if cfg["BM"] == 16:
            q.c.zero_()  # fast, and wrong
        else:
            torch.matmul(q.a, q.b, out=q.c)

    monkeypatch.setattr(tuner, "run", run)
    got = tuner.tune_rung("tc_persistent", p, [tile(16, 16, 16, 4, 2), tile(64, 64, 64, 4, 2)], variant="probe-test")
    assert got["config"]["BM"] == 64 and got["failed"] == 1 and got["skipped"] == 0
    assert any("wrong result" in why for _, why in tuner.last_tuning["failed"])
    # with the budget spent after the first timing, the rest are counted as skipped, not failed
    monkeypatch.setenv("TILEGEMM_TUNE_BUDGET_S", "1e-9")
    got = tuner.tune_rung("tc_persistent", p, [tile(64, 64, 64, 4, 2), tile(32, 32, 32, 4, 2), tile(16, 16, 16, 4, 2)],
                          variant="budget-test")
    assert (got["tried"], got["failed"], got["skipped"]) == (1, 0, 2), got
    # compiles are not on the budget's clock: first calls (a compile each) longer than the whole
    # budget leave every candidate timed
    monkeypatch.setenv("TILEGEMM_TUNE_BUDGET_S", "0.5")
    compiled = set()

    def compiling(rung, q, cfg):
        if cfg["BM"] not in compiled:
            compiled.add(cfg["BM"])
            time.sleep(0.6)
        torch.matmul(q.a, q.b, out=q.c)

    monkeypatch.setattr(tuner, "run", compiling)
    got = tuner.tune_rung("tc_persistent", p, [tile(64, 64, 64, 4, 2), tile(32, 32, 32, 4, 2), tile(128, 64, 64, 4, 2)],
                          variant="compile-test")
    assert (got["tried"], got["failed"], got["skipped"]) == (3, 0, 0), got


# ---- the SIMT mixed-precision rung (simulator or GPU) ----------------------------------------------


@pytest.mark.parametrize("shape", [(1, 1, 1), (5, 23, 7), (70, 65, 33)])
def test_mixed_half_simt(shape):
    m, n, k = shape
    a, b = validate.random_operands(m, n, k, "float16", seed=5)
    c = tilegemm.matmul(a, b, kernel="mixed_half")
    assert c.dtype == np.float16
    chk = validate.check(c, a, b, dtype="float16", kernel="mixed_half")
    assert chk.ok, str(chk)


def test_mixed_half_fp32_output():
    from tilegemm import _cuda
    from tilegemm.kernels.simt import k20_mixed_half as k20

    cuda = _cuda.cuda
    a, b = validate.integer_operands(37, 29, 41, "float16", seed=2)
    c = cuda.device_array((37, 29), dtype=np.float32)
    k20.launch(cuda.to_device(a), cuda.to_device(b), c, None)
    got = c.copy_to_host()
    assert np.array_equal(got, a.astype(np.float64) @ b.astype(np.float64))  # small integers: exact


def test_fp8_kmajor_copy_needs_aligned_rows_and_known_good_tf32_first():
    """FP8 with A column-major and B row-major needs a K-major copy; with K·s not a multiple of 16
    bytes TMA could not describe the copy, so it is not a candidate (Triton's own way is). Known-good
    configurations come first in the tuning order."""
    from tilegemm.kernels.tensorcore import _problem as C
    from tilegemm.tuning import space as S

    a8 = torch.empty(4104, 512, dtype=torch.float8_e4m3fn).t()
    b8 = torch.empty(4104, 384, dtype=torch.float8_e4m3fn)
    odd = S.candidates(S.T03, C.Problem(a8, b8, torch.empty(512, 384, dtype=torch.bfloat16), "fp8"))
    assert odd and not any(c.get("KMAJOR") for c in odd)
    a = torch.empty(4096, 4096, dtype=torch.float32)
    p = C.Problem(a, a, a, "tf32")
    first = S.candidates(S.T03, p)[0]
    assert (first["BM"], first["BN"], first["BK"], first["num_stages"]) == (128, 256, 32, 3)
    assert first.get("SWAP") or first.get("KMAJOR")  # row-major B: never Triton's transpose in shared memory


# ---- t05, the warp-specialised Gluon rung ------------------------------------------------------


def test_warp_specialized_rung_registered_and_its_configs_fit():
    from tilegemm.kernels.tensorcore import _problem as C
    from tilegemm.kernels.tensorcore import t05_warp_specialized as t05
    from tilegemm.tuning import space as S

    k = registry.get("tc_warp_specialized")
    assert k.backend == "tensorcore" and k.requires == "sm_90" and "gluon" in k.tags
    assert k.doc.splitlines()[0] and k.auto_rank < registry.get("tc_tma_persistent").auto_rank
    a = torch.empty(4096, 4096, dtype=torch.bfloat16, device="meta")  # at 0: aligned (a CPU tensor's base is 64-byte)
    for out in (torch.bfloat16, torch.float32):
        p = C.Problem(a, a, torch.empty(4096, 4096, dtype=out, device="meta"), "bf16")
        cands = S.candidates(S.T05, p)
        assert len(cands) == len(S.T05_STAGE_CONFIGS)  # an FP32 C is stored in more, smaller slices
        for cfg in cands:
            assert S.t05_smem_bytes(cfg, 2, out.itemsize) <= S.SMEM_BUDGET, cfg
            assert cfg["BN"] % cfg["SPLIT"] == 0 and cfg["BM"] // cfg["CONSUMERS"] == (128 if cfg["CONSUMERS"] == 1 else 64)
    assert "sm_90" in t05.usable(p)  # CPU tensors


@pytest.mark.parametrize("bt", [False, True], ids=["b_row", "b_col"])
@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float32], ids=["fp8", "tf32"])
def test_warp_specialized_configs_for_fp8_and_tf32(dtype, bt):
    """8- and 32-bit inputs keep 128 bytes of K per row (BK 128 for FP8, 32 for TF32); TF32 with a
    row-major B takes the swapped tiles (256 of C's rows × 128 of its columns), every other case
    the plain ones; every candidate fits the shared memory with its C slices."""
    from tilegemm.kernels.tensorcore import _problem as C
    from tilegemm.kernels.tensorcore import t05_warp_specialized as t05
    from tilegemm.tuning import space as S

    a = torch.empty(4096, 4096, dtype=dtype)
    b = torch.empty(4096, 4096, dtype=dtype)
    if bt:
        b = b.t().contiguous().t()
    out = torch.float32 if dtype == torch.float32 else torch.bfloat16
    p = C.Problem(a, b, torch.empty(4096, 4096, dtype=out), "tf32" if dtype == torch.float32 else "fp8")
    cands = S.candidates(S.T05, p)
    swap = dtype == torch.float32 and not bt
    assert len(cands) == len(S.T05_SWAP_CONFIGS if swap else S.T05_STAGE_CONFIGS)
    for cfg in cands:
        assert cfg["BK"] * dtype.itemsize == 128 and bool(cfg.get("SWAP")) == swap, cfg
        assert (cfg["BM"], cfg["BN"]) in (((256, 128), (192, 128)) if swap else ((128, 256), (128, 128), (192, 128),
                                                                                  (192, 192), (192, 96))), cfg
        assert S.t05_smem_bytes(cfg, dtype.itemsize, out.itemsize) <= S.SMEM_BUDGET, cfg
        assert t05._warps(cfg) * 16 * cfg["CONSUMERS"] == (128 if swap else cfg["BM"]), cfg  # the MMA's rows, 16 a warp
        assert cfg["CONSUMERS"] == 1 or not swap  # swapped: one 8-warp partition (ptxas pipelines it)


def test_promoted_fp8_forms_with_a_from_registers_compile():
    """t03's and t04's forms with the MMA's A operand from registers (swapped: a row-major B's tile;
    plain: a column-major A's), FP8 with the partial sums promoted to FP32 every 128 of K: Triton 3.6
    and 3.9 failed to compile them (the TritonGPUPipeline pass) where a k-step held more than one
    promotion span and BN passed 32, as the heuristic's small-M tile (16×64×256) and the tuner's
    candidates did, which then fell back. Every such form the rungs give now compiles for sm_90,
    one span a k-step with the stages that keep its bytes in flight; fast accumulation keeps its tile."""
    from tilegemm.kernels.tensorcore import _problem as C
    from tilegemm.kernels.tensorcore import t03_tma_persistent as t03
    from tilegemm.kernels.tensorcore import t04_splitk as t04
    from tilegemm.tuning import space as S

    one = torch.ones(1)

    def problem(a, b, fast=False):
        return C.Problem(a, b, torch.empty(a.shape[0], b.shape[1], dtype=torch.bfloat16), "fp8", scale_a=one,
                         scale_b=one, fast_accum=fast)

    e4 = torch.float8_e4m3fn
    p = problem(torch.empty(5, 4096, dtype=e4), torch.empty(4096, 4096, dtype=e4))  # B row-major: swapped, REG_A
    q = problem(torch.empty(4096, 256, dtype=e4).t(), torch.empty(4096, 4096, dtype=e4).t())  # A column-major
    tiles = [dict(BM=bm, BN=bn, BK=bk, GROUP_M=8, num_warps=4, num_stages=st)
             for bm, bn, bk, st in ((16, 64, 256, 5), (16, 128, 512, 3), (64, 128, 256, 4))]
    forms = [(t03, p, S.adapt(S.T03, p, c)) for c in tiles] + [(t03, q, S.adapt(S.T03, q, tiles[2]))]
    forms += [(t03, p, c) for c in S.candidates(S.T03, p) if c.get("REG_A") and c["BN"] > 32][:3]
    forms += [(t04, p, c) for c in S.candidates(S.T04, p) if c.get("REG_A") and c["BN"] > 32 and not c.get("TMA")][:3]
    assert len(forms) >= 8 and all(f.get("REG_A") for _, _, f in forms), forms
    for rung, prob, f in forms:
        C.compile_for_sm90(rung.launches(prob, f, num_sms=132)[-1] if rung is t03 else rung.launches(prob, f)[0])
    assert all(f["BK"] == C.PROMOTE_K for _, _, f in forms)
    first = forms[0][2]  # 16×64×256 in 5 stages: 128 of K in 8 (the most the seeds use), 160 KB
    assert (first["BK"], first["num_stages"]) == (128, 8)
    fast = problem(p.a, p.b, fast=True)
    assert S.adapt(S.T03, fast, tiles[0])["BK"] == 256 and S.adapt(S.T03, fast, tiles[0])["num_stages"] == 5


def test_warp_specialized_fp8_and_tf32_in_the_ptx():
    """FP8: m64n256k32 e4m3 from shared memory, the two scales loaded once per tile in the epilogue.
    TF32 with a row-major B, swapped: m64n256k8 with its A operand in registers (four 32-bit
    registers, loaded from shared memory: B's N-major tile), and no operand transposed through
    shared memory in the loop. Both keep the producer/consumer register split."""
    import re

    from tilegemm.kernels.tensorcore import t05_warp_specialized as t05
    from tilegemm.tuning import space as S

    k = t05.compile_for_sm90(S.t05_cfg(128, 256, 128, 3), torch.float8_e4m3fn, b_t=True)
    ptx = k.asm["ptx"]
    assert "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3" in ptx
    assert len(re.findall(r"ld\.global\.b32", ptx)) == 2  # scale_a, scale_b
    assert {"24", "240"} <= set(re.findall(r"setmaxnreg\.\w+\.sync\.aligned\.u32\s+(\d+)", ptx))

    cfg = S.t05_cfg(256, 128, 32, 4, 4, 1, swap=True)
    k = t05.compile_for_sm90(cfg, torch.float32)
    ptx = k.asm["ptx"]
    reg_a = re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n256k8\.f32\.tf32\.tf32 \{[^}]*\}, "
                       r"\{(%r\d+,%r\d+,%r\d+,%r\d+)\}, %rd", ptx)
    # BK 32 = four k8 steps, each with a register A; the loop's two k-steps and the odd last one
    assert len(reg_a) == 12, len(reg_a)
    first, second = set(",".join(reg_a[:4]).split(",")), set(",".join(reg_a[4:8]).split(","))
    assert len(first) == len(second) == 16 and not first & second  # two sets of operand registers
    assert ptx.count("ld.shared") >= 48  # A fragments: 128 rows × 32 of K over 256 threads, × 3
    assert {"24", "240"} <= set(re.findall(r"setmaxnreg\.\w+\.sync\.aligned\.u32\s+(\d+)", ptx))
    assert k.metadata.shared <= S.t05_smem_bytes(cfg, 4, 4) <= k.metadata.shared + 512


def test_warp_specialized_bias_row_in_the_ptx():
    """t05's bias epilogue: a bias row (BF16 C, and TF32 swapped, where it runs along the MMA's rows)
    is loaded from global memory in the epilogue only, the ring and the epilogue buffer unchanged;
    without one nothing is loaded. A bias row is the plain product's tuning class; a full C_in, a
    row scaled by beta ≠ 1 or one element broadcast is not a bias row (t05 refuses those)."""
    import re

    from tilegemm.kernels.tensorcore import _problem as P
    from tilegemm.kernels.tensorcore import t05_warp_specialized as t05
    from tilegemm.tuning import cache
    from tilegemm.tuning import space as S

    for cfg, dtype, width in ((S.t05_cfg(128, 256, 64, 4), torch.bfloat16, "b16"),
                              (S.t05_cfg(256, 128, 32, 4, 4, 1, swap=True), torch.float32, "b32")):
        plain, bias = (t05.compile_for_sm90(cfg, dtype, bias=on) for on in (False, True))
        assert not re.findall(r"ld\.global", plain.asm["ptx"])
        assert re.findall(r"ld\.global\.(\w+)", bias.asm["ptx"]) and set(
            re.findall(r"ld\.global\.(\w+)", bias.asm["ptx"])) == {width}
        assert bias.metadata.shared == plain.metadata.shared
    a, b, c = torch.empty(64, 32, dtype=torch.bfloat16), torch.empty(32, 48, dtype=torch.bfloat16), torch.empty(
        64, 48, dtype=torch.bfloat16)
    row = torch.empty(48, dtype=torch.bfloat16)
    rows = P.Problem(a, b, c, "bf16", 1.0, 1.0, row.expand(64, 48))
    assert rows.bias_row and cache.problem_class(rows) == cache.problem_class(P.Problem(a, b, c, "bf16"))
    for other in (P.Problem(a, b, c, "bf16", 1.0, 1.0, c), P.Problem(a, b, c, "bf16", 1.0, 0.5, row.expand(64, 48)),
                  P.Problem(a, b, c, "bf16", 1.0, 1.0, row[:1].expand(64, 48))):
        assert not other.bias_row and cache.problem_class(other).endswith("|beta")


def test_warp_specialized_swapped_wgmma_stays_pipelined():
    """In the machine code ptxas made of the swapped TF32 form, wgmma is pipelined: the waits in
    the k-loop leave a group in flight (WARPGROUP.DEPBAR.LE gsb0, 0x1), and at most the tile's
    final wait drains them. With two consumer partitions ptxas serialises every one (a full wait
    after each HGMMA; warning C7512): the reason the swapped candidates have one partition."""
    import re
    import subprocess
    import tempfile

    from tilegemm.bench.sass import _tool
    from tilegemm.kernels.tensorcore import t05_warp_specialized as t05
    from tilegemm.tuning import space as S

    nvdisasm = _tool("nvdisasm")
    assert nvdisasm, "Triton's wheel ships nvdisasm (triton/backends/nvidia/bin)"

    def waits(consumers):
        k = t05.compile_for_sm90(S.t05_cfg(256, 128, 32, 4, 4, consumers, swap=True), torch.float32)
        with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
            f.write(k.asm["cubin"])
            f.flush()
            sass = subprocess.run([nvdisasm, "-c", f.name], capture_output=True, text=True, check=True).stdout
        return sass.count("HGMMA"), re.findall(r"WARPGROUP\.DEPBAR\.LE gsb0, (0x\d)", sass)

    hgmma, depbar = waits(1)
    assert hgmma == 12 and depbar.count("0x0") <= 1 and depbar.count("0x1") >= 3, (hgmma, depbar)
    hgmma, depbar = waits(2)
    assert depbar.count("0x0") == hgmma, (hgmma, depbar)


def test_warp_specialized_promoted_fp8_overlaps_its_promotion(tmp_path):
    """FP8 without fast accumulation. Promoted by the MMA's own max_num_imprecise_acc, the adds read
    a wgmma's registers in flight and ptxas serialises every wgmma of the kernel (C7514, and a wait
    it injects, C7517): 8192³ took 1.83 ms on 128×256 where cuBLAS's promoted mode took 0.75
    (H100). OVERLAP adds each k-step's partial sum while the next one's wgmma runs: no such
    warning, no spills at 64×128 a warpgroup with one or two partitions, and the k-loop's waits leave
    a group in flight (WARPGROUP.DEPBAR.LE gsb0, 0x1). The space offers it only where it fits, and a
    configuration asking for it elsewhere is refused, or (adapt) runs without it."""
    import re

    from tilegemm.bench.sass import _tool
    from tilegemm.kernels.tensorcore import _problem as C
    from tilegemm.kernels.tensorcore import t05_warp_specialized as t05
    from tilegemm.tuning import space as S

    bins = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
    ptxas = next((p for p in (bins / "ptxas-blackwell", bins / "ptxas") if p.exists()), None)
    nvdisasm = _tool("nvdisasm")
    assert ptxas and nvdisasm, "Triton's wheel ships ptxas and nvdisasm (triton/backends/nvidia/bin)"

    def built(cfg):
        k = t05.compile_for_sm90(cfg, torch.float8_e4m3fn, b_t=True, fast_accum=False)
        src = tmp_path / "k.ptx"
        src.write_text(k.asm["ptx"])
        log = subprocess.run([str(ptxas), "-arch=sm_90a", "-v", str(src), "-o", str(src.with_suffix(".cubin"))],
                             capture_output=True, text=True).stderr
        cubin = tmp_path / "k.cubin"
        cubin.write_bytes(k.asm["cubin"])
        sass = subprocess.run([nvdisasm, "-c", str(cubin)], capture_output=True, text=True, check=True).stdout
        return log, re.findall(r"WARPGROUP\.DEPBAR\.LE gsb0, (0x\d)", sass)

    for cfg in (S.t05_cfg(128, 128, 128, 6, 1, 1), S.t05_cfg(128, 128, 128, 5, 1, 2)):
        log, waits = built(dict(cfg, OVERLAP=True))
        assert " 0 bytes spill stores" in log and "C7514" not in log and "C7517" not in log, (cfg, log[-600:])
        assert waits.count("0x1") >= 2, (cfg, waits)
        log, _ = built(cfg)  # the implicit form, for contrast: a wait injected, or every wgmma serialised
        assert "C7517" in log or "C7514" in log, log[-600:]
    a = torch.empty(4096, 4096, dtype=torch.float8_e4m3fn)
    b = torch.empty(4096, 4096, dtype=torch.float8_e4m3fn).t()
    fast, promoted = (C.Problem(a, b, torch.empty(4096, 4096, dtype=torch.bfloat16), "fp8", scale_a=torch.ones(1),
                                scale_b=torch.ones(1), fast_accum=f) for f in (True, False))
    over = [c for c in S.candidates(S.T05, promoted) if c.get("OVERLAP")]
    assert over and all(c["BN"] <= 128 and c["CONSUMERS"] <= 2 and c["BK"] == 128 for c in over)
    assert not any(c.get("OVERLAP") for c in S.candidates(S.T05, fast))
    ov = dict(S.t05_cfg(128, 128, 128, 5, 1, 2), OVERLAP=True)
    assert t05._args(promoted, ov, num_sms=132)[1][-1] == -128  # PROMOTE = -BK: overlapped
    assert "OVERLAP" not in S.adapt(S.T05, fast, ov) and S.adapt(S.T05, promoted, ov) == ov
    for p, cfg in ((fast, ov), (promoted, dict(S.t05_cfg(128, 192, 128, 4, 1, 2), OVERLAP=True))):
        with pytest.raises(ValueError, match="OVERLAP is for FP8 without fast accumulation"):
            t05._args(p, cfg, num_sms=132)


def _gemv_problem(m, n, k, dtype, w_t=True, offset=0):
    """A t06 problem on CPU tensors (nothing runs): B = Wᵀ (K-major) or row-major; offset elements
    into B's storage (an unaligned B)."""
    from tilegemm.kernels.tensorcore import _problem as P

    a = torch.empty(m, k, dtype=dtype)
    if w_t:
        b = torch.empty(n * k + offset, dtype=dtype)[offset:].view(n, k).t()
    else:
        b = torch.empty(k * n + offset, dtype=dtype)[offset:].view(k, n)
    prec = "tf32" if dtype == torch.float32 else P.precision_of(dtype)
    return P.Problem(a, b, torch.empty(m, n, dtype=dtype), prec)


def _gemv_loop(ptx: str) -> str:
    """The PTX of t06's K loop: from the loop header's label to the branch back to it."""
    import re

    lines = ptx.splitlines()
    head = next(i for i, line in enumerate(lines) if "Loop Header" in line)
    label = lines[head].split(":")[0].strip()
    back = next(i for i in range(head + 1, len(lines)) if re.search(rf"bra(\.uni)?\s+{re.escape(label)};", lines[i]))
    return "\n".join(lines[head:back + 1])


def test_gemv_fold_stays_within_a_thread():
    """t06 sums FOLD neighbours along K only where one thread holds them (B K-major, rows 16-byte
    aligned, a tile with FOLD elements a thread): there its K loop has no shuffle and no shared
    memory. Elsewhere FOLD is 1, because across lanes Triton fuses the product into the
    butterfly's first add, lanes end a rounding apart and store to one shared slot: the WAW that
    racecheck reported on the sanitizer's 3×16×8 (docs/perf-notes.md, 46). Compiled for sm_90 here,
    without a GPU; forcing the fold back shows the shuffles the check looks for."""
    from tilegemm.kernels.tensorcore import _problem as P, t06_gemv as t06

    tile = dict(BN=4, BK=1024, FOLD=8, num_warps=4, num_stages=1)
    decode = _gemv_problem(2, 4096, 4096, torch.bfloat16)
    assert t06.fold(decode, tile) == 8
    loop = _gemv_loop(t06.compile_for_sm90(decode, tile).asm["ptx"])
    assert "shfl" not in loop and "st.shared" not in loop and "bar.sync" not in loop
    assert loop.count("ld.global.v4") >= 4  # B's 16-byte loads: BN×BK / 128 threads / 8 a load

    assert t06.fold(_gemv_problem(2, 4096, 4096, torch.float32), dict(tile, FOLD=4)) == 4
    assert t06.fold(_gemv_problem(2, 4096, 4096, torch.float32), tile) == 1  # 8 FP32 elements: 32 bytes
    # a batch of one whose batch stride is odd: the launch never uses it (bstride 0), nor does fold
    one = torch.empty(4096 * 4096 + 8, dtype=torch.bfloat16).as_strided((1, 4096, 4096), (4096 * 4096 + 3, 1, 4096))
    assert t06.fold(P.Problem(decode.a, one, decode.c, decode.precision), tile) == 8
    for p, why in ((_gemv_problem(2, 4096, 4096, torch.bfloat16, w_t=False), "row-major B"),
                   (_gemv_problem(2, 4096, 4096, torch.bfloat16, offset=3), "B 6 bytes off"),
                   (_gemv_problem(2, 64, 1000, torch.bfloat16), "rows of 1000 elements"),
                   (_gemv_problem(3, 16, 8, torch.float16), "a 4×16 tile for 128 threads")):
        assert t06.fold(p, dict(tile, BK=16) if p.k == 8 else tile) == 1, why

    tiny = _gemv_problem(3, 16, 8, torch.float16)
    small = dict(tile, BK=16)
    assert "shfl" not in _gemv_loop(t06.compile_for_sm90(tiny, small).asm["ptx"])
    forced = t06.fold
    try:
        t06.fold = lambda p, cfg: int(cfg["FOLD"])  # the rung as it was: FOLD whatever the layout
        loop = _gemv_loop(t06.compile_for_sm90(tiny, small).asm["ptx"])
    finally:
        t06.fold = forced
    assert "shfl.sync.bfly" in loop and "fma.rn.f32" in loop


def test_warp_specialized_partitions_in_the_ptx():
    """Compiled for sm_90 here, without a GPU: the producer warp runs on 24 registers and the
    consumers on 240 (setmaxnreg); wgmma is m64n256k16; with one consumer partition the two
    warpgroups meet at a 256-thread barrier before freeing a stage, with two they never do; the
    shared memory used is what smem_bytes budgets."""
    import re

    from tilegemm.kernels.tensorcore import t05_warp_specialized as t05
    from tilegemm.tuning import space as S

    for consumers in (1, 2):
        cfg = S.t05_cfg(128, 256, 64, 3, 1, consumers)
        k = t05.compile_for_sm90(cfg)
        ptx = k.asm["ptx"]
        regs = set(re.findall(r"setmaxnreg\.\w+\.sync\.aligned\.u32\s+(\d+)", ptx))
        assert {"24", "240"} <= regs, regs
        assert "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16" in ptx
        barriers = set(re.findall(r"bar\.sync\s+\d+, (\d+);", ptx))
        assert barriers == ({"256"} if consumers == 1 else {"128"}), barriers
        assert k.metadata.shared <= S.t05_smem_bytes(cfg, 2, 2) <= k.metadata.shared + 512


def test_warp_specialized_192_rows_three_consumers_in_the_ptx():
    """The 192×128 tile: three consumer partitions of one warpgroup, each m64n128k16 over its 64
    rows (no 256-thread barrier among them), registers moved to 160 a worker consumer and 24 the
    producer from 128 at launch (16 warps × 128 = the SM's 64 Ki); A's tile arrives as three
    64-row TMA boxes into a ring of STAGES·3 of them (the shared memory smem_bytes budgets); a
    swapped or other-than-64-rows-a-partition 192 tile is refused with the reason."""
    import re

    from tilegemm.kernels.tensorcore import _problem as C
    from tilegemm.kernels.tensorcore import t05_warp_specialized as t05
    from tilegemm.tuning import space as S

    cfg = S.t05_cfg(192, 128, 64, 4, 1, 3)
    assert t05.a_pieces(cfg) == 3 and t05.maxnreg(cfg) * 32 * (3 * t05._warps(cfg) + 4) == 65536
    k = t05.compile_for_sm90(cfg)
    ptx = k.asm["ptx"]
    assert {"24", "160"} <= set(re.findall(r"setmaxnreg\.\w+\.sync\.aligned\.u32\s+(\d+)", ptx))
    assert set(re.findall(r"wgmma\.mma_async\.sync\.aligned\.(m\d+n\d+k\d+)\.", ptx)) == {"m64n128k16"}
    assert set(re.findall(r"bar\.sync\s+\d+, (\d+);", ptx)) == {"128"}
    assert k.metadata.shared <= S.t05_smem_bytes(cfg, 2, 2) <= k.metadata.shared + 512
    def prob(dtype, precision):
        x = torch.empty(1000, 512, dtype=dtype)
        return C.Problem(x, torch.empty(512, 1000, dtype=dtype), torch.empty(1000, 1000, dtype=dtype), precision)

    bf16, tf32 = prob(torch.bfloat16, "bf16"), prob(torch.float32, "tf32")  # TF32 with a row-major B: swapped
    for p, bad in ((bf16, S.t05_cfg(192, 128, 64, 4, 1, 2)), (bf16, S.t05_cfg(192, 128, 64, 4, 1, 1)),
                   (tf32, S.t05_cfg(192, 128, 32, 4, 1, 3, swap=True))):
        with pytest.raises(ValueError, match="a tile of 192 rows"):
            t05._args(p, bad, num_sms=132)


def test_warp_specialized_wide_n_side_in_two_boxes_in_the_ptx(tmp_path):
    """A tile whose MMA N side is 192 (or 96) long, which no power-of-two box or Gluon buffer
    describes, arrives as two TMA boxes (128 + 64, 64 + 32) into two rings: B's columns, or in the
    swapped TF32 form A's rows. Each consumer issues one wgmma a box per k-step (m64n128 and
    m64n64 on the same A operand; swapped, the same registers) into two accumulators, stored in
    slices as long as the narrower box over SPLIT; the shared memory is what t05_smem_bytes
    budgets; no spills; and in the machine code each partition's k-loop keeps the step's two
    wgmma groups in flight (WARPGROUP.DEPBAR.LE gsb0, 0x2), draining them (0x0) once a tile.
    Other lengths are refused with the reason."""
    import re

    from tilegemm.bench.sass import _tool
    from tilegemm.kernels.tensorcore import _problem as C
    from tilegemm.kernels.tensorcore import t05_warp_specialized as t05
    from tilegemm.tuning import space as S

    bins = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
    ptxas = next((p for p in (bins / "ptxas-blackwell", bins / "ptxas") if p.exists()), None)
    assert ptxas, "Triton's wheel ships ptxas (triton/backends/nvidia/bin)"
    for cfg, dtype, out, shapes, box in (
            (S.t05_cfg(192, 192, 64, 4, 1, 3), torch.bfloat16, None, {"m64n128k16", "m64n64k16"}, [64, 64]),
            (S.t05_cfg(192, 96, 64, 5, 1, 3), torch.float16, torch.float32, {"m64n64k16", "m64n32k16"}, [64, 32]),
            (S.t05_cfg(192, 192, 128, 4, 1, 3), torch.float8_e4m3fn, None, {"m64n128k32", "m64n64k32"}, [64, 64]),
            (S.t05_cfg(192, 128, 32, 5, 2, 1, swap=True), torch.float32, None, {"m64n128k8", "m64n64k8"}, [32, 128])):
        n = cfg["BM" if cfg.get("SWAP") else "BN"]
        assert t05.n_boxes(cfg) == (n * 2 // 3, n // 3) and t05.epilogue_box(cfg) == box
        k = t05.compile_for_sm90(cfg, dtype, out_dtype=out, b_t=dtype == torch.float8_e4m3fn)
        ptx = k.asm["ptx"]
        assert set(re.findall(r"wgmma\.mma_async\.sync\.aligned\.(m\d+n\d+k\d+)\.", ptx)) == shapes, cfg
        size = 1 if dtype == torch.float8_e4m3fn else dtype.itemsize
        assert k.metadata.shared <= S.t05_smem_bytes(cfg, size, (out or (torch.bfloat16 if size == 1 else dtype)).itemsize) \
            <= k.metadata.shared + 512, cfg
        src = tmp_path / "k.ptx"
        src.write_text(ptx)
        log = subprocess.run([str(ptxas), "-arch=sm_90a", "-v", str(src), "-o", str(src.with_suffix(".cubin"))],
                             capture_output=True, text=True).stderr
        assert " 0 bytes spill stores" in log and "C7512" not in log, (cfg, log[-600:])
        nvdisasm = _tool("nvdisasm")
        assert nvdisasm, "Triton's wheel ships nvdisasm (triton/backends/nvidia/bin)"
        cubin = tmp_path / "k.cubin"
        cubin.write_bytes(k.asm["cubin"])
        sass = subprocess.run([nvdisasm, "-c", str(cubin)], capture_output=True, text=True, check=True).stdout
        waits = re.findall(r"WARPGROUP\.DEPBAR\.LE gsb0, (0x\d)", sass)
        partitions = 1 if cfg.get("SWAP") else cfg["CONSUMERS"]
        assert waits.count("0x2") >= partitions and waits.count("0x0") <= partitions and "0x1" not in waits, (cfg, waits)
    assert t05.n_boxes(S.t05_cfg(128, 256, 64, 3)) == (256, 0)
    x = torch.empty(1000, 512, dtype=torch.bfloat16)
    p = C.Problem(x, torch.empty(512, 1000, dtype=torch.bfloat16), torch.empty(1000, 1000, dtype=torch.bfloat16), "bf16")
    for bn in (160, 48):
        with pytest.raises(ValueError, match=f"a tile of {bn} columns"):
            t05._args(p, S.t05_cfg(128, bn, 64, 4, 1, 2), num_sms=132)
    f = torch.empty(1000, 512)
    tf32 = C.Problem(f, torch.empty(512, 1000), torch.empty(1000, 1000), "tf32")  # B row-major: swapped
    with pytest.raises(ValueError, match="C's 192 columns are the MMA's rows"):
        t05._args(tf32, S.t05_cfg(256, 192, 32, 4, 1, 1, swap=True), num_sms=132)


def test_t05_tiles_handed_to_t03_and_t02_are_powers_of_two():
    """Where t05 cannot run a call (a batch, alpha or beta, rows to realign), its entry's tile runs
    on t03 or t02, whose Triton blocks are powers of two: the 192-row tile goes as 128 rows. Every
    t05 entry of every shipped database maps to such a tile, and t03 takes it."""
    from tilegemm.kernels.tensorcore import _problem as C
    from tilegemm.tuning import space as S

    x = torch.empty(3072, 3072, dtype=torch.bfloat16, device="meta")
    p = C.Problem(x, x, x, "bf16")
    cfgs = [S.t05_cfg(*t[:3], t[3], t[4], t[5]) for t in S.T05_STAGE_CONFIGS]
    for path in sorted((Path(S.__file__).parents[1] / "data" / "tuning").glob("*.json")):
        cfgs += [e["config"] for e in json.loads(path.read_text())["entries"].values() if e["rung"] == S.T05]
    assert any(c["BM"] == 192 for c in cfgs)
    for c in cfgs:
        for mapped in (S.as_t02(S.T05, c), S.as_t03(S.T05, c)):
            assert all(mapped[k] & (mapped[k] - 1) == 0 for k in ("BM", "BN", "BK")), (c, mapped)
    assert S.as_t03(S.T05, S.t05_cfg(192, 128, 64, 4, 1, 3))["BM"] == 128
    assert S._t03_adapt(p, S.as_t03(S.T05, S.t05_cfg(192, 128, 64, 4, 1, 3))) is not None


def test_warp_specialized_worth_tuning_counts_192_row_tiles():
    """t05 is timed from three quarters of a wave of 128×256 tiles or two thirds of 192×128 ones:
    1536² (96 of the latter for 132 SMs) is, 1024² (48) is not."""
    from unittest import mock

    from tilegemm.kernels.tensorcore import _problem as C
    from tilegemm.tuning import space as S

    def prob(n):
        x = torch.empty(n, n, dtype=torch.bfloat16, device="meta")
        return C.Problem(x, x, x, "bf16")

    with mock.patch.object(C, "num_sms", return_value=132):
        assert [S.t05_worth_tuning(prob(n)) for n in (1024, 1280, 1536, 2048)] == [False, False, True, True]


@pytest.mark.gpu
def test_gpu_192_row_entries_on_calls_t05_cannot_run():
    """The 1536 and 3072 buckets hold t05's 192-row tile. A call t05 cannot run (a batch, alpha,
    beta) takes the bucket's tile on t03 or t02 as 128 rows: each result right, and no rung
    failing on the way (a 192-row Triton block would not compile: the call raised, or warned and
    ran t02's default tile)."""
    import warnings

    for batch, n in ((2, 1531), (2, 3001)):
        a, b = (torch.randn(batch, n, n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = tilegemm.matmul(a, b)
        ref = torch.matmul(a.double(), b.double())
        assert ((got.double() - ref).abs().max() / ref.abs().max()).item() < 1e-2
    a, b, c = (torch.randn(3072, 3072, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    for kw in (dict(alpha=2.0), dict(beta=0.5, c=c)):
        p_ref = kw.get("alpha", 1.0) * (a.double() @ b.double()) + kw.get("beta", 0.0) * c.double()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = tilegemm.gemm(a, b, **kw)
        assert ((got.double() - p_ref).abs().max() / p_ref.abs().max()).item() < 1e-2, kw


@pytest.mark.gpu
def test_gpu_tf32_192_row_entry_on_other_forms(monkeypatch, tmp_path):
    """TF32's 3072 bucket holds t05's swapped tile with 192 of C's rows (the shipped H200
    database). Calls around it run right, with no rung failing on the way: the entry itself, with
    alpha (t05 refuses alpha: its tile on t03), on a batch (its tile on t02), and the calls whose
    class has other entries (B column-major, a BF16 C, beta); 2304³ borrows it (its waves fit),
    2560³ does not (3 waves of 192×128 where 256×128 makes 2: `space.t05_fits_waves`), and
    5000×3000×2000 has its own 256-row entry."""
    import warnings

    from tilegemm import tuning
    from tilegemm.kernels.tensorcore import _problem as C
    from tilegemm.tuning import cache
    from tilegemm.tuning import space as S

    monkeypatch.setenv("TILEGEMM_CACHE_DIR", str(tmp_path))  # the shipped database, not a local tuning
    cache.reset()
    h200 = cache.databases()[cache.slug("NVIDIA H200")]  # (on any GPU: an H100 has its own, whose buckets
    monkeypatch.setattr(cache, "database_for", lambda *gpu: (h200, "the shipped database for NVIDIA H200"))  # differ;
    # both have sm_90 and 132 SMs, whose waves the choices below weigh)

    def close(got, want):
        return ((got.double() - want).abs().max() / want.abs().max()).item() < 1e-2

    def quiet(fn):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            return fn()

    def chosen(m, n, k):
        x, y, z = torch.empty(m, k, device="cuda"), torch.empty(k, n, device="cuda"), torch.empty(m, n, device="cuda")
        return tuning.choose(C.Problem(x, y, z, "tf32"))

    try:
        assert chosen(3072, 3072, 3072).rung == S.T05
        assert [chosen(*s).config["BM"] for s in ((3072,) * 3, (2304,) * 3, (2560,) * 3, (5000, 3000, 2000))] == \
            [192, 192, 256, 256]
        a, b = (torch.randn(3072, 3072, device="cuda") for _ in range(2))
        ref = a.double() @ b.double()
        assert close(quiet(lambda: tilegemm.gemm(a, b, precision="tf32")), ref)
        assert close(quiet(lambda: tilegemm.gemm(a, b.t().contiguous().t(), precision="tf32")), ref)
        assert close(quiet(lambda: tilegemm.gemm(a, b, precision="tf32", out_dtype=torch.bfloat16)), ref)
        c = torch.randn(3072, 3072, device="cuda")
        for kw in (dict(alpha=2.0), dict(beta=0.5, c=c.clone())):
            want = kw.get("alpha", 1.0) * ref + kw.get("beta", 0.0) * c.double()
            assert close(quiet(lambda: tilegemm.gemm(a, b, precision="tf32", **kw)), want), kw
        a3, b3 = (torch.randn(2, 3001, 3001, device="cuda") for _ in range(2))
        assert close(quiet(lambda: tilegemm.gemm(a3, b3, precision="tf32")), a3.double() @ b3.double())
        for m, n, k in ((2560, 2560, 2560), (2304, 2304, 2304), (5000, 3000, 2000)):
            x, y = torch.randn(m, k, device="cuda"), torch.randn(k, n, device="cuda")
            assert close(quiet(lambda: tilegemm.gemm(x, y, precision="tf32")), x.double() @ y.double()), (m, n, k)
    finally:
        cache.reset()


@pytest.mark.gpu
@pytest.mark.parametrize("lb", ["n", "t"])
@pytest.mark.parametrize("precision", ["fp16", "bf16", "tf32", "fp8", "fp8-promoted"])
def test_gpu_warp_specialized_every_config(precision, lb):
    """Each t05 candidate, forced, on edge tiles and a partial last k-step (300×520×200), an even
    number of k-steps (300×520×256), one partial k-step (130×264×24), and more tiles than SMs
    (2100×2056×520: programs take a second tile, the ring's phases run on across tiles), with a
    16-bit and an FP32 C; FP8 with scales (B column-major only), and without fast accumulation,
    whose candidates include OVERLAP forms (two k-steps a trip, an odd count's last apart), TF32
    plain (B column-major) and swapped (B row-major; the swapped loop takes k-steps in pairs), and
    the swapped form forced onto two partitions (correct, not a candidate)."""
    promoted = precision == "fp8-promoted"
    precision = "fp8" if promoted else precision
    from tilegemm import dispatch
    from tilegemm.kernels.tensorcore import _problem as C
    from tilegemm.kernels.tensorcore import t05_warp_specialized as t05
    from tilegemm.tuning import space as S

    # k-steps: 7 (TF32; FP8 2, 16-bit 4), 8 (even), 1 (partial), 17 over two tiles a program
    for m, n, k in ((300, 520, 200), (300, 520, 256), (130, 264, 24), (2100, 2056, 520)):
        if precision == "fp8":  # TMA needs 16-byte rows: K a multiple of 16 one-byte elements
            k += -k % 16
        a, b = _gpu_operands(m, n, k, precision, "n", lb)
        sa = sb = None
        if precision == "fp8":
            sa, sb = torch.tensor([0.5], device="cuda"), torch.tensor([2.0], device="cuda")
        a64, b64 = (a.double() * 0.5, b.double() * 2.0) if sa is not None else (a.double(), b.double())
        ref = a64 @ b64
        outs = {"fp8": (torch.bfloat16, torch.float32), "tf32": (torch.float16, torch.bfloat16, torch.float32)}
        for out in outs.get(precision, (a.dtype, torch.float32)):
            c = torch.empty(m, n, dtype=out, device="cuda")
            p = C.Problem(a, b, c, precision, scale_a=sa, scale_b=sb, fast_accum=not promoted)
            assert promoted == any(cfg.get("OVERLAP") for cfg in S.candidates(S.T05, p))
            if precision == "fp8" and lb == "n":
                assert "column-major" in t05.usable(p)
                used = dispatch.run_problem(p, S.T05)
                assert used["kernel"] == S.T03 and "cannot run" in used["source"]  # t03 runs it, and says why
                continue
            assert t05.usable(p) == ""
            forced = [S.t05_cfg(256, 128, 32, 4, 4, 2, swap=True)] if C.swapped_tf32(p) else []  # correct, not tuned
            for cfg in S.candidates(S.T05, p) + forced:
                c.fill_(float("nan"))
                used = dispatch.run_problem(p, S.T05, config=cfg)
                assert used["kernel"] == t05.NAME
                chk = validate.check(c.double().cpu().numpy(), a64.cpu().numpy(), b64.cpu().numpy(),
                                     dtype=TOL[precision], ref=ref.cpu().numpy(),
                                     out_dtype=None if out == torch.float32 else str(out).split(".")[1], kernel=str(cfg))
                assert chk.ok, str(chk)
