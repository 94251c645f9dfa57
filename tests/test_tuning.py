"""Where configurations come from: the user's cache (safe with concurrent writers and a corrupt
file), the shipped database (exact bucket, nearest bucket, a sibling dtype, an unknown GPU), the
rules that fit a configuration to another shape, and no tuning on a call unless asked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from tilegemm import shipped  # noqa: E402
from tilegemm.kernels.tensorcore import _problem as P, t03_tma_persistent  # noqa: E402
from tilegemm.tuning import cache, space  # noqa: E402

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEGEMM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TILEGEMM_AUTOTUNE", raising=False)
    cache.reset()
    yield
    cache.reset()


def _problem(m, n, k, dt=torch.bfloat16, b_t=False, out=None):
    a = torch.empty(m, k, dtype=dt)
    b = torch.empty(n, k, dtype=dt).t() if b_t else torch.empty(k, n, dtype=dt)
    c = torch.empty(m, n, dtype=out or (torch.bfloat16 if dt in P.FP8_DTYPES else dt))
    return P.Problem(a, b, c, "tf32" if dt == torch.float32 else P.precision_of(dt))


def test_cache_roundtrip_and_a_corrupt_file():
    cache.store_entry("k", {"config": {"BM": 64}})
    cache.reset()
    assert cache.cached_entry("k")["config"]["BM"] == 64
    with open(cache.cache_path(), "w") as f:
        f.write("{not json")
    cache.reset()
    with pytest.warns(RuntimeWarning, match="ignoring the tuning cache"):
        assert cache.cached_entry("k") is None
    cache.store_entry("k2", {"config": {"BM": 32}})  # the next write replaces the corrupt file
    assert json.load(open(cache.cache_path()))["k2"]["config"]["BM"] == 32


def test_two_processes_writing_at_once_lose_nothing(tmp_path):
    code = textwrap.dedent("""
        import sys
        from tilegemm.tuning import cache
        who = sys.argv[1]
        for i in range(40):
            cache.store_entry(f"{who}-{i}", {"i": i})
    """)
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""),
               TILEGEMM_CACHE_DIR=str(tmp_path / "shared"))
    procs = [subprocess.Popen([sys.executable, "-c", code, who], env=env) for who in ("a", "b")]
    assert all(p.wait(timeout=120) == 0 for p in procs)
    data = json.load(open(tmp_path / "shared" / "tuning.json"))
    assert {f"{w}-{i}" for w in "ab" for i in range(40)} <= set(data)


def test_nearest_bucket_prefers_the_same_regime():
    entries = {"c|1x4096x4096": 1, "c|1024x4096x4096": 2, "c|16x4096x4096": 3, "d|1x4096x4096": 4}
    got = [b for b, _ in cache.nearest(entries, "c", "2x4096x4096")]
    assert got == ["1x4096x4096", "16x4096x4096", "1024x4096x4096"]
    # M = 128 is still decode; 256 is not: a decode entry stays behind a same-regime one further away
    assert cache.distance("128x4096x4096", "1x4096x4096") < cache.distance("256x4096x4096", "1x4096x4096")
    assert cache.distance("4096x4096x4096", "4096x4096x4096") == 0


def test_database_for_this_gpu_or_the_one_most_like_it(monkeypatch):
    dbs = {"nvidia-h200": dict(gpu="NVIDIA H200", capability=[9, 0], sms=132, entries={}),
           "nvidia-h100-80gb-hbm3": dict(gpu="NVIDIA H100 80GB HBM3", capability=[9, 0], sms=132, entries={}),
           "nvidia-a100": dict(gpu="NVIDIA A100", capability=[8, 0], sms=108, entries={})}
    monkeypatch.setattr(shipped, "_DBS", dbs)
    db, why = shipped.database_for("NVIDIA H200", (9, 0), 132)
    assert db is dbs["nvidia-h200"] and "for NVIDIA H200" in why
    db, why = shipped.database_for("NVIDIA H100 PCIe", (9, 0), 114)  # unknown: same sm_90, nearest SMs, then name
    assert db is dbs["nvidia-h100-80gb-hbm3"] and "not in the database" in why
    db, why = shipped.database_for("NVIDIA B200", (10, 0), 148)
    assert db is None and "no shipped database" in why
    assert shipped.slug("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3"


def test_the_shipped_databases_are_well_formed():
    """Every shipped database names its GPU and holds rungs and configurations the rungs accept; an
    entry's shape (where its time was measured) falls in its bucket, unless the entry says why not
    (`kept`: a pick kept from another bucket, docs/perf-notes.md 113)."""
    from tilegemm.kernels import tensorcore as tc

    shipped.forget()
    for name, db in shipped.databases().items():
        assert shipped.slug(db["gpu"]) == name and len(db["capability"]) == 2 and db["sms"] > 0
        for key, e in db["entries"].items():
            assert e["rung"] in tc.RUNGS and isinstance(e["config"], dict), key
            assert len(key.split("|")) == 6 and e["shape"] and e["ms"] > 0, key
            bucket = "x".join(str(space.grid_up(x)) for x in e["shape"][:3])
            assert key.rsplit("|", 1)[1].split("b")[0] == bucket or e.get("kept"), (key, e["shape"])


def test_adapt_fits_a_configuration_to_another_shape():
    big = _problem(4096, 4096, 4096)
    c = dict(space.cfg(128, 256, 64, 8, 3), C_TMA=True, FLAT=True)
    odd = _problem(4095, 4097, 1023)  # C's rows are not 16-byte aligned: no TMA store
    got = space.adapt(space.T03, odd, c)
    assert got["BM"] == 128 and got["C_TMA"] is False and got["FLAT"]
    assert space.adapt(space.T03, big, c)["C_TMA"] is True
    tf32 = _problem(4096, 4096, 4096, torch.float32)  # a row-major TF32 B: only the swapped (or copied) form
    got = space.adapt(space.T03, tf32, space.cfg(128, 128, 32, 8, 3))
    assert got.get("SWAP") or got.get("KMAJOR")
    sk = dict(space.cfg(16, 64, 128, 4, 4), SPLIT=16, FUSED=True)
    assert space.adapt(space.T04, _problem(16, 4096, 4096), sk)["SPLIT"] == 16
    assert space.adapt(space.T04, _problem(16, 4096, 512), sk) is None  # 4 k-steps cannot take 16 slices
    t05 = space.t05_cfg(128, 256, 64, 3)
    assert space.adapt(space.T05, big, t05) == t05
    assert space.adapt(space.T05, tf32, t05) is None  # TF32 with a row-major B runs swapped on t05
    assert space.adapt(space.T03, big, {"not": "a config"}) is None


def test_candidates_rank_by_what_back_to_back_calls_cost():
    """A host-bound product's candidates rank by their launches (each costs the host the floor),
    a device-bound one's by device time; ties of the first kind go to the lower device time."""
    from tilegemm.tuning import tuner

    two, one, other = {"SPLIT": 4}, {"SPLIT": 4, "FUSED": True}, {"BM": 64}
    counts = {id(two): 2, id(one): 1, id(other): 1}
    floor = 0.013
    assert tuner._ranked([(0.0054, two), (0.008, one)], counts, floor)[0][1] is one  # 26 µs against 13
    assert tuner._ranked([(0.100, two), (0.110, one)], counts, floor)[0][1] is two  # device-bound: 100 against 110
    assert tuner._ranked([(0.008, other), (0.006, one)], counts, floor)[0][1] is one  # both 13 µs: device time
    assert tuner.eager_score(0.0054, 2, floor) == 2 * floor and tuner.eager_score(0.1, 2, floor) == 0.1
    picked = tuner._fastest([("tc_splitk", dict(config=two, ms=0.0054, score_ms=0.026)),
                             ("tc_tma_persistent", dict(config=other, ms=0.008, score_ms=0.013))])
    assert picked[0] == "tc_tma_persistent"
    # an entry tuned before scores were kept ranks by its median
    assert tuner._fastest([("tc_splitk", dict(config=two, ms=0.0054)),
                           ("tc_tma_persistent", dict(config=other, ms=0.008, score_ms=0.013))])[0] == "tc_splitk"


def test_a_decision_says_where_its_rungs_were_timed(monkeypatch):
    """A shape whose bucket's rungs were tuned at another of its shapes (the user's cache) gets
    that tuning; its record (a database entry under `tune --ship`) names the shape it was timed
    at and its time there, not the shape that asked: the rule for unaligned rows reads that shape."""
    from tilegemm.tuning import tuner

    stored = {}
    first = dict(config={"BM": 128, "BN": 128}, ms=0.0635, m=2304, n=2304, k=3840)
    monkeypatch.setattr(tuner, "_tuned", lambda rungs, p: ([(rungs[0], first)], {}))
    monkeypatch.setattr(cache, "store_entry", lambda key, v: stored.update({key: v}))
    d = tuner.tune(_problem(2304, 2560, 4096))
    assert d.ms == 0.0635 and d.shape == (2304, 2304, 3840)
    assert [v["shape"] for v in stored.values()] == [[2304, 2304, 3840]]
    stored.clear()
    d = tuner.tune(_problem(2304, 2304, 3840))  # tuned at the shape that asks: no other shape named
    assert d.shape is None and [v["shape"] for v in stored.values()] == [[2304, 2304, 3840]]


def test_no_call_tunes_unless_asked(monkeypatch):
    """Without TILEGEMM_AUTOTUNE=1 a problem gets a configuration at once (here: the heuristic, on
    CPU tensors) and the tuner is never entered."""
    from tilegemm import tuning
    from tilegemm.tuning import tuner

    def boom(*a, **k):
        raise AssertionError("tuned on a call")

    monkeypatch.setattr(tuner, "tune", boom)
    monkeypatch.setattr(tuner, "tune_rung", boom)
    for shape in ((1, 4096, 4096), (64, 4096, 4096), (4096, 4096, 4096)):
        d = tuning.choose(_problem(*shape))
        assert d.rung in tuning.usable_rungs(_problem(*shape)) and "heuristic" in d.source, d
    assert tuning.choose(_problem(16, 4096, 4096)).rung == space.T04  # split-K for decode
    d = tuning.choose(_problem(100, 100, 100), "tc_splitk")
    assert d.rung == space.T04 and "default" in d.source


def test_the_decision_memo_is_bounded(monkeypatch):
    """choose keeps a decision per class, bucket and K (and per M and N where waves weigh): a
    process that multiplies many shapes (a decode loop's attention, whose K grows by one a step)
    kept one per shape, without bound. Past MEMO_MAX the memo is emptied, as the plans are."""
    from tilegemm import tuning

    monkeypatch.setattr(tuning, "MEMO_MAX", 64, raising=False)
    tuning._MEMO.clear()
    for k in range(256, 456):
        d = tuning.choose(_problem(64, 64, k))
        assert d.rung in tuning.usable_rungs(_problem(64, 64, k))
    assert len(tuning._MEMO) <= 64 + 1
    tuning._MEMO.clear()


def test_gemv_form_is_offered_for_decode_never_assumed():
    """t06 (the GEMV form) can run M ≤ 4 and is among the rungs the tuner times there, but nothing
    untuned picks it; asked for by name past M = 4, t04 runs, saying why. Its candidates start
    from the tile measured best across the decode shapes, keep K steps no wider than K and FOLD
    no wider than a 16-byte load (4 FP32 elements); a row-major B adds 32-column tiles. Carried
    to more rows (an entry tuned at M = 1, used at M = 4), a tile's K step halves until the rows'
    accumulators fit 128 FP32 registers a thread."""
    from tilegemm import tuning

    p1, p5 = _problem(1, 4096, 4096, b_t=True), _problem(5, 4096, 4096)
    assert tuning.usable(space.T06, p1) and not tuning.usable(space.T06, p5)
    assert space.T06 in tuning.usable_rungs(p1) and space.T06 not in tuning.usable_rungs(p5)
    assert tuning.heuristic(p1).rung != space.T06
    cands = space.candidates(space.T06, p1)
    assert cands[0] == dict(BN=4, BK=1024, FOLD=8, num_warps=4, num_stages=1)
    assert len({str(c) for c in cands}) == len(cands) >= 6 and {c["FOLD"] for c in cands} == {1, 8}
    assert {c["BK"] for c in space.candidates(space.T06, _problem(1, 64, 50))} == {64}
    assert space.adapt(space.T06, _problem(2, 64, 50), cands[0]) == dict(BN=4, BK=64, FOLD=8, num_warps=4,
                                                                        num_stages=1)
    assert {c["FOLD"] for c in space.candidates(space.T06, _problem(1, 64, 4096, dt=torch.float32))} == {1, 4}
    # a row-major B adds tiles 32 columns wide (a 128-byte line of FP32 a row), a K-major one not
    rows_b = space.candidates(space.T06, _problem(1, 96, 4096, dt=torch.float32))
    assert {(32, 128), (32, 256)} <= {(c["BN"], c["BK"]) for c in rows_b}
    assert len({str(c) for c in rows_b}) == len(rows_b) and all(c["BN"] <= 16 for c in cands)
    wide, narrow = dict(BN=32, BK=256, FOLD=1, num_warps=4, num_stages=1), dict(BN=8, BK=1024, FOLD=4, num_warps=4)
    assert [space.adapt(space.T06, _problem(m, 96, 4096, dt=torch.float32), wide)["BK"] for m in (1, 2, 3, 4)] == \
        [256, 256, 128, 128]  # 64, 128, 96, 128 accumulators a thread (3 rows: 192 at 256)
    assert space.adapt(space.T06, _problem(4, 96, 4096, dt=torch.float32), narrow)["BK"] == 512
    # K-major, FOLD sums within a thread: four rows keep the tile tuned at one
    assert space.adapt(space.T06, _problem(4, 96, 4096, dt=torch.float32, b_t=True), narrow)["BK"] == 1024
    assert [c["BK"] for c in space.candidates(space.T06, _problem(4, 4096, 4096, b_t=True))] == [c["BK"] for c in cands]
    d = tuning.choose(p5, "tc_gemv")
    assert d.rung == space.T04 and "M ≤ 4 only" in d.source, d


def _tile(c):
    """A candidate's tile: (BM, BN, BK, warps, stages)."""
    return c["BM"], c["BN"], c["BK"], c["num_warps"], c["num_stages"]


def _tiles(p, rung=space.T03):
    return {_tile(c) for c in space.candidates(rung, p)}


def test_decode_tiles_with_32_kb_stages_are_candidates_at_m_up_to_16():
    """16-bit decode (M ≤ 16) times two tiles whose stages of B are 32 KB (16×128×128 and
    16×64×256, 4 stages: docs/perf-notes.md, 86): on t03 swapped and plain, with C stored by TMA
    in shared memory beside them (not where C is batched), and on t02. The default stays the
    seed; a tile over twice N is not offered; nor are they past M = 16 or for FP32 operands."""
    new = {(16, 128, 128, 4, 4), (16, 64, 256, 4, 4)}
    for p in (_problem(16, 14336, 4096, b_t=True), _problem(8, 4096, 4096, dt=torch.float16), _problem(1, 64, 4096)):
        got = [c for c in space.candidates(space.T03, p) if _tile(c) in new]
        assert {(c["BN"], bool(c.get("SWAP"))) for c in got} == {(128, True), (128, False), (64, True), (64, False)}
        assert all(c["C_TMA"] and space.smem_bytes(c, 2, 2, True) <= space.SMEM_BUDGET for c in got)
        assert _tiles(p, space.T02) >= new
    assert space.default(space.T03, _problem(16, 14336, 4096))["BN"] == 32  # the seed, 16×32×256, still first
    assert not _tiles(_problem(16, 16, 4096)) & new and _tiles(_problem(16, 32, 4096)) & new == {(16, 64, 256, 4, 4)}
    batched = P.Problem(torch.empty(4, 16, 4096, dtype=torch.bfloat16),
                        torch.empty(4, 4096, 4096, dtype=torch.bfloat16),
                        torch.empty(4, 16, 4096, dtype=torch.bfloat16), "bf16")
    assert _tiles(batched) >= new and not any(c["C_TMA"] for c in space.candidates(space.T03, batched))
    assert not _tiles(_problem(32, 4096, 4096, b_t=True)) & new
    assert not _tiles(_problem(16, 4096, 4096, dt=torch.float32, b_t=True)) & new


def test_batch_decode_tiles_are_candidates_past_m_16_up_to_64():
    """16-bit decode of a batch (16 < M ≤ 64) times the tiles with 32 KB stages of B found at
    M = 64 (docs/perf-notes.md, 87): on t03 plain, the 32-row one swapped too (wgmma's N), C
    stored by TMA beside them; on t02; and past M = 32 a two-slice split-K first among t04's.
    Not at M ≤ 16 or past 64, nor for FP32 operands (FP8 keeps a list of its own)."""
    new = {(32, 64, 256, 4, 4), (64, 128, 128, 4, 4), (64, 128, 128, 4, 3), (64, 32, 256, 4, 4), (64, 256, 64, 8, 4),
           (64, 128, 64, 4, 6)}
    for p in (_problem(64, 28672, 8192, b_t=True), _problem(32, 4096, 4096, dt=torch.float16),
              _problem(48, 14336, 4096, b_t=True)):
        got = [c for c in space.candidates(space.T03, p) if _tile(c) in new]
        assert {_tile(c) for c in got if not c.get("SWAP")} == new
        assert {_tile(c) for c in got if c.get("SWAP")} == {(32, 64, 256, 4, 4)}
        assert all(c["C_TMA"] and space.smem_bytes(c, 2, 2, True) <= space.SMEM_BUDGET for c in got)
        assert _tiles(p, space.T02) >= new
        first = space.candidates(space.T04, p)[0]  # a 64-row tile is past t04's cap at M = 32
        assert (_tile(first) == (64, 128, 128, 4, 4) and first["SPLIT"] == 2) == (p.m > 32), first
    for p in (_problem(16, 14336, 4096, b_t=True), _problem(128, 14336, 4096, b_t=True),
              _problem(64, 14336, 4096, dt=torch.float32, b_t=True)):
        assert not _tiles(p) & new, p
    for p in (_problem(16, 14336, 4096, b_t=True), _problem(128, 14336, 4096, b_t=True),
              _problem(64, 14336, 4096, dt=torch.float32, b_t=True),
              _problem(64, 14336, 4096, dt=torch.float8_e4m3fn, b_t=True)):
        bk = int(128 * space._t04_scale(p.a.element_size()))  # the seed's depth at this width
        first = space.candidates(space.T04, p)[0]
        assert (_tile(first), first["SPLIT"]) != ((64, 128, bk, 4, 4), 2), p


def test_fp8_decode_tiles_with_32_and_64_kb_stages_are_candidates_at_m_up_to_16():
    """FP8 decode (M ≤ 16, B K-major) times three tiles whose stages of B are 32 or 64 KB
    (16×256×256 with 3 stages, 16×128×256 with 4, 16×128×512 with 3: docs/perf-notes.md, 89): on
    t03 swapped and plain with C stored by TMA in shared memory beside them, and on t02. Not past
    M = 16, and not for 16-bit operands (whose lists at the same M have their own tiles)."""
    new = {(16, 256, 256, 4, 3), (16, 128, 256, 4, 4), (16, 128, 512, 4, 3)}
    for m in (1, 16):
        p = _problem(m, 28672, 8192, dt=torch.float8_e4m3fn, b_t=True)
        got = [c for c in space.candidates(space.T03, p) if _tile(c) in new]
        assert {(_tile(c), bool(c.get("SWAP"))) for c in got} == {(t, s) for t in new for s in (True, False)}
        assert all(c["C_TMA"] and space.smem_bytes(c, 1, 2, True) <= space.SMEM_BUDGET for c in got)
        assert _tiles(p, space.T02) >= new
    assert not _tiles(_problem(32, 28672, 8192, dt=torch.float8_e4m3fn, b_t=True)) & new
    assert not _tiles(_problem(16, 28672, 8192, b_t=True)) & new


def test_a_five_stage_128_row_tile_is_a_candidate_past_m_64_up_to_256():
    """16-bit products at 64 < M ≤ 256 time 128×128×64 with 5 stages (the 8B's gate/up at M = 128:
    docs/perf-notes.md, 90), on t03 with C stored by TMA beside it, and on t02; not at M ≤ 64,
    past 256, or for FP8 and FP32 operands."""
    tile = (128, 128, 64, 4, 5)
    for p in (_problem(128, 14336, 4096, b_t=True), _problem(100, 4096, 4096, dt=torch.float16),
              _problem(256, 4096, 14336, b_t=True)):
        got = [c for c in space.candidates(space.T03, p) if _tile(c) == tile]
        assert got and all(c["C_TMA"] and space.smem_bytes(c, 2, 2, True) <= space.SMEM_BUDGET for c in got), p
        assert tile in _tiles(p, space.T02)
    for p in (_problem(64, 14336, 4096, b_t=True), _problem(512, 14336, 4096, b_t=True),
              _problem(128, 14336, 4096, dt=torch.float8_e4m3fn, b_t=True),
              _problem(128, 14336, 4096, dt=torch.float32, b_t=True)):
        assert tile not in _tiles(p) | _tiles(p, space.T02), p


def test_a_fallback_is_remembered_for_the_bucket():
    """What ran after the chosen rung failed is what the bucket's next calls get in this process
    (remember wrote a key choose never read, so each new shape retried the failing rung)."""
    from tilegemm import tuning

    p = _problem(16, 4096, 4096)
    try:
        assert tuning.choose(p).rung == space.T04
        tuning.remember(p, "auto", tuning.Decision(space.T02, space.default(space.T02, p), "fallback from t04"))
        d = tuning.choose(_problem(16, 4000, 4096))  # the same bucket
        assert d.rung == space.T02 and d.source == "fallback from t04", d
    finally:
        tuning._MEMO.clear()


def test_fp16_takes_bf16_entries_where_it_has_none():
    assert cache.sibling_class("fp16|float16|float16|nn|nobeta") == "bf16|bfloat16|bfloat16|nn|nobeta"
    assert cache.sibling_class("fp8|float8_e4m3fn|bfloat16|nt|nobeta") is None


def _fp8(m, n, k, fast_accum=True):
    a = torch.empty(m, k, dtype=torch.float8_e4m3fn)
    b = torch.empty(n, k, dtype=torch.float8_e4m3fn).t()
    one = torch.ones(1)
    return P.Problem(a, b, torch.empty(m, n, dtype=torch.bfloat16), "fp8", scale_a=one, scale_b=one,
                     fast_accum=fast_accum)


def test_promoted_fp8_is_a_class_of_its_own_and_takes_the_fast_class_only_where_it_has_nothing():
    """gemm(..., fast_accum=False) waits at each promotion for the MMAs in flight: the fast class's
    128×256 tile ran it 2.2× slower than its own tuning's 192×128 at 8192³ on the H100. Its class
    (keys, database entries, `tune --dtypes fp8-promoted`) is its own; a database with none of its
    entries gives it the fast class's, and says so."""
    from tilegemm import tuning
    from tilegemm.tuning import command

    fast, promoted = _fp8(8192, 8192, 8192), _fp8(8192, 8192, 8192, fast_accum=False)
    assert cache.problem_class(fast) == "fp8|float8_e4m3fn|bfloat16|nt|nobeta"
    assert cache.problem_class(promoted) == "fp8-promoted|float8_e4m3fn|bfloat16|nt|nobeta"
    assert cache.fast_class(cache.problem_class(promoted)) == cache.problem_class(fast)
    assert cache.fast_class(cache.problem_class(fast)) is None
    assert cache.tune_key(space.T03, promoted) != cache.tune_key(space.T03, fast)
    assert cache.decision_key(promoted, "H") != cache.decision_key(fast, "H")
    wide = dict(space.cfg(128, 256, 128, 8, 3), C_TMA=True)
    tall = dict(space.cfg(256, 128, 128, 8, 3), C_TMA=True)
    cls_f, cls_p = cache.problem_class(fast), cache.problem_class(promoted)
    db = {"entries": {f"{cls_f}|8192x8192x8192": dict(rung=space.T03, config=wide, ms=0.7, shape=[8192] * 3)}}
    d = tuning.pick(db, "db", promoted)  # none of its own: the fast class's, said
    assert (d.config["BM"], d.config["BN"]) == (128, 256)
    assert "of FP8 with fast accumulation (no promoted entry fits)" in d.source, d.source
    db["entries"][f"{cls_p}|4096x4096x4096"] = dict(rung=space.T03, config=tall, ms=0.13, shape=[4096] * 3)
    d = tuning.pick(db, "db", promoted)  # its own class's nearest bucket beats the fast class's exact one
    assert (d.config["BM"], d.config["BN"]) == (256, 128) and "nearest tuned bucket 4096x4096x4096" in d.source
    assert "fast accumulation" not in d.source
    d = tuning.pick(db, "db", fast)  # and the fast class never takes a promoted entry
    assert (d.config["BM"], d.config["BN"]) == (128, 256) and d.source == "db, exact bucket"
    assert tuning.pick({"entries": {f"{cls_p}|4096x4096x4096": db["entries"][f"{cls_p}|4096x4096x4096"]}},
                       "db", fast) is None
    assert tuning._memo_key(promoted, "auto") != tuning._memo_key(fast, "auto")
    # a promoted rung tuning in a cache goes into a derived database under its own class
    v, gpu = cache.TUNER_VERSION, "NVIDIA H100 80GB HBM3"
    cached = {f"{space.T03}|{gpu}|{cls_p}|8192x8192x8192||{v}": dict(config=tall, ms=0.85, launches=1, score_ms=0.85,
                                                                    floor_ms=0.0115, m=8192, n=8192, k=8192)}
    assert command.derive(cached, gpu)[f"{cls_p}|8192x8192x8192"]["config"] == tall
    assert "fp8-promoted" in command.DTYPES


def test_a_gpu_without_promoted_entries_borrows_those_of_the_gpu_most_like_it(monkeypatch):
    """FP8 without fast accumulation on a GPU whose database has none of its entries (the H200's,
    tuned before the class): the promoted entries of the same-capability GPU with the nearest SM
    count come before FP8's own, which ran it up to 2.2x slower on the H100; the source says whose.
    Other problems, and a GPU with promoted entries of its own, read its database alone."""
    from tilegemm import tuning

    wide = dict(space.cfg(128, 256, 128, 8, 3), C_TMA=True)
    tall = dict(space.cfg(256, 128, 128, 8, 3), C_TMA=True)
    fast, promoted = _fp8(8192, 8192, 8192), _fp8(8192, 8192, 8192, fast_accum=False)
    cls_f, cls_p = cache.problem_class(fast), cache.problem_class(promoted)
    entry = lambda c: dict(rung=space.T03, config=c, ms=1.0, shape=[8192] * 3)  # noqa: E731
    dbs = {"nvidia-h200": dict(gpu="NVIDIA H200", capability=[9, 0], sms=132,
                               entries={f"{cls_f}|8192x8192x8192": entry(wide)}),
           "nvidia-h100-80gb-hbm3": dict(gpu="NVIDIA H100 80GB HBM3", capability=[9, 0], sms=132,
                                         entries={f"{cls_p}|4096x4096x4096": entry(tall)}),
           "nvidia-a100": dict(gpu="NVIDIA A100", capability=[8, 0], sms=108, entries={})}
    monkeypatch.setattr(shipped, "_DBS", dbs)
    db, phrase = tuning.database("NVIDIA H200", (9, 0), 132, promoted=True)
    d = tuning.pick(db, phrase, promoted)
    assert (d.config["BM"], d.config["BN"]) == (256, 128), d
    assert "for FP8 without fast accumulation the shipped database for NVIDIA H100 80GB HBM3 (NVIDIA H200's has no " \
           "fp8-promoted entries" in d.source, d.source
    assert tuning.pick(db, phrase, fast).config["BN"] == 256  # FP8's own entry, from the H200's database
    assert tuning.database("NVIDIA H200", (9, 0), 132) == (dbs["nvidia-h200"], "the shipped database for NVIDIA H200")
    assert tuning.database("NVIDIA H100 80GB HBM3", (9, 0), 132, promoted=True)[0] is dbs["nvidia-h100-80gb-hbm3"]
    assert tuning.database("NVIDIA A100", (8, 0), 108, promoted=True)[0] is dbs["nvidia-a100"]  # none alike lends
    assert dbs["nvidia-h200"]["entries"] == {f"{cls_f}|8192x8192x8192": entry(wide)}  # (the GPU's own, untouched)


def test_the_waves_note_names_the_promoted_class_to_tune():
    """explain's advice tunes the shape's own class: `--dtypes fp8-promoted` for gemm(...,
    fast_accum=False), whose decisions `--dtypes fp8` never writes."""
    for fast_accum, word in ((True, "--dtypes fp8 "), (False, "--dtypes fp8-promoted ")):
        p = _fp8(640, 256, 4096, fast_accum=fast_accum)
        sms = P.num_sms(p.a.device)
        note = space.waves_note(p, space.T03, dict(BM=128, BN=256), (128 * sms, 256, 4096))
        assert note and word in note, note


def test_database_pick_exact_nearest_sibling_and_layout():
    """A problem takes its class's exact bucket, else the nearest tuned bucket whose configuration
    fits it, BF16's entries for FP16 where they are nearer, and the same dtypes in another layout
    where that is nearer by more than a step of M; the source says which. A layout's decode
    entries never stand in for its prefill shapes when another layout has those (prefill of the
    8B model ran at 0.24× torch so, session 15)."""
    from tilegemm import tuning

    t03 = dict(space.cfg(128, 256, 64, 8, 3), C_TMA=True)
    t04 = dict(space.cfg(16, 64, 128, 4, 4), SPLIT=4, FUSED=True)
    bf = "bf16|bfloat16|bfloat16|nn|nobeta"
    db = {"entries": {f"{bf}|4096x4096x4096": dict(rung=space.T03, config=t03, ms=0.18, shape=[4096] * 3),
                      f"{bf}|16x4096x4096": dict(rung=space.T04, config=t04, ms=0.009, shape=[16, 4096, 4096])}}
    d = tuning.pick(db, "db", _problem(4096, 4096, 4096))
    assert d.rung == space.T03 and "exact bucket" in d.source and d.config["BM"] == 128
    d = tuning.pick(db, "db", _problem(3000, 5000, 7000))  # another bucket (4096x8192x8192), same regime
    assert d.rung == space.T03 and "nearest tuned bucket 4096x4096x4096" in d.source
    d = tuning.pick(db, "db", _problem(8, 4096, 4096))  # decode takes the decode entry, not the nearer-in-N one
    assert d.rung == space.T04 and d.config["SPLIT"] == 4
    d = tuning.pick(db, "db", _problem(4096, 4096, 4096, torch.float16))
    assert d.rung == space.T03 and "of bf16" in d.source
    d = tuning.pick(db, "db", _problem(4096, 4096, 4096, b_t=True))  # x @ W.T: B column-major
    assert d.rung == space.T03 and "of layout nn" in d.source
    assert tuning.pick(db, "db", _problem(4096, 4096, 4096), want=space.T05) is None
    nt = "bf16|bfloat16|bfloat16|nt|nobeta"
    db["entries"][f"{nt}|4x4096x4096"] = dict(rung=space.T04, config=t04, ms=0.008, shape=[4, 4096, 4096])
    d = tuning.pick(db, "db", _problem(2048, 4096, 4096, b_t=True))  # prefill: nn's 4096 bucket, not nt's decode
    assert d.rung == space.T03 and "of layout nn" in d.source, d
    d = tuning.pick(db, "db", _problem(4, 4096, 4096, b_t=True))  # decode: its own layout's exact bucket
    assert d.rung == space.T04 and d.source == "db, exact bucket", d
    d = tuning.pick(db, "db", _problem(64, 4096, 4096, b_t=True))  # nn's M = 16 (a step nearer than nt's M = 4)
    assert d.rung == space.T04 and "nearest tuned bucket 16x4096x4096" in d.source and "of layout nn" in d.source
    # t06's tile is its layout's own: a row-major B never borrows it (2.4× slower on the H200 at lm_head)
    db["entries"][f"{nt}|1x131072x4096"] = dict(rung=space.T06, config=dict(BN=8, BK=1024, FOLD=8, num_warps=4,
                                                                             num_stages=1), ms=0.23, shape=[1, 128256, 4096])
    assert tuning.pick(db, "db", _problem(1, 128256, 4096, b_t=True)).rung == space.T06
    assert tuning.pick(db, "db", _problem(1, 128256, 4096)).rung != space.T06


def test_shipped_h200_database_has_narrow_buckets_in_every_precision():
    """N under 1024 at M of 1024 or more has buckets of its own in the H200 database: BF16 with B
    row-major and B = Wᵀ (FP16 takes them), TF32 row-major and FP8 with B K-major (each its
    tuned form; the `narrow` set's corners). Before them such a product took an N = 1024 bucket's
    tile: 8064×264×5856 BF16 with B = Wᵀ ran 0.39× cuBLAS on 128×256, 0.62× on 8192×320's entry;
    TF32 3520×288×4176 0.74× → 1.06×, FP8 7824×320×3488 0.69× → 1.12× (docs/perf-notes.md, 121
    and 122). A rewrite of the database that drops them fails here."""
    from tilegemm import tuning
    from tilegemm.bench.shapes import load_shapes

    db = shipped.databases()[shipped.slug("NVIDIA H200")]
    forms = [(torch.bfloat16, False), (torch.bfloat16, True), (torch.float32, False), (torch.float8_e4m3fn, True)]
    for m, n, k in load_shapes("narrow"):
        assert n < 1024 <= m
        for dt, b_t in forms:
            key = cache.db_entry_key(_problem(m, n, k, dt, b_t=b_t))
            assert key in db["entries"], key
    for dt, b_t in forms + [(torch.float16, False), (torch.float16, True)]:
        d = tuning.pick(db, "db", _problem(3000, 600, 3000, dt, b_t=b_t))
        assert "bucket 3072x512x4096" in d.source, (b_t, dt, d.source)


def test_another_buckets_split_k_tile_only_where_k_is_as_long():
    """A split-K tile is timed at its bucket's K: past decode, another bucket's split tile serves
    a shape only where K is at least 3/4 of the timed one (each slice's share of K shrinks with K,
    the partial sums' reduction does not: TF32 648×872×2072 ran 0.63× cuBLAS on SPLIT=4 tuned at
    768×1024×4096, 0.85× on the 1024 bucket's unsplit tile; docs/perf-notes.md, 114). Decode
    (where the split is for the SMs, not K) takes it at any K; every K of its own bucket fits. Two
    shapes of one bucket can differ, so the process's memo of decisions keys on K."""
    from unittest import mock

    from tilegemm import tuning

    t04 = dict(space.cfg(64, 128, 32, 4, 3), SPLIT=4)
    t03 = dict(space.cfg(128, 64, 64, 4, 3), C_TMA=True)
    tf = "tf32|float32|float32|nn|nobeta"
    db = {"entries": {f"{tf}|768x1024x4096": dict(rung=space.T04, config=t04, ms=0.02, shape=[768, 1024, 4096]),
                      f"{tf}|1024x1024x4096": dict(rung=space.T03, config=t03, ms=0.03, shape=[1024, 1024, 4096]),
                      f"{tf}|1x1024x16384": dict(rung=space.T04, config=dict(t04, BM=16), ms=0.01,
                                                 shape=[1, 1024, 16384])}}
    f32 = lambda m, n, k: _problem(m, n, k, torch.float32)  # noqa: E731
    with mock.patch.object(P, "num_sms", return_value=132), mock.patch.object(tuning, "usable", lambda r, p: True):
        assert space.t04_fits_k(f32(648, 872, 3072), t04, (768, 1024, 4096))  # 3/4 of the timed K
        assert not space.t04_fits_k(f32(648, 872, 3071), t04, (768, 1024, 4096))
        assert space.t04_fits_k(f32(648, 872, 2072), dict(t04, SPLIT=1), (768, 1024, 4096))  # no split
        assert space.t04_fits_k(f32(64, 872, 2072), t04, (768, 1024, 4096))  # decode
        d = tuning.pick(db, "db", f32(648, 872, 2072))
        assert d.rung == space.T03 and "nearest tuned bucket 1024x1024x4096" in d.source, d
        d = tuning.pick(db, "db", f32(648, 872, 3904))
        assert d.rung == space.T04 and "nearest tuned bucket 768x1024x4096" in d.source, d
        a, b = f32(648, 872, 3072), f32(648, 872, 2600)  # one bucket; the split fits the first's K alone
        assert cache.bucket(a) == cache.bucket(b) and tuning._memo_key(a, "auto") != tuning._memo_key(b, "auto")
        assert tuning.pick(db, "db", a).rung == space.T04 and tuning.pick(db, "db", b).rung == space.T03
        assert tuning._memo_key(f32(700, 872, 3072), "auto") == tuning._memo_key(a, "auto")  # M alone differs
        d = tuning.pick(db, "db", f32(700, 1000, 3588))  # near its own bucket's shortest K: 0.876 of the timed
        assert d.rung == space.T04 and d.source == "db, exact bucket", d
        d = tuning.pick(db, "db", f32(1, 1024, 4096))  # decode: the decode entry, split, at a quarter of its K
        assert d.rung == space.T04 and d.config["SPLIT"] == 4 and "1x1024x16384" in d.source, d
        del db["entries"][f"{tf}|1024x1024x4096"]
        assert tuning.pick(db, "db", f32(648, 872, 2072)) is None  # both split for a longer K: the heuristic


def test_another_buckets_wave_fitted_tile_only_where_it_fits_the_waves():
    """t05's tiles of 192 rows (or a 192- or 96-wide N side) win their bucket by the waves its
    shape makes. TF32 2560³ took 3072³'s swapped 192×128 as its nearest entry (3 waves where
    256×128 makes 2) and ran 156.5 µs against 113.7 (docs/perf-notes.md, 108). Such an entry
    serves its own bucket's shapes (FP16's too, from BF16's), and another bucket's shape, where t05
    runs it, only if its waves take less time than the standard tile's, counted by what a tile
    loads a k-step; elsewhere the nearest other entry, or the heuristic where there is none. Two
    shapes of one bucket can differ, so the process's memo of decisions tells them apart."""
    from unittest import mock

    from tilegemm import tuning

    fitted = dict(BM=192, BN=128, BK=64, STAGES=4, SPLIT=1, CONSUMERS=3, GROUP_M=8)
    t03 = dict(space.cfg(128, 256, 64, 8, 3), C_TMA=True)
    bf = "bf16|bfloat16|bfloat16|nn|nobeta"
    db = {"entries": {f"{bf}|3072x3072x3072": dict(rung=space.T05, config=fitted, ms=0.08, shape=[3072] * 3),
                      f"{bf}|2048x2048x2048": dict(rung=space.T03, config=t03, ms=0.027, shape=[2048] * 3)}}
    sizes = lambda d: (d.rung, d.config["BM"], d.config["BN"])  # noqa: E731
    with mock.patch.object(P, "num_sms", return_value=132), mock.patch.object(tuning, "usable", lambda r, p: True):
        for dt in (torch.bfloat16, torch.float16):  # its own bucket, where it does not fit the waves:
            p = _problem(2600, 2600, 2600, dt)  # 294 tiles of 192×128, 3 waves; 231 of 128×256, 2
            assert not space.t05_fits_waves(p, fitted)
            d = tuning.pick(db, "db", p)
            assert sizes(d) == (space.T05, 192, 128) and "exact bucket" in d.source, d
        p = _problem(2560, 2560, 2560)  # 280 tiles of 192×128: 3 waves; 200 of 128×256: 2
        assert cache.distance(cache.bucket(p), "3072x3072x3072") < cache.distance(cache.bucket(p), "2048x2048x2048")
        d = tuning.pick(db, "db", p)
        assert sizes(d) == (space.T03, 128, 256) and "nearest tuned bucket 2048x2048x2048" in d.source, d
        q = _problem(2304, 2304, 2560)  # the same bucket: 216 tiles of 192×128, 162 of 128×256, two waves each
        assert cache.bucket(q) == cache.bucket(p) and space.t05_fits_waves(q, fitted)
        assert sizes(tuning.pick(db, "db", q)) == (space.T05, 192, 128)
        assert tuning._memo_key(q, "auto") != tuning._memo_key(p, "auto")
        assert tuning._memo_key(_problem(2544, 2544, 2560), "auto") == tuning._memo_key(p, "auto")  # same waves
        a, b = torch.empty(2, 2304, 2304, dtype=torch.bfloat16), torch.empty(2, 2304, 2304, dtype=torch.bfloat16)
        assert not space.t05_fits_waves(P.Problem(a, b, torch.empty_like(a), "bf16"), fitted)  # 4 waves against 3
        swapped = space.t05_cfg(192, 128, 32, 5, 2, swap=True)  # TF32's, weighed against 256×128
        tf = _problem(2432, 1664, 2048, torch.float32)  # 256×128: 130 tiles, one wave; 128×256: 133, two
        assert not space.t05_fits_waves(tf, swapped) and space.t05_fits_waves(tf, dict(swapped, SWAP=False))
        db["entries"][f"{bf}|2560x2560x1024"] = dict(rung=space.T05, ms=0.02, shape=[2560, 2560, 1024])  # no config
        assert sizes(tuning.pick(db, "db", p)) == (space.T03, 128, 256)  # passed over, as before
        del db["entries"][f"{bf}|2048x2048x2048"]
        assert tuning.pick(db, "db", p) is None  # no other entry: the heuristic decides
        # the shipped H200 database: TF32 3072³'s entry (swapped 192×128) at 3072³ and 2304³, not at 2560³
        from tilegemm.tuning import command

        with open(command.db_path("NVIDIA H200")) as f:
            h200 = json.load(f)
        f32 = [tuning.pick(h200, "db", _problem(n, n, n, torch.float32)) for n in (3072, 2304, 2560)]
        assert [(d.config["BM"], d.config["BN"]) for d in f32] == [(192, 128), (192, 128), (256, 128)], f32
    assert [space.t05_wave_fitted(space.t05_cfg(bm, bn, 64, 4)) for bm, bn in
            ((192, 192), (192, 96), (192, 128), (128, 256), (256, 128), (128, 128))] == [True] * 3 + [False] * 3
    assert not space.t05_wave_fitted({})


def test_wave_cost_counts_waves_and_the_longer_of_mmas_and_loads():
    """A tile's cost at p: its waves over the SMs, each the longer of BM·BN multiply-adds (2048 an
    SM clock in BF16, 1024 in TF32) and (BM + BN) rows loaded (32 bytes an SM clock), times K.
    Unweighed (None): t06's configuration, tiles under 64 on a side, and K slices."""
    from unittest import mock

    t03 = lambda bm, bn: dict(space.cfg(bm, bn, 64, 4, 4), C_TMA=True)  # noqa: E731
    with mock.patch.object(P, "num_sms", return_value=132):
        p = _problem(640, 400, 4336)
        assert space.wave_cost(p, space.T03, t03(64, 128)) == 1 * 12 * 4336  # 40 tiles: loads 192·2/32
        assert space.wave_cost(p, space.T03, t03(64, 64)) == 1 * 8 * 4336  # 70 tiles, one wave
        q = _problem(348, 4958, 1919)
        assert space.wave_cost(q, space.T03, t03(128, 64)) == 2 * 12 * 1919  # 234 tiles: two waves
        assert space.wave_cost(q, space.T03, t03(128, 128)) == 1 * 16 * 1919  # 117: one; MMAs 8, loads 16
        tf = _problem(348, 4958, 1919, torch.float32)
        assert space.wave_cost(tf, space.T03, t03(128, 128)) == 1 * 32 * 1919  # 4 bytes: loads 32 clocks
        assert space.wave_cost(p, space.T03, t03(16, 64)) is None
        assert space.wave_cost(p, space.T04, dict(t03(64, 64), SPLIT=2)) is None
        assert space.wave_cost(p, space.T05, dict(BM=128, BN=256, SPLIT=2)) is not None  # t05's SPLIT: C's store
        assert space.wave_cost(p, space.T06, dict(BN=8, BK=1024)) is None


def test_pick_weighs_the_waves_of_the_entries_near_the_nearest():
    """Where p's nearest entry is another bucket's, the entry within 2 steps of it whose tile's waves
    cost p least, if at most 0.8 of the nearest's (on a tie, the farther): BF16 640×400×4336 ran
    1.21-1.31× faster on 64×64 tiles (70, one wave) than on its nearest entry's 64×128 (40). An
    equal cost, an entry farther than the window, its own bucket's entry, and a shape whose M or N
    is 256 or less keep the nearest. The source names both."""
    from unittest import mock

    from tilegemm import tuning

    t03 = lambda bm, bn: dict(space.cfg(bm, bn, 64, 4, 4), C_TMA=True)  # noqa: E731
    bf = "bf16|bfloat16|bfloat16|nn|nobeta"
    entry = lambda bm, bn, ms, shape: dict(rung=space.T03, config=t03(bm, bn), ms=ms, shape=shape)  # noqa: E731
    near = {f"{bf}|640x512x4096": entry(64, 128, 0.02, [640, 512, 4096])}  # 0.51 steps from 640x448x5120
    tile = lambda d: (d.config["BM"], d.config["BN"], d.ms)  # noqa: E731
    with mock.patch.object(P, "num_sms", return_value=132), mock.patch.object(tuning, "usable", lambda r, p: True):
        p = _problem(640, 400, 4336)
        assert cache.weighs_waves(p) and cache.bucket(p) == "640x448x5120"
        db = {"entries": dict(near, **{f"{bf}|512x512x4096": entry(64, 64, 0.03, [512, 512, 4096])})}  # 1.16 steps
        d = tuning.pick(db, "db", p)
        assert tile(d) == (64, 64, 0.03) and d.shape == (512, 512, 4096) and d.by_waves, d
        assert d.source == ("db, tuned bucket 512x512x4096 (tuned at 512×512×4096), 0.6 steps past the nearest, "
                            "whose tc_tma_persistent 64×128 makes waves here 1.50× as costly"), d.source
        tie = {"entries": dict(db["entries"], **{f"{bf}|512x512x3584": entry(64, 64, 0.04, [512, 512, 3584])})}
        assert tile(tuning.pick(tie, "db", p)) == (64, 64, 0.04)  # 1.35 steps: the farther of two equal costs
        same = {"entries": dict(near, **{f"{bf}|512x512x4096": entry(128, 64, 0.03, [512, 512, 4096])})}
        d = tuning.pick(same, "db", p)  # 35 tiles of 128×64, one wave: loads of 192 rows either way
        assert tile(d) == (64, 128, 0.02) and d.by_waves and d.source.startswith("db, nearest tuned bucket 640x512x4096")
        far = {"entries": dict(near, **{f"{bf}|256x512x4096": entry(64, 64, 0.03, [256, 512, 4096])})}  # 3.16 steps
        assert tile(tuning.pick(far, "db", p)) == (64, 128, 0.02)
        own = {"entries": dict(db["entries"], **{f"{bf}|640x448x5120": entry(128, 128, 0.05, [640, 448, 5120])})}
        assert tile(tuning.pick(own, "db", p)) == (128, 128, 0.05)
        low = {"entries": {f"{bf}|256x512x4096": entry(64, 128, 0.02, [256, 512, 4096]),
                           f"{bf}|512x512x4096": entry(64, 64, 0.03, [512, 512, 4096])}}
        q = _problem(250, 400, 4336)  # weighed, it would take 64×64 (28 tiles against 16, one wave each)
        assert not cache.weighs_waves(q) and space.wave_cost(q, space.T03, t03(64, 64)) < 0.8 * space.wave_cost(
            q, space.T03, t03(64, 128))
        d = tuning.pick(low, "db", q)
        assert tile(d) == (64, 128, 0.02) and not d.by_waves
        r = _problem(640, 256, 4336)  # N ≤ 256: weighed, it too would take 64×64 (40 tiles against 20)
        assert tile(tuning.pick(db, "db", r)) == (64, 128, 0.02) and not tuning.pick(db, "db", r).by_waves


def test_a_bucket_whose_decisions_weigh_waves_is_remembered_per_shape():
    """choose's memo keeps a decision per bucket, but one pick made by the waves of the shape's own
    M and N (by_waves) per shape: the bucket's next shape is weighed anew. A fallback `remember`ed
    serves the whole bucket again."""
    from unittest import mock

    from tilegemm import tuning

    calls = []

    def chosen(by_waves):
        def _choose(p, want, tune=True):
            calls.append((p.m, p.n))
            return tuning.Decision(space.T03, dict(space.cfg(64, 64, 64, 4, 4), C_TMA=True), "db", by_waves=by_waves)
        return _choose

    a, b = _problem(600, 1000, 4096), _problem(610, 1008, 4096)  # one bucket
    try:
        for by_waves, runs in ((True, 2), (False, 1)):
            tuning._MEMO.clear(), calls.clear()
            with mock.patch.object(tuning, "_choose", chosen(by_waves)), mock.patch.object(P, "num_sms", return_value=132):
                for p in (a, b, a, b):
                    assert tuning.choose(p).by_waves == by_waves
            assert len(calls) == runs, (by_waves, calls)
        tuning._MEMO.clear(), calls.clear()
        with mock.patch.object(tuning, "_choose", chosen(True)), mock.patch.object(P, "num_sms", return_value=132):
            tuning.choose(a)
            tuning.remember(a, "auto", tuning.Decision(space.T02, space.default(space.T02, a), "fallback"))
            assert tuning.choose(b).source == "fallback" and calls == [(600, 1000)]
    finally:
        tuning._MEMO.clear()


def test_explain_gives_the_waves_of_a_tile_timed_at_another_shape():
    """A database decision names the shape it was timed at; where that is not the caller's shape,
    explain gives the waves its tile makes there and here, and where the caller's waves are much
    less full, the command that tunes the caller's own shape (docs/perf-notes.md, 113)."""
    from unittest import mock

    from tilegemm import dispatch, tuning

    fitted = dict(BM=192, BN=128, BK=64, STAGES=4, SPLIT=1, CONSUMERS=3, GROUP_M=8)
    bf = "bf16|bfloat16|bfloat16|nn|nobeta"
    db = {"entries": {f"{bf}|1536x4096x2560": dict(rung=space.T05, config=fitted, ms=0.03, shape=[1536, 4096, 2560])}}
    with mock.patch.object(P, "num_sms", return_value=132), mock.patch.object(tuning, "usable", lambda r, p: True):
        p = _problem(1081, 3760, 2200)  # 6 × 30 = 180 tiles: 1.36 waves, 68% full; at the entry's shape 256, 97%
        d = tuning.pick(db, "db", p)
        assert d.shape == (1536, 4096, 2560) and d.ms == 0.03
        said = space.waves_note(p, d.rung, d.config, d.shape)
        assert said.startswith("its 192×128 tile was timed at 1536×4096×2560: 256 tiles, 1.94 waves of 132 SMs; "
                               "here 180, 1.36 waves, the waves 68% full against 97% there"), said
        assert "`tilegemm tune --sizes 1081x3760x2200 --dtypes bf16`" in said
        t = _problem(1081, 3760, 2200, b_t=True)
        assert "--layouts t`" in space.waves_note(t, d.rung, d.config, d.shape)
        q = _problem(1536, 4000, 2560)  # as full as where it was timed: the waves, no advice
        assert "tilegemm tune" not in space.waves_note(q, d.rung, d.config, d.shape)
        assert space.waves_note(_problem(1536, 4096, 2560), d.rung, d.config, d.shape) is None  # timed here
        assert space.waves_note(p, d.rung, d.config, None) is None and space.waves_note(p, d.rung, {}, d.shape) is None
        split = dict(space.cfg(192, 128, 64, 8, 3), SPLIT=2)  # t04's SPLIT slices K; t05's slices C's store
        assert "tile in 2 K slices was timed" in space.waves_note(q, space.T04, split, d.shape)
        assert "K slices" not in space.waves_note(q, space.T05, dict(fitted, SPLIT=2), d.shape)
        with mock.patch.object(tuning, "choose", lambda p, kernel, tune=True: d):
            rung, lines = dispatch.explain_problem(p)
        assert rung == space.T05 and lines[-1] == said


def test_unaligned_operands_are_realigned_for_tma_and_batched_ones_take_t02():
    """Operands TMA cannot describe (4095×4097×1023: rows not 16-byte aligned) run the nearest TMA
    entry's tile on t03 after a realigning copy, not a far bucket's split-K tile (0.17× cuBLAS on
    the H200) nor t02's pointer loads (0.08× at 777×1234×4321); t05's tile (t05 takes no operand
    that needs the copy) on t03. A batched operand TMA cannot describe takes the tile on t02, t05's
    with 8 warps for 128×256."""
    from tilegemm import tuning

    t05 = dict(BM=128, BN=256, BK=64, CONSUMERS=2, GROUP_M=8, SPLIT=1, STAGES=4)
    t04 = dict(space.cfg(16, 64, 128, 4, 4), SPLIT=4, FUSED=True)
    bf = "bf16|bfloat16|bfloat16|nn|nobeta"
    db = {"entries": {f"{bf}|4096x8192x1024": dict(rung=space.T05, config=t05, ms=0.1, shape=[4096, 8192, 1024]),
                      f"{bf}|16x4096x1024": dict(rung=space.T04, config=t04, ms=0.009, shape=[16, 4096, 1024]),
                      f"{bf}|4096x8192x1024b4": dict(rung=space.T05, config=t05, ms=0.4, shape=[4096, 8192, 1024, 4])}}
    p = _problem(4095, 4097, 1023)
    assert tuning.usable(space.T03, p) and t03_tma_persistent.needs_realign(p)
    d = tuning.pick(db, "db", p)
    assert d.rung == space.T03 and "tc_warp_specialized's tile on tc_tma_persistent" in d.source
    assert "16-byte aligned rows" in d.source and d.config["BM"] == 128 and d.config["BN"] == 256
    assert d.ms is None  # the entry's time was t05's, without the copy
    assert not t03_tma_persistent.needs_realign(_problem(4096, 4096, 1024))

    a, b = torch.empty(4, 4095, 1023, dtype=torch.bfloat16), torch.empty(4, 1023, 4097, dtype=torch.bfloat16)
    pb = P.Problem(a, b, torch.empty(4, 4095, 4097, dtype=torch.bfloat16), "bf16")
    assert not tuning.usable(space.T03, pb) and "batched" in t03_tma_persistent.usable(pb)
    d = tuning.pick(db, "db", pb)
    assert d.rung == space.T02 and "tc_warp_specialized's tile on tc_persistent" in d.source
    assert (d.config["BM"], d.config["BN"], d.config["BK"], d.config["num_warps"], d.config["num_stages"]) == \
        (128, 256, 64, 8, 3)


def test_a_pointer_rungs_tile_runs_on_t03_where_rows_are_unaligned_past_decode():
    """A split-K (or t02) entry was timed on aligned rows; 777×1234×4321 (rows of A and B not
    16-byte aligned) ran its pointer loads at 0.31× cuBLAS on the H100, and the same tile on t03
    after the realigning copy 1.62×: past decode the tile runs on t03. A decode shape keeps
    split-K's tile on split-K (t03's wgmma tiles start at 64 rows)."""
    from tilegemm import tuning

    t04 = dict(space.cfg(64, 128, 64, 4, 4), SPLIT=2, FUSED=True)
    t04_decode = dict(space.cfg(16, 64, 128, 4, 4), SPLIT=4, FUSED=True)
    bf = "bf16|bfloat16|bfloat16|nn|nobeta"
    db = {"entries": {f"{bf}|1024x1024x8192": dict(rung=space.T04, config=t04, ms=0.03, shape=[1024, 1024, 8192]),
                      f"{bf}|16x4096x1024": dict(rung=space.T04, config=t04_decode, ms=0.009, shape=[16, 4096, 1024])}}
    d = tuning.pick(db, "db", _problem(777, 1234, 4321))
    assert d.rung == space.T03 and "tc_splitk's tile on tc_tma_persistent" in d.source, d
    assert "16-byte aligned rows" in d.source and (d.config["BM"], d.config["BN"], d.config["BK"]) == (64, 128, 64)
    assert "SPLIT" not in d.config and "FUSED" not in d.config and d.ms is None
    assert "pointer loads of unaligned rows" in d.source
    d = tuning.pick(db, "db", _problem(1000, 1024, 8192))  # aligned rows: the entry as tuned
    assert d.rung == space.T04 and d.config["SPLIT"] == 2 and d.ms == 0.03
    d = tuning.pick(db, "db", _problem(16, 4097, 1023))  # decode, unaligned: split-K's own tile
    assert d.rung == space.T04 and d.config["BM"] == 16
    assert tuning.pick(db, "db", _problem(777, 1234, 4321), want=space.T04).rung == space.T04  # asked for by name
    db["entries"][f"{bf}|1024x1024x8192"] = dict(rung=space.T02, config=space.cfg(128, 64, 64, 4, 3), ms=0.04,
                                                 shape=[1024, 1024, 8192])
    d = tuning.pick(db, "db", _problem(777, 1234, 4321))  # t02's tile likewise
    assert d.rung == space.T03 and "tc_persistent's tile on tc_tma_persistent" in d.source and d.config["BM"] == 128
    # an entry timed on unaligned rows itself (the TF32 100×12345×678 bucket on the H100) runs as timed
    db["entries"][f"{bf}|1024x1024x8192"]["shape"] = [1000, 1001, 8191]  # both rows off, as 777×1234×4321
    d = tuning.pick(db, "db", _problem(777, 1234, 4321))
    assert d.rung == space.T02 and d.ms == 0.04 and "pointer loads" not in d.source
    timed = tuning._timed_unaligned
    assert timed(dict(shape=[100, 12345, 678]), _problem(100, 12345, 678, torch.float32))
    assert not timed(dict(shape=[128, 1024, 8192]), _problem(100, 12345, 678, torch.float32))
    assert timed(dict(shape=[1024, 1024, 8190]), _problem(777, 1234, 4321, b_t=True))  # B's rows: K
    assert not timed(dict(shape=[1024, 1023, 8192]), _problem(777, 1234, 4321, b_t=True))
    # every operand off 16 bytes in p must have been off in the entry (777×1024×4321: A only)
    assert not timed(dict(shape=[1000, 1001, 8192]), _problem(777, 1024, 4321))  # the entry's B, not its A
    assert timed(dict(shape=[1000, 1001, 8191]), _problem(777, 1024, 4321))
    assert not timed(dict(shape=[1000, 1000, 8191]), _problem(777, 1001, 4321))  # p's B too, the entry's not
    # an entry of another layout is read in its own: nt's B rows are K (aligned at 8192), not N
    assert not timed(dict(shape=[1024, 1001, 8192], sibling="bf16|bfloat16|bfloat16|nt|nobeta"),
                     _problem(777, 1001, 8192))
    assert timed(dict(shape=[1024, 1001, 8192]), _problem(777, 1001, 8192))


def test_fp16_takes_bf16s_nearer_bucket_over_its_own_farther_one():
    from tilegemm import tuning

    t03 = dict(space.cfg(128, 256, 64, 8, 3), C_TMA=True)
    mid = dict(space.cfg(64, 128, 128, 4, 3), C_TMA=True)
    bf, hf = "bf16|bfloat16|bfloat16|nn|nobeta", "fp16|float16|float16|nn|nobeta"
    db = {"entries": {f"{bf}|1024x4096x4096": dict(rung=space.T03, config=t03, ms=0.05, shape=[1024, 4096, 4096]),
                      f"{hf}|1024x1024x1024": dict(rung=space.T03, config=mid, ms=0.01, shape=[1024] * 3),
                      f"{bf}|1024x1024x1024": dict(rung=space.T03, config=t03, ms=0.01, shape=[1024] * 3)}}
    d = tuning.pick(db, "db", _problem(1024, 4096, 4096, torch.float16))
    assert d.config["BN"] == 256 and "of bf16" in d.source
    d = tuning.pick(db, "db", _problem(1024, 1024, 1024, torch.float16))  # a tie: its own entry
    assert d.config["BN"] == 128 and "exact bucket" in d.source and "bf16" not in d.source


def test_the_h200_database_serves_a_models_linear_layers_from_their_own_layout():
    """The H200's shipped database has B = Wᵀ (nt, what nn.Linear passes) entries for the 8B and 70B
    projections and lm_head from M = 256 to 16384: prefill's products take their own layout's exact
    bucket (before, nn's nearest at another M: 2048×1024×4096 ran 0.81× cuBLAS, 256×4096×14336
    0.34×; docs/perf-notes.md, 85). The 70B slice's logits check product, 512×1024×8192, stays on an
    unsplit tile: a split one sums K in another order than cuBLAS, and the random-weight model's
    near-tied logits then disagree (note 68)."""
    from tilegemm import tuning

    shipped.forget()
    db = shipped.databases()["nvidia-h200"]
    for m in (256, 512, 1024, 2048, 4096, 8192, 16384):
        for n, k in ((4096, 4096), (1024, 4096), (14336, 4096), (4096, 14336), (128256, 4096),
                     (8192, 8192), (1024, 8192), (28672, 8192), (8192, 28672), (128256, 8192)):
            d = tuning.pick(db, "db", _problem(m, n, k, b_t=True))
            assert d.source.startswith("db, exact bucket") and "of layout" not in d.source, (m, n, k, d)
    d = tuning.pick(db, "db", _problem(512, 1024, 8192, b_t=True))
    assert d.rung != space.T04 and d.config.get("SPLIT", 1) == 1, d


def _derive(capsys, tmp_path, cache_text, *more):
    """`tilegemm tune --derive` of a file holding cache_text into tmp_path/db.json: (exit status,
    stdout, stderr, whether the database was written)."""
    from tilegemm import cli

    src = tmp_path / "from.json"
    if cache_text is not None:
        src.write_text(cache_text)
    more = more or ("--gpu", "NVIDIA H200", "--db", str(tmp_path / "db.json"))
    rc = cli.main(["tune", "--derive", str(src), *more])
    out = capsys.readouterr()
    return rc, out.out, out.err, (tmp_path / "db.json").exists()


@pytest.mark.parametrize("text, says", [
    ('{"x": 1}', "from.json: no tuning entries"),  # was '0 decisions derived', exit 0, an empty database
    ('["a", "b"]', "from.json: a JSON list, not a tuning cache"),
    ("{ not json", "from.json: not a tuning cache (not JSON"),  # was a 2-line RuntimeWarning with the source line
    (None, "from.json: no such tuning cache"),  # was 'no tuning entries in …'
    (json.dumps({f"tc_splitk|NVIDIA H100|bf16|bfloat16|bfloat16|nn|nobeta|16x4096x4096||{cache.TUNER_VERSION}":
                 dict(config={}, ms=0.01, m=16, n=4096, k=4096)}),
     "no rung tunings to derive from for --gpu 'NVIDIA H200' (its tunings are for 'NVIDIA H100')"),
    (json.dumps({"tc_splitk|NVIDIA H200|bf16|bfloat16|bfloat16|nn|nobeta|16x4096x4096||v0":
                 dict(config={}, ms=0.01, m=16, n=4096, k=4096)}), "its tunings for it are of tuner v0"),
])
def test_derive_refuses_a_file_it_cannot_derive_from_and_writes_nothing(text, says, tmp_path, capsys):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no RuntimeWarning beside the line
        rc, out, err, written = _derive(capsys, tmp_path, text)
    assert rc == 2 and not written and not out.strip(), out
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1 and says in err, err


def test_derive_without_gpu_or_db_says_so_on_stderr(tmp_path, capsys):
    rc, out, err, written = _derive(capsys, tmp_path, "{}", "--db", str(tmp_path / "db.json"))
    assert rc == 2 and not written and not out.strip(), out  # was printed on stdout
    assert "--derive needs the GPU it is for (--gpu" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("more", [("--sizes", "64", "--dtypes", "bf16"), ("--from-cache",)])
def test_tune_refuses_a_db_that_is_not_a_database_before_it_tunes_and_leaves_it(more, tmp_path, capsys,
                                                                                monkeypatch):
    """`tune --db FILE` (and --ship's file) where FILE is something else (here a results document):
    refused in one line before anything is tuned, the file as it was. It was read as an empty
    database, forgiven, and written over with the tunings at the first shape."""
    import torch

    from tilegemm import cli
    from tilegemm.tuning import command, tuner

    doc = tmp_path / "library.json"
    text = json.dumps({"schema": 3, "records": [{"dtype": "bf16", "ratio": 1.1}]})
    doc.write_text(text)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(command, "device_facts", lambda: dict(gpu="NVIDIA H200", tuner=cache.TUNER_VERSION))
    monkeypatch.setattr(tuner, "tune", lambda p: pytest.fail("tuned before the --db was checked"))
    monkeypatch.setattr(command, "problem", lambda *a: pytest.fail("tuned before the --db was checked"))
    assert cli.main(["tune", *more, "--db", str(doc)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1 and "not a tuning database" in err, err
    assert doc.read_text() == text
    with pytest.raises(ValueError, match="not a tuning database"):  # the writer itself refuses too
        command.write_db(str(doc), {"x": {}}, dict(gpu="NVIDIA H200"))
    assert doc.read_text() == text


def test_tune_from_cache_writes_every_database_named_and_refuses_to_write_none(tmp_path, capsys, monkeypatch):
    """`--ship --db PATH` wrote only PATH (both are "also"); `--from-cache` with neither counted the
    cache's decisions and wrote nothing, exit 0."""
    import torch

    from tilegemm import cli
    from tilegemm.tuning import command

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(command, "device_facts", lambda: dict(gpu="NVIDIA H200", tuner=cache.TUNER_VERSION))
    shipped_db = tmp_path / "package" / "nvidia-h200.json"
    monkeypatch.setattr(command, "db_path", lambda gpu: str(shipped_db))
    key = "bf16|bfloat16|bfloat16|nn|nobeta|4096x4096x4096"
    monkeypatch.setattr(cache, "_user", lambda: {f"auto|NVIDIA H200|{key}|{cache.TUNER_VERSION}":
                                                 dict(rung="tc_persistent", config={"BM": 128}, ms=0.1)})
    assert cli.main(["tune", "--from-cache"]) == 2
    err = capsys.readouterr().err
    assert "--from-cache writes a database" in err and len(err.strip().splitlines()) == 1, err
    os.makedirs(shipped_db.parent)
    mine = tmp_path / "mine.json"
    assert cli.main(["tune", "--from-cache", "--ship", "--db", str(mine)]) == 0
    for path in (mine, shipped_db):
        assert list(json.loads(path.read_text())["entries"]) == [key], path


def test_a_database_is_ranked_at_a_slow_hosts_launch_floor(tmp_path, monkeypatch):
    """`tune --ship` (or --db) ranks as if each launch cost the host cache.SHIP_FLOOR_MS: a
    two-launch split-K 8 µs faster on the device won on a host of 11.5 µs a launch and lost a
    slower host's caller a launch (H100 TF32 128×1024×8192: 0.78× cuBLAS). The user's cache alone
    ranks at the measured floor; a cached rung tuning or verdict made at a lower floor than the
    database's is made again, not shipped."""
    import torch

    from tilegemm import cli
    from tilegemm.kernels.tensorcore import _problem as P
    from tilegemm.tuning import command, timer, tuner

    monkeypatch.setattr(timer, "_FLOOR", [0.0115])
    monkeypatch.setattr(timer, "_AT_LEAST", [0.0])
    two, one = {"SPLIT": 4}, {"SPLIT": 4, "FUSED": True}
    counts = {id(two): 2, id(one): 1}
    timings = [(0.022, two), (0.030, one)]
    assert tuner._ranked(timings, counts, timer.launch_floor_ms())[0][1] is two  # 23 µs against 30
    floors = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(command, "device_facts", lambda: dict(gpu="NVIDIA H200", tuner=cache.TUNER_VERSION))
    monkeypatch.setattr(command, "problem", lambda *a: None)
    def tune(p):  # the floor it ranks at; then a failure, which the command reports and goes on from
        floors.append(timer.launch_floor_ms())
        raise RuntimeError("not tuned here")

    monkeypatch.setattr(tuner, "tune", tune)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    assert cli.main(["tune", "--sizes", "128x1024x8192", "--dtypes", "tf32", "--quiet"]) == 0
    assert floors == [0.0115]  # the user's cache: this host's floor
    assert cli.main(["tune", "--sizes", "128x1024x8192", "--dtypes", "tf32", "--quiet",
                     "--db", str(tmp_path / "db.json")]) == 0
    assert floors[1:] == [cache.SHIP_FLOOR_MS] and timer.floor_minimum() == cache.SHIP_FLOOR_MS
    assert tuner._ranked(timings, counts, timer.launch_floor_ms())[0][1] is one  # 40 µs against 30
    hits = {"cached": dict(config=two, ms=0.022, launches=2, score_ms=0.023, floor_ms=0.0115)}
    monkeypatch.setattr(cache, "cached_entry", lambda key: hits["cached"])
    monkeypatch.setattr(cache, "tune_key", lambda *a: "k")
    monkeypatch.setattr(tuner, "trial_problem", lambda q: (_ for _ in ()).throw(LookupError("tuned again")))
    p = P.Problem(torch.empty(128, 8192), torch.empty(8192, 1024), torch.empty(128, 1024), "tf32")
    with pytest.raises(LookupError, match="tuned again"):  # the cached tuning ranked at 11.5 µs is not used
        tuner.tune_rung(space.T04, p)
    hits["cached"] = dict(hits["cached"], floor_ms=cache.SHIP_FLOOR_MS)
    assert tuner.tune_rung(space.T04, p) is hits["cached"]  # one ranked at the database's floor is


def test_a_derived_database_is_ranked_at_a_slow_hosts_launch_floor():
    """`tune --derive` writes a database too: from rung tunings scored at the cache's host's floor
    (11.5 µs), it took the two-launch split-K that `tune --db` no longer ships (its 22 µs against
    one launch's 30 is 40 µs at cache.SHIP_FLOOR_MS a launch)."""
    from tilegemm.tuning import command

    cls, v, gpu = "tf32|float32|float32|nn|nobeta", cache.TUNER_VERSION, "NVIDIA H100 80GB HBM3"
    shape = dict(m=128, n=1024, k=8192)
    cached = {f"{space.T04}|{gpu}|{cls}|128x1024x8192||{v}": dict(config={"SPLIT": 4}, ms=0.022, launches=2,
                                                                   score_ms=0.023, floor_ms=0.0115, **shape),
              f"{space.T02}|{gpu}|{cls}|128x1024x8192||{v}": dict(config={"BM": 128}, ms=0.030, launches=1,
                                                                   score_ms=0.030, floor_ms=0.0115, **shape)}
    assert command.derive(cached, gpu)[f"{cls}|128x1024x8192"]["rung"] == space.T02


def test_k11_cache_entries_that_are_not_configurations_and_folders_that_take_no_file_are_warnings(
        tmp_path, monkeypatch):
    """The autotune cache's rule (tilegemm.env): what cannot be read is ignored with a warning; a
    folder it cannot be written to is a warning too, not an error after the search has run."""
    import json

    from tilegemm.kernels.simt import k11_autotuned as k11

    monkeypatch.setenv("TILEGEMM_CACHE_DIR", str(tmp_path))
    (tmp_path / "autotune.json").write_text(json.dumps({k11.cache_key("float32"): {"winner": {"BM": 0}}}))
    with pytest.warns(UserWarning, match="not a k11 configuration"):
        assert k11.cached_config("float32") is None  # (BM = 0 divided by zero on the first call)
    monkeypatch.setattr(k11, "cache_path", lambda: "/proc/no/autotune.json")
    with pytest.warns(UserWarning, match="cannot be written"):
        k11._write_cache("key", {"winner": {}})


def test_write_json_merges_or_replaces_and_leaves_the_file_readable_to_others(tmp_path):
    """A merge keeps what is on disk, replace=True (`tune --ship` writing a database) drops it; the
    file is 0644 (mkstemp's 0600 would make a shipped database unreadable to other users)."""
    path = str(tmp_path / "db" / "x.json")
    assert cache.write_json(path, {"a": 1}) == {"a": 1}
    assert cache.write_json(path, {"b": 2}) == {"a": 1, "b": 2}
    assert cache.write_json(path, {"c": 3}, replace=True) == {"c": 3} == json.load(open(path))
    assert os.stat(path).st_mode & 0o777 == 0o644


def test_a_cache_folder_that_takes_no_file_keeps_the_entry_for_this_process(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("TILEGEMM_CACHE_DIR", str(blocker / "cache"))  # under a file: no folder can be made
    cache.reset()
    with pytest.warns(RuntimeWarning, match="cannot read the tuning cache .*kept for this process only"):
        cache.store_entry("k", {"config": {"BM": 64}})
    cache._MEMO.clear()  # not only the memo: the process's copy of the cache holds it
    assert cache.cached_entry("k") == {"config": {"BM": 64}}


def test_bucket_distance_in_log2_steps_with_the_decode_crossing_at_m_128():
    """2 a doubling of M, 1 of N or K, 2 of the batch, and 8 for crossing from M ≤ 128 (decode) to
    M > 128."""
    d = cache.distance
    assert d("128x4096x4096", "1x4096x4096") == 14  # both decode: no crossing
    assert d("256x4096x4096", "128x4096x4096") == 2 + 8
    assert d("256x4096x4096", "512x4096x4096") == 2
    assert d("64x1024x4096", "64x4096x1024") == 4
    assert d("64x64x64b4", "64x64x64") == d("64x64x64b4", "64x64x64b16") == 4


def test_keys_hold_the_variant_and_the_tuner_version(monkeypatch):
    """A rung's tuning of another variant is another entry; a new TUNER_VERSION is a new key, so a
    version bump drops every cached tuning and decision."""
    p = _problem(256, 256, 256)
    assert cache.tune_key(space.T03, p, "x") != cache.tune_key(space.T03, p)
    keys = cache.tune_key(space.T03, p), cache.decision_key(p, "NVIDIA H200")
    monkeypatch.setattr(cache, "TUNER_VERSION", "v0")
    assert cache.tune_key(space.T03, p) != keys[0] and cache.decision_key(p, "NVIDIA H200") != keys[1]


def test_other_layouts_row_major_b_first():
    assert cache.other_layouts("bf16|bfloat16|bfloat16|tt|nobeta") == [
        "bf16|bfloat16|bfloat16|nn|nobeta", "bf16|bfloat16|bfloat16|nt|nobeta", "bf16|bfloat16|bfloat16|tn|nobeta"]


def test_grid_up_and_the_batch_in_a_bucket():
    """Powers of two to 8 (and 1 for an empty dimension), then a quarter octave apart; a batch of 2
    or more is part of the bucket."""
    assert [space.grid_up(x) for x in (0, 1, 3, 5, 8, 9, 17, 2048, 2049, 2560, 2561, 3000, 4097)] == [
        1, 1, 4, 8, 8, 10, 20, 2048, 2560, 2560, 3072, 3072, 5120]
    a = torch.empty(2, 100, 64, dtype=torch.bfloat16)
    b = torch.empty(64, 300, dtype=torch.bfloat16)
    p = P.Problem(a, b, torch.empty(2, 100, 300, dtype=torch.bfloat16), "bf16")
    assert cache.bucket(p) == "112x320x64b2" and cache.bucket(_problem(100, 300, 64)) == "112x320x64"


def test_prune_keeps_the_smallest_tile_where_none_fits():
    p = _problem(4096, 4096, 4096)
    huge = [space.cfg(128, 256, 64, 8, 20), space.cfg(64, 64, 64, 4, 40), space.cfg(128, 128, 64, 8, 20)]
    assert space.prune(huge, p, tma_store=False) == [huge[1]]


def test_adapt_refuses_what_cannot_run_here_and_entries_of_another_format():
    """None (so the next entry, or the heuristic, decides) for a tile past shared memory, a t05 tile
    of the other MMA form (swapped where p is not TF32 with a row-major B, or not where it is), and an
    entry whose configuration is not one this version reads."""
    p = _problem(4096, 4096, 4096)
    assert space.adapt(space.T02, p, space.cfg(128, 256, 64, 8, 10)) is None  # 480 KB of stages
    assert space.adapt(space.T02, p, space.cfg(128, 256, 64, 8, 3)) is not None
    plain, swapped = space.t05_cfg(128, 256, 64, 3), space.t05_cfg(256, 128, 32, 4, 4, swap=True)
    tf32 = _problem(4096, 4096, 4096, torch.float32)
    assert space.adapt(space.T05, p, plain) == plain and space.adapt(space.T05, p, swapped) is None
    assert space.adapt(space.T05, tf32, swapped) == swapped and space.adapt(space.T05, tf32, plain) is None
    assert space.adapt(space.T02, p, dict(space.cfg(64, 64, 64, 4, 4), BM=None)) is None
    assert space.adapt(space.T06, _problem(1, 4096, 4096), dict(BN="wide", BK=1024, num_warps=4)) is None
    assert space.adapt(space.T02, p, {"BM": 64}) is None


def test_a_wave_fitted_tile_that_ties_the_standard_one_is_not_taken():
    """t05_fits_waves asks for less time than the standard tile's: one 192×192 tile (384 rows and
    columns a k-step) against two 128×256 ones in one wave (the same) is a tie, not a fit."""
    from unittest import mock

    with mock.patch.object(P, "num_sms", return_value=132):
        assert not space.t05_fits_waves(_problem(192, 192, 1024), space.t05_cfg(192, 192, 64, 4, 1, 3))
        assert space.t05_fits_waves(_problem(192, 128, 1024), space.t05_cfg(192, 128, 64, 4, 1, 3))


def test_the_waves_note_advises_tuning_only_a_quarter_of_the_sms_emptier():
    """216 tiles of 192×128, 82% full, against 256 at the entry's shape, 97%: the waves, no advice."""
    from unittest import mock

    fitted = dict(BM=192, BN=128, BK=64, STAGES=4, SPLIT=1, CONSUMERS=3, GROUP_M=8)
    with mock.patch.object(P, "num_sms", return_value=132):
        said = space.waves_note(_problem(1536, 3456, 2560), space.T05, fitted, (1536, 4096, 2560))
    assert "here 216, 1.64 waves" in said and "tilegemm tune" not in said, said


# ---- a CUDA device stood in for on the CPU: the lookups that read the user's cache and the database ----


class _OnCuda(torch.Tensor):
    """A CPU tensor that says it lives on cuda:0 (the lookups ask only its device, shape and strides)."""

    @property
    def device(self):
        return torch.device("cuda", 0)


def _on_cuda(monkeypatch, m, n, k, dt=torch.bfloat16, b_t=False):
    monkeypatch.setitem(P._DEV, 0, (132, (9, 0), "NVIDIA H200"))
    p = _problem(m, n, k, dt, b_t)
    return P.Problem(*(x.as_subclass(_OnCuda) for x in (p.a, p.b, p.c)), p.precision)


@pytest.mark.parametrize("value", ["junk", [1], 5])
def test_an_entry_of_the_users_cache_that_is_not_an_object_is_a_warning_not_a_crash(value, monkeypatch):
    """A hand-edited tuning cache whose entry for a shape is not a JSON object: the shape takes the
    database, with a warning (it was AttributeError on every call of that shape's bucket)."""
    from tilegemm import tuning

    p = _on_cuda(monkeypatch, 4096, 4096, 4096)
    os.makedirs(cache.cache_dir(), exist_ok=True)
    for key in (cache.decision_key(p, "NVIDIA H200"), cache.tune_key(space.T02, p)):
        with open(cache.cache_path(), "w") as f:
            json.dump({key: value}, f)
        cache.reset()
        with pytest.warns(RuntimeWarning, match="ignoring entry"):
            d = tuning.choose(p, "auto" if key.startswith("auto|") else space.T02)
        assert "shipped database" in d.source, d


def test_an_entry_of_the_users_cache_with_a_shape_that_is_not_one_is_still_explained(monkeypatch):
    from tilegemm import dispatch

    p = _on_cuda(monkeypatch, 4096, 4096, 4096)
    t02 = space.cfg(128, 128, 64, 8, 3)
    cache.store_entry(cache.decision_key(p, "NVIDIA H200"), dict(rung=space.T02, config=t02, ms=1.0, shape="abc"))
    rung, said = dispatch.explain_problem(p)  # was TypeError in the waves note
    assert rung == space.T02 and "your tuning cache" in said[1], said


def test_autotune_force_retunes_what_the_users_cache_holds(monkeypatch):
    """TILEGEMM_AUTOTUNE=force: "retune" (tilegemm.env), once a process; it took the cached decision."""
    from tilegemm import tuning
    from tilegemm.tuning import tuner

    p = _on_cuda(monkeypatch, 4096, 4096, 4096)
    t02 = space.cfg(128, 128, 64, 8, 3)
    key = cache.decision_key(p, "NVIDIA H200")
    cache.store_entry(key, dict(rung=space.T02, config=t02, ms=1.0, shape=[4096] * 3))
    tuned = []

    def tune(q):
        tuned.append(q)
        d = cache.Decision(space.T02, t02, "tuned on this GPU (your tuning cache)", 0.5)
        cache.store_entry(cache.decision_key(q, "NVIDIA H200"), cache.record(q, d))
        cache.retuned(cache.decision_key(q, "NVIDIA H200"))
        return d

    monkeypatch.setattr(tuner, "tune", tune)
    monkeypatch.setenv("TILEGEMM_AUTOTUNE", "1")
    assert "your tuning cache" in tuning.choose(p).source and not tuned
    tuning._MEMO.clear()
    monkeypatch.setenv("TILEGEMM_AUTOTUNE", "force")
    assert tuning.choose(p).source == "tuned now (TILEGEMM_AUTOTUNE=1)" and len(tuned) == 1
    tuning._MEMO.clear()  # once a process: what it tuned stands
    assert "your tuning cache" in tuning.choose(p).source and len(tuned) == 1


def test_autotune_force_retunes_each_rung_and_verdict_once_a_process(monkeypatch):
    """The rungs' own tunings and the t03/t05 verdict under TILEGEMM_AUTOTUNE=force (the test
    above stands in for tuner.tune whole, so it holds nothing of these): the cached entry is not
    taken the first time in the process (the tuning starts: trial_problem), and is after it."""
    from tilegemm.tuning import tuner

    class Tuning(Exception):
        pass

    p = _on_cuda(monkeypatch, 4096, 4096, 4096)
    t02 = dict(config=space.cfg(128, 128, 64, 8, 3), ms=1.0, score_ms=1.0, m=4096, n=4096, k=4096)
    t03 = dict(t02, config=space.cfg(128, 256, 64, 8, 3))
    cache.store_entry(cache.tune_key(space.T02, p), t02)
    tuned = [(space.T03, t03), (space.T02, t02)]
    configs = {r: e["config"] for r, e in tuned}
    cache.store_entry(cache.tune_key(f"{space.T03}+{space.T02}", p),
                      dict(winner=space.T02, ms={space.T03: 2.0, space.T02: 1.0}, configs=configs))
    monkeypatch.setattr(tuner, "trial_problem", lambda q: (_ for _ in ()).throw(Tuning()))
    monkeypatch.setenv("TILEGEMM_AUTOTUNE", "1")
    assert tuner.tune_rung(space.T02, p, candidates=[]) == t02 and tuner._settled(p, tuned)[0] == space.T02
    monkeypatch.setenv("TILEGEMM_AUTOTUNE", "force")
    for again in (lambda: tuner.tune_rung(space.T02, p, candidates=[]), lambda: tuner._settled(p, tuned)):
        with pytest.raises(Tuning):  # tuned again, not the cached entry
            again()
    assert tuner.tune_rung(space.T02, p, candidates=[]) == t02  # once a process
    assert tuner._settled(p, tuned)[0] == space.T02


def test_explain_takes_a_host_operand_in_the_layout_matmul_copies_it_in(monkeypatch):
    """x @ W.t() of host operands: matmul's copy keeps W.t()'s column-major strides (to_torch_cuda,
    `.cuda()`), and the layout is part of the configuration's class (1024×1024×4096 BF16 on the H200:
    nn's entry 8 stages, nt's 6). explain took a row-major stand-in, so named nn's configuration."""
    import numpy as np

    from tilegemm import api, arrays

    W = torch.empty(1024, 4096, dtype=torch.bfloat16)
    Wn = np.zeros((1024, 4096), np.float16)
    for x in (W.t(), Wn.T, W, Wn[:, ::2]):
        twin = api._as_matmul_takes(arrays.describe(x, "b"), device="meta")
        copied = (x if isinstance(x, torch.Tensor) else torch.from_numpy(x)).to("meta")  # what .cuda() keeps
        assert twin.shape == copied.shape and twin.stride() == copied.stride() and twin.dtype == copied.dtype


def test_explain_stands_in_for_a_host_operand_without_copying_its_values():
    """A read-only, reversed or byte-swapped NumPy operand: host_view copies it for matmul; explain's
    stand-in has that copy's layout but copies nothing (it read and copied all of the values, where
    its docstring says it does not)."""
    import tracemalloc

    import numpy as np

    from tilegemm import api, arrays

    base = np.zeros((512, 768), np.float16)
    ro = base.copy()
    ro.flags.writeable = False
    for x in (ro, base[:, ::-1], base.T[::-1], base.astype(">f2"), base.astype(">f2").T, base.astype(">f2")[:, ::2]):
        X = arrays.describe(x, "b")
        twin = api._as_matmul_takes(X, device="meta")
        copied = torch.from_numpy(arrays.host_view(X, torch_ok=True)).to("meta")  # what to_torch_cuda moves
        assert (twin.shape, twin.stride(), twin.dtype) == (copied.shape, copied.stride(), copied.dtype)
    big = np.zeros((4096, 4096), np.float16)  # 32 MiB
    big.flags.writeable = False
    tracemalloc.start()
    try:
        api._as_matmul_takes(arrays.describe(big, "b"), device="meta")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2**20, peak


def _shipped_folder(tmp_path, monkeypatch, files: dict):
    folder = tmp_path / "pkg"
    (folder / "data" / "tuning").mkdir(parents=True)
    for name, data in files.items():
        (folder / "data" / "tuning" / name).write_text(data if isinstance(data, str) else json.dumps(data))
    monkeypatch.setattr(shipped.resources, "files", lambda pkg: folder)
    shipped.forget()


def test_a_shipped_database_that_is_not_one_is_left_out_and_its_bad_entries_dropped(tmp_path, monkeypatch):
    from tilegemm import tuning

    good = dict(rung=space.T02, config=space.cfg(128, 128, 64, 8, 3), ms=1.0, shape=[4096] * 3)
    bf = "bf16|bfloat16|bfloat16|nn|nobeta"
    _shipped_folder(tmp_path, monkeypatch, {
        "nvidia-h100-80gb-hbm3.json": [],
        "nvidia-h200.json": dict(gpu="NVIDIA H200", capability=[9, 0], sms=132, entries={
            f"{bf}|4096x4096x4096": good, f"{bf}|2048x4096x4096": "junk", f"{bf}|4096x4096": good})})
    with pytest.warns(RuntimeWarning) as said:
        dbs = shipped.databases()
    assert list(dbs) == ["nvidia-h200"] and list(dbs["nvidia-h200"]["entries"]) == [f"{bf}|4096x4096x4096"]
    assert any("ignored (a JSON list" in str(w.message) for w in said)
    p = _on_cuda(monkeypatch, 2048, 4096, 4096)
    assert tuning.choose(p).rung == space.T02  # was AttributeError / ValueError on every call


def test_the_known_gpu_most_like_an_unknown_one_does_not_hang_on_the_folders_order(monkeypatch):
    dbs = {"nvidia-h200": dict(gpu="NVIDIA H200", capability=[9, 0], sms=132, entries={}),
           "nvidia-h100-80gb-hbm3": dict(gpu="NVIDIA H100 80GB HBM3", capability=[9, 0], sms=132, entries={})}
    got = set()
    for order in (list(dbs), list(dbs)[::-1]):  # GH200: as many SMs as both, a name as near to each
        monkeypatch.setattr(shipped, "_DBS", {k: dbs[k] for k in order})
        got.add(shipped.database_for("NVIDIA GH200 480GB", (9, 0), 132)[0]["gpu"])
    assert len(got) == 1, got


@pytest.mark.parametrize("layouts", ["T", "nt", "col", "n,x"])
def test_tune_refuses_a_layout_it_does_not_know_before_it_tunes(layouts, capsys, monkeypatch):
    """--layouts T (or nt, col) tuned B row-major, saying nothing."""
    from tilegemm import cli
    from tilegemm.tuning import command, tuner

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(command, "device_facts", lambda: dict(gpu="NVIDIA H200", tuner=cache.TUNER_VERSION))
    monkeypatch.setattr(tuner, "tune", lambda p: pytest.fail("tuned a layout it does not know"))
    monkeypatch.setattr(command, "problem", lambda *a: pytest.fail("tuned a layout it does not know"))
    assert cli.main(["tune", "--sizes", "64", "--dtypes", "bf16", "--layouts", layouts, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "unknown layout" in err and len(err.strip().splitlines()) == 1, err


_T02 = dict(config=space.cfg(128, 128, 64, 8, 3), ms=0.2, m=4096, n=4096, k=4096)


def _rung_key(bucket="4096x4096x4096", rung=space.T02):
    return f"{rung}|NVIDIA H200|bf16|bfloat16|bfloat16|nn|nobeta|{bucket}||{cache.TUNER_VERSION}"


@pytest.mark.parametrize("more", [
    {_rung_key("2048x4096x4096"): None},  # was AttributeError with its traceback
    {_rung_key(rung=f"{space.T02}+{space.T04}"): 3},  # a verdict that is not one: was AttributeError
    {_rung_key(rung=f"{space.T02}+{space.T04}"): dict(winner=space.T02)},  # was "tilegemm tune: configs"
    {_rung_key(rung=f"{space.T02}+{space.T04}"): dict(winner=[space.T02], configs={}, ms={})},  # TypeError
    {_rung_key("2048x4096x4096"): dict(ms="fast", config={})},  # was written into the database
    {_rung_key("2048x4096"): _T02},  # no bucket: was written, then a ValueError on every lookup
])
def test_derive_takes_the_tunings_of_a_hand_edited_cache_and_leaves_what_is_not_one(more, tmp_path, capsys):
    rc, out, err, written = _derive(capsys, tmp_path, json.dumps({_rung_key(): _T02, **more}))
    assert rc == 0 and written and not err, err
    entries = json.loads((tmp_path / "db.json").read_text())["entries"]
    assert list(entries) == ["bf16|bfloat16|bfloat16|nn|nobeta|4096x4096x4096"], entries


@pytest.mark.parametrize("db, says", [
    ({_rung_key(): _T02}, "not a tuning database"),  # a tuning cache: was merged into
    ({"name": "my-project"}, "not a tuning database"),
    (dict(gpu="NVIDIA H100 80GB HBM3", entries={}, simt={}), "the tuning database of NVIDIA H100 80GB HBM3, not of"),
])
def test_derive_refuses_a_db_of_something_else_or_of_another_gpu_and_leaves_it(db, says, tmp_path, capsys):
    (tmp_path / "db.json").write_text(text := json.dumps(db))
    rc, out, err, _ = _derive(capsys, tmp_path, json.dumps({_rung_key(): _T02}))
    assert rc == 2 and says in err and len(err.strip().splitlines()) == 1, err
    assert (tmp_path / "db.json").read_text() == text


def test_a_negative_candidate_count_is_a_config_error(monkeypatch):
    from tilegemm.errors import ConfigError
    from tilegemm.tuning import tuner

    monkeypatch.setenv("TILEGEMM_TUNE_MAX_CANDIDATES", "-3")  # was taken as 0: all of them
    with pytest.raises(ConfigError, match="of 0 or more"):
        tuner.max_candidates()
    monkeypatch.setenv("TILEGEMM_TUNE_MAX_CANDIDATES", "0")
    assert tuner.max_candidates() is None
    for value in ("inf", "-inf", "1e999"):  # (--budget-s refuses inf; the setting took it: every candidate timed)
        monkeypatch.setenv("TILEGEMM_TUNE_BUDGET_S", value)
        with pytest.raises(ConfigError, match="use a finite number above 0"):
            tuner.budget_s()


@pytest.mark.parametrize("shape", [(64, 8, 4096), (1024, 4, 8192), (3000, 1, 777)])
def test_a_split_k_winner_where_no_tile_fits_n_is_what_the_next_call_gets(shape, monkeypatch):
    """N ≤ 8 (a MoE router's x @ W_gate): no t04 tile fits N, so the tuner times t04's default;
    adapt refused that same tile for that same shape, and the tuned decision in the user's cache was
    passed over for the database's (or the heuristic's, memoised never: chosen again every call)."""
    from tilegemm import tuning
    from tilegemm.tuning import tuner

    p = _on_cuda(monkeypatch, *shape)
    first = space.candidates(space.T04, p)[0]
    assert space.adapt(space.T04, p, first) == first
    won = dict(config=first, ms=0.01, score_ms=0.01, m=p.m, n=p.n, k=p.k)
    monkeypatch.setattr(tuner, "_tuned", lambda rungs, q: ([(space.T04, won)], {}))
    tuner.tune(p)
    cache.reset()
    d = tuning.choose(p)
    assert d.rung == space.T04 and d.config == first and "your tuning cache" in d.source, d


@pytest.mark.parametrize("var, value", [("TILEGEMM_TUNE_BUDGET_S", "abc"), ("TILEGEMM_TUNE_MAX_CANDIDATES", "x")])
def test_a_tuning_setting_that_is_not_understood_is_said_not_taken_as_nothing_tuned(var, value, capsys, monkeypatch):
    """Each rung's tuning caught the ConfigError as its own failure: `tilegemm tune` said 'no
    configuration ran' for every shape, exit 0, and TILEGEMM_AUTOTUNE=1 silently tuned nothing."""
    from tilegemm import cli
    from tilegemm.errors import ConfigError
    from tilegemm.tuning import command, tuner

    monkeypatch.setenv(var, value)
    with pytest.raises(ConfigError, match=var):
        tuner.tune(_on_cuda(monkeypatch, 4096, 4096, 4096))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(command, "device_facts", lambda: dict(gpu="NVIDIA H200", tuner=cache.TUNER_VERSION))
    monkeypatch.setattr(command, "problem", lambda *a: pytest.fail("tuned with a setting it does not understand"))
    assert cli.main(["tune", "--sizes", "64", "--dtypes", "bf16", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert var in err and len(err.strip().splitlines()) == 1, err
    monkeypatch.delenv(var)  # (set, it is refused first, before the arguments: env.check)
    assert cli.main(["tune", "--sizes", "64", "--dtypes", ",", "--quiet"]) == 2  # (was 'tuned 0 of 0', exit 0)
    assert "names none" in capsys.readouterr().err


def test_tune_from_cache_ships_decisions_only(tmp_path, capsys, monkeypatch):
    """A hand-edited cache's 'auto|…' entry that is not a decision (no rung or configuration, no
    bucket) was copied into the database, which then warned in every process that loaded it."""
    from tilegemm import cli
    from tilegemm.tuning import command

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(command, "device_facts", lambda: dict(gpu="NVIDIA H200", tuner=cache.TUNER_VERSION))
    good = "bf16|bfloat16|bfloat16|nn|nobeta|4096x4096x4096"
    v = cache.TUNER_VERSION
    monkeypatch.setattr(cache, "_user", lambda: {
        f"auto|NVIDIA H200|{good}|{v}": dict(rung="tc_persistent", config={"BM": 128}, ms=0.1),
        f"auto|NVIDIA H200|bf16|bfloat16|bfloat16|nn|nobeta|2048x2048x2048|{v}": dict(ms=0.1),
        f"auto|NVIDIA H200|handedited|{v}": dict(rung="tc_persistent", config={})})
    db = tmp_path / "db.json"
    assert cli.main(["tune", "--from-cache", "--db", str(db)]) == 0
    assert list(json.loads(db.read_text())["entries"]) == [good]


def test_a_write_that_fails_leaves_no_temporary_file(tmp_path):
    os.makedirs(tmp_path / "tuning.json")  # (a folder where the file goes: os.replace fails)
    for _ in range(3):
        with pytest.raises(OSError):
            cache.write_json(str(tmp_path / "tuning.json"), {"k": 1}, replace=True)
    assert os.listdir(tmp_path) == ["tuning.json"]


def test_two_processes_writing_k11s_cache_at_once_lose_nothing(tmp_path):
    """k11's autotune.json was read, updated and written back without the tuning cache's lock:
    three writers of 100 winners each kept about half of them."""
    code = textwrap.dedent("""
        import sys, time
        from tilegemm.kernels.simt import k11_autotuned as k11
        who, start = sys.argv[1], float(sys.argv[2])
        while time.time() < start:
            pass
        for i in range(100):
            k11._write_cache(f"{who}-{i}", {"winner": {}})
    """)
    import time

    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""),
               TILEGEMM_CACHE_DIR=str(tmp_path / "shared"))
    start = str(time.time() + 5)  # (after every interpreter's imports: the writes overlap)
    procs = [subprocess.Popen([sys.executable, "-c", code, who, start], env=env) for who in "abc"]
    assert all(p.wait(timeout=120) == 0 for p in procs)
    data = json.load(open(tmp_path / "shared" / "autotune.json"))
    assert {f"{w}-{i}" for w in "abc" for i in range(100)} <= set(data)


@pytest.mark.parametrize("entry", [dict(ms=1.0), dict(ms="fast", config={}), dict(ms=1.0, config="x")])
def test_a_rung_tuning_of_a_hand_edited_cache_is_tuned_again_not_a_crash(entry, monkeypatch):
    """TILEGEMM_AUTOTUNE=1 with a rung's cached tuning that has no configuration (or an 'ms' that is
    no number): a KeyError or TypeError in the tuner, on every call of its bucket."""
    from tilegemm import tuning
    from tilegemm.tuning import tuner

    p = _on_cuda(monkeypatch, 4096, 4096, 4096)
    os.makedirs(cache.cache_dir(), exist_ok=True)
    with open(cache.cache_path(), "w") as f:
        json.dump({cache.tune_key(r, p): entry for r in tuning.usable_rungs(p)}, f)
    cache.reset()
    monkeypatch.setattr(tuner, "trial_problem", lambda q: (_ for _ in ()).throw(RuntimeError("tuned again")))
    monkeypatch.setenv("TILEGEMM_AUTOTUNE", "1")
    with pytest.warns(RuntimeWarning, match="ignoring entry"):
        d = tuning.choose(p)
    assert "shipped database" in d.source, d  # (each rung tuned again, here in vain: the database's)


def test_a_cache_folder_from_the_home_folder_is_there_not_a_folder_named_tilde(monkeypatch):
    monkeypatch.setenv("TILEGEMM_CACHE_DIR", "~/tilegemm-cache")  # (quoted: no shell expanded it)
    assert cache.cache_dir() == os.path.join(os.path.expanduser("~"), "tilegemm-cache")


@pytest.mark.parametrize("kernel", ["auto", space.T03])
def test_explain_under_autotune_times_nothing_and_the_call_still_tunes(kernel, monkeypatch):
    """explain "runs nothing" (README), yet under TILEGEMM_AUTOTUNE=1 it tuned the bucket (tens of
    seconds a rung on a GPU, on operands never filled, written to the user's cache). It says what
    the first call will do instead, and keeps nothing: the call that runs the shape still tunes it."""
    from tilegemm import dispatch, tuning
    from tilegemm.tuning import tuner

    p = _on_cuda(monkeypatch, 4096, 4096, 4096)
    cache.reset()
    monkeypatch.setenv("TILEGEMM_AUTOTUNE", "1")
    timed, cfg = [], space.candidates(space.T03, p)[0]
    monkeypatch.setattr(tuner, "tune", lambda q: timed.append("tune") or cache.Decision(space.T03, cfg, "x"))
    monkeypatch.setattr(tuner, "tune_rung", lambda r, q: timed.append(r) or dict(config=cfg, ms=0.1))
    rung, said = dispatch.explain_problem(p, kernel)
    assert not timed and "the first call tunes this bucket" in said[1], said
    assert dispatch.explain_problem(p, kernel)[1] == said and not timed  # (again: nothing kept, nothing timed)
    d = tuning.choose(p, kernel)
    assert timed and d.source == "tuned now (TILEGEMM_AUTOTUNE=1)", (timed, d)
    assert "tuned now" in dispatch.explain_problem(p, kernel)[1][1]  # (the call's decision, now this process's)
