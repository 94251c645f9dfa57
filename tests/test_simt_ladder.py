"""The SIMT ladder from k05 on: exact and random checks under the simulator (tiny shapes that still
reach both the unguarded interior path and the guarded edge path), the SASS tool, and GPU-sized
checks marked `gpu`."""

import numpy as np
import pytest

import tilegemm._cuda as _cuda
from tilegemm import registry
from tilegemm.validate import check, integer_operands, poison, random_operands

# name -> (BM, BN) block tile, so the shapes below can be checked to reach the interior path
LADDER = {
    "interior_fastpath": (64, 64),
    "block_tiling_2d": (128, 128),
    "smem_transposed": (128, 128),
    "vectorized": (128, 128),
    "double_buffer": (128, 128),
    "warptile": (128, 128),
    "autotuned": (128, 128),  # k10's default tile unless a cached winner says otherwise
    "splitk_tiles": (32, 128),  # k13 at M ≤ 32 (no split at these K: the slices would be too short)
}


@pytest.fixture(autouse=True)
def _private_autotune_cache(tmp_path, monkeypatch):
    """k11 must not read or write the user's cache from the tests."""
    from tilegemm.kernels.simt import k11_autotuned as k11

    monkeypatch.setenv("TILEGEMM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TILEGEMM_AUTOTUNE", "0")  # no search inside unrelated tests (on a GPU it would)
    k11._chosen.clear()
    yield
    k11._chosen.clear()


def run(name, a, b):
    cuda = _cuda.cuda
    k = registry.get(name)
    da, db = cuda.to_device(a), cuda.to_device(b)
    dc = cuda.device_array((a.shape[0], b.shape[1]), dtype=a.dtype)
    poison(dc)
    k.launch(da, db, dc)
    cuda.synchronize()
    return dc.copy_to_host()


def interior_shape(name):
    """Smallest shape with one full interior block, a K tail, and right/bottom edge blocks;
    N and K multiples of 4 so the vectorized rungs take their 16-byte path."""
    bm, bn = LADDER[name]
    return bm + 1, bn + 4, 20


def test_registered_in_order():
    ks = [registry.get(n) for n in LADDER]
    assert [k.rung for k in ks] == sorted(k.rung for k in ks)
    assert all(k.backend == "simt" and k.auto_rank > registry.get("register_blocked").auto_rank for k in ks)
    assert [k.auto_rank for k in ks] == sorted(k.auto_rank for k in ks)
    for k in ks:
        assert "float32" in k.dtypes and k.jit_kernels is not None
        doc = k.doc
        assert "Changes against" in doc and "intensity" in doc, k.name


@pytest.mark.parametrize("name", list(LADDER))
@pytest.mark.parametrize("shape", [(1, 1, 1), (5, 23, 7), (17, 33, 65)])
def test_small_awkward_exact(name, shape):
    a, b = integer_operands(*shape, seed=sum(shape))
    c = run(name, a, b)
    assert np.array_equal(c, (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)), name


@pytest.mark.parametrize("name", list(LADDER))
def test_interior_and_edges(name):
    m, n, k = interior_shape(name)
    a, b = random_operands(m, n, k, seed=7)
    r = check(run(name, a, b), a, b, kernel=name)
    assert r.ok, str(r)
    ai, bi = integer_operands(m, n, k, seed=8)
    assert np.array_equal(run(name, ai, bi), ai.astype(np.float64) @ bi.astype(np.float64))


@pytest.mark.parametrize("name", ["interior_fastpath", "block_tiling_2d", "smem_transposed"])
def test_float64(name):
    a, b = random_operands(9, 70, 17, dtype="float64", seed=3)
    r = check(run(name, a, b), a, b, kernel=name)
    assert r.ok, str(r)


def test_vectorized_takes_vector_path_and_falls_back(monkeypatch):
    from tilegemm.kernels.simt import k07_smem_transposed as k07
    from tilegemm.kernels.simt import k08_vectorized as k08

    calls = []
    real = k07.launch
    monkeypatch.setattr(k07, "launch", lambda *a, **kw: (calls.append(1), real(*a, **kw))[1])
    a, b = integer_operands(6, 8, 12, seed=1)  # K, N multiples of 4: 16-byte path
    assert np.array_equal(run("vectorized", a, b), a.astype(np.float64) @ b.astype(np.float64))
    assert calls == []
    a, b = integer_operands(6, 9, 12, seed=2)  # N odd: rows of B misaligned -> k07's kernel
    assert np.array_equal(run("vectorized", a, b), a.astype(np.float64) @ b.astype(np.float64))
    assert calls == [1]
    host = np.zeros((8, 8), np.float32)
    shifted = np.zeros(65, np.float32)[1:].reshape(8, 8)  # data pointer 4 bytes past alignment
    assert k08.vector_ok(host, host, host) and not k08.vector_ok(shifted, host, host)


def test_warptile_other_config_exact():
    from tilegemm.kernels.simt import k10_warptile as k10

    cfg = k10.Config(64, 64, 8, 32, 32, min_blocks=0, unroll=2)  # 128 threads, 4×8 per thread
    cuda = _cuda.cuda
    a, b = integer_operands(65, 68, 20, seed=4)
    dc = cuda.device_array((65, 68), dtype=np.float32)
    poison(dc)
    k10.launch_config(cfg, cuda.to_device(a), cuda.to_device(b), dc)
    assert np.array_equal(dc.copy_to_host(), a.astype(np.float64) @ b.astype(np.float64))


def test_warptile_config_checks():
    from tilegemm.kernels.simt.k10_warptile import Config

    Config().check()
    for bad, why in ((Config(96, 128, 8, 64, 32), "multiples of WM"), (Config(128, 128, 6, 64, 32), "whole float4s"),
                     (Config(128, 128, 8, 48, 32), "WM must be a multiple of 32"), (Config(unroll=3), "unroll must")):
        with pytest.raises(ValueError, match=why):  # (each its own rule: another rule's error proves nothing of it)
            bad.check()


def test_autotune_search_cache_and_modes(monkeypatch, tmp_path):
    import json

    from tilegemm.kernels.simt import k10_warptile as k10
    from tilegemm.kernels.simt import k11_autotuned as k11

    good = [k10.Config(64, 64, 8, 32, 32), k10.Config(64, 64, 16, 32, 32)]
    bad = k10.Config(96, 128, 8, 64, 32)  # tiles do not split over the warps: must be rejected
    res = k11.autotune(candidates=[bad] + good, shape=(40, 36, 16), check_shape=(9, 12, 8), reps=1,
                       budget_s=1e9)
    assert [r["ok"] for r in res["results"]] == [False, True, True]
    assert "ValueError" in res["results"][0]["error"]
    assert k10.Config(**res["winner"]) in good
    with open(k11.cache_path()) as f:
        entry = json.load(f)[k11.cache_key("float32")]
    assert entry["winner"] == res["winner"]
    for mode in ("0", "1"):  # a cached winner is used whether or not calls may search
        k11._chosen.clear()
        monkeypatch.setenv("TILEGEMM_AUTOTUNE", mode)
        assert k11.current_config() == k10.Config(**res["winner"])  # read back from the cache
    k11._chosen.clear()
    monkeypatch.delenv("TILEGEMM_AUTOTUNE")
    monkeypatch.setenv("TILEGEMM_CACHE_DIR", str(tmp_path / "empty"))
    # nothing cached and no search: the shipped database's winner for this GPU (none for the simulator) or k10's
    assert k11.current_config() == (k11.shipped_config("float32") or k10.DEFAULT)
    monkeypatch.setenv("TILEGEMM_CACHE_DIR", str(tmp_path / "cache"))
    k11._chosen.clear()
    a, b = integer_operands(70, 72, 12, seed=9)  # launch with the cached (64-tile) winner
    assert np.array_equal(run("autotuned", a, b), a.astype(np.float64) @ b.astype(np.float64))


@pytest.mark.parametrize("kernel", ["autotuned", "skinny_m"])  # (k12 runs k11 above 128 rows)
def test_explain_refuses_the_autotune_setting_matmul_refuses(kernel, monkeypatch):
    """TILEGEMM_AUTOTUNE=maybe: matmul on k11 raised ConfigError, and explain, which never read it,
    explained the product as usual."""
    import tilegemm
    from tilegemm.errors import ConfigError

    monkeypatch.setenv("TILEGEMM_AUTOTUNE", "maybe")
    a, b = np.ones((200, 8), np.float32), np.ones((8, 4), np.float32)
    for call in (tilegemm.explain, tilegemm.matmul):
        with pytest.raises(ConfigError, match="TILEGEMM_AUTOTUNE='maybe'"):
            call(a, b, kernel=kernel)


def test_explain_names_k11s_configuration_and_its_source_and_pins_nothing(monkeypatch):
    """explain on k11 said nothing of its configuration; it names the one the launch then takes,
    and where it comes from (the cache here), without choosing it for the process."""
    import json
    import os

    import tilegemm
    from tilegemm.kernels.simt import k10_warptile as k10
    from tilegemm.kernels.simt import k11_autotuned as k11

    winner = k10.Config(64, 64, 16, 32, 32, min_blocks=0)
    os.makedirs(os.path.dirname(k11.cache_path()), exist_ok=True)
    with open(k11.cache_path(), "w") as f:
        json.dump({k11.cache_key("float32"): {"winner": dict(vars(winner))}}, f)
    a, b = integer_operands(8, 12, 16, seed=2)
    said = tilegemm.explain(a, b, kernel="autotuned")
    assert f"k11's configuration {winner}: the tuning cache" in said and not k11._chosen
    used = []
    real = k10.launch_config
    monkeypatch.setattr(k10, "launch_config", lambda cfg, *args: (used.append(cfg), real(cfg, *args))[1])
    assert np.array_equal(tilegemm.matmul(a, b, kernel="autotuned"), a @ b) and used == [winner]
    assert "chosen earlier in this process" in tilegemm.explain(a, b, kernel="autotuned")
    monkeypatch.setenv("TILEGEMM_AUTOTUNE", "maybe")  # (a launch reads no setting once it has chosen: nor does explain)
    assert str(winner) in tilegemm.explain(a, b, kernel="autotuned")


def test_k11_asked_without_a_search_pins_nothing_a_launch_would_search_for(monkeypatch):
    """current_config(tune=False) (traffic, resource tables) pinned the shipped winner for the
    process under TILEGEMM_AUTOTUNE=1 on a GPU with nothing cached: the first launch then never
    searched."""
    from tilegemm.kernels.simt import k10_warptile as k10
    from tilegemm.kernels.simt import k11_autotuned as k11

    shipped, found = k10.Config(64, 64, 8, 32, 32), k10.Config(64, 128, 8, 32, 64, min_blocks=0)
    monkeypatch.setattr(_cuda, "has_gpu", lambda: True)
    monkeypatch.setattr(k11, "shipped_config", lambda dtype="float32": shipped)
    monkeypatch.setattr(k11, "gpu_name", lambda: "a GPU")  # (its cache: empty)
    searched = []
    monkeypatch.setattr(k11, "autotune", lambda *a, **kw: searched.append(kw) or {"winner": dict(vars(found))})
    monkeypatch.setenv("TILEGEMM_AUTOTUNE", "1")
    assert k11.current_config(tune=False) == shipped and not searched and not k11._chosen
    assert k11.choice()[0] is None  # (explain: a search at the first launch)
    assert k11.current_config() == found and len(searched) == 1


# ---------------------------------------------------------------------------------------------
# the SASS tool

SASS_SAMPLE = """
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0010*/                   LDG.E.128 R4, desc[UR4][R2.64] ;
        /*0020*/               @P0 LDG.E R8, desc[UR4][R2.64] ;
        /*0030*/                   STS.128 [R0], R4 ;
        /*0040*/                   LDS.128 R12, [R0+0x100] ;
        /*0050*/                   LDS R16, [R0] ;
        /*0060*/                   FFMA R20, R12, R16, R20 ;
        /*0070*/              @!P1 FFMA R21, R13, R16, R21 ;
        /*0080*/                   STL [R1], R20 ;
        /*0090*/                   STG.E.128 desc[UR4][R2.64], R20 ;
"""


def test_sass_census():
    from tilegemm.bench.sass import sass_census

    c = sass_census(SASS_SAMPLE)
    assert c["FFMA"] == 2 and c["STL"] == 1 and c["LDL"] == 0
    assert c["LDG"] == {"128": 1, "32": 1} and c["LDS"] == {"128": 1, "32": 1}
    assert c["STS"] == {"128": 1} and c["STG"] == {"128": 1} and c["instructions"] == 10


def test_occupancy():
    from tilegemm.bench.sass import occupancy

    assert occupancy(256, 128, 8192)["blocks_per_sm"] == 2
    o = occupancy(256, 130, 8192)  # 136 allocated -> 15 warps' worth of registers -> one block
    assert o["blocks_per_sm"] == 1 and o["limited_by"] == "registers"
    assert occupancy(1024, 32, 0)["blocks_per_sm"] == 2  # threads
    assert occupancy(128, 32, 100 * 1024)["limited_by"] == "shared memory"


def _have_offline_tools():
    from tilegemm.bench.sass import _tool

    return _tool("ptxas") and _tool("nvdisasm")


def test_splitk_plan_follows_the_wave_model():
    """k13 takes 17 rows and more where its wave model rates a split or small tile faster than
    k11's grid, never into slices shorter than MIN_SLICE; k12 splits K to fill the resident slots
    once, never into a nearly empty second round."""
    from tilegemm.kernels.simt import k12_skinny_m as k12
    from tilegemm.kernels.simt import k13_splitk_tiles as k13

    assert k13.plan(16, 4096, 4096, sms=132) is None  # k12's rows
    assert k13.plan(4096, 4096, 4096, sms=132) is None  # k11's tile, unsplit: k11 runs
    for shape in [(256, 256, 256), (32, 4096, 14336), (128, 4096, 4096), (1000, 1000, 1000), (100, 4096, 600)]:
        p = k13.plan(*shape, sms=132)
        rates = [k13.WAVES.us(*shape, t.cfg.BM, t.cfg.BN, t.per_sm, t.rate, s, 132)
                 for t in k13.TILES for s in range(1, min(k13.MAX_SPLITS, shape[2] // k13.MIN_SLICE) + 1)]
        assert p.us == min(rates) and shape[2] // p.splits >= k13.MIN_SLICE
    small = k13.plan(256, 256, 256, sms=132)
    assert small.cfg.BM <= 64 and small.splits > 1  # 16 of k11's tiles for 132 SMs: small tiles, K split
    one, two = (k13.WAVES.us(132 * 128, 128, 1024, 128, 128, 2, 1e5, 1, 132),
                k13.WAVES.us(133 * 128, 128, 1024, 128, 128, 2, 1e5, 1, 132))
    assert two > 1.5 * one  # one block past the SMs: a second round
    assert k12.plan(16, 28672, 8192, sms=132)[1] == 4  # 112 blocks: 448 of 528 slots, not 560
    assert k12.plan(16, 4096, 4096, sms=132)[1] == 32  # 16 blocks: 33 splits of 64 chunks of K round to 32 of 2


def test_split_k_zeroing_writes_every_element_of_c_and_nothing_beside_it():
    """k12.zero (run before every split grid's partial sums): a contiguous C through the flat form,
    sizes around its block's 2048 elements; a C inside a wider array (rows apart) one element a
    thread, its neighbours left as they were."""
    import numpy as np
    from numba import cuda

    from tilegemm.kernels.simt import k12_skinny_m as k12

    for m, n in ((0, 5), (1, 1), (3, 5), (1, 2048), (7, 301), (2, 2049)):
        c = cuda.to_device(np.full((m, n), 7.0, np.float32))
        k12.zero(c)
        assert not c.copy_to_host().any(), (m, n)
    wide = cuda.to_device(np.full((5, 40), 7.0, np.float32))
    k12.zero(wide[:, 3:30])
    host = wide.copy_to_host()
    assert not host[:, 3:30].any() and (host[:, :3] == 7).all() and (host[:, 30:] == 7).all()


def test_wave_model_picks_within_15_percent_of_the_fastest_measured(monkeypatch):
    """Against the committed H200 sweep (every tile × split, and k15's and k16's kernels, at the
    shapes the plans were fitted on): the form the routing picks ran within 15% of the fastest."""
    import json
    import pathlib

    from tilegemm.kernels.simt import k13_splitk_tiles as k13
    from tilegemm.kernels.simt import k15_register_budget as k15
    from tilegemm.kernels.simt import k16_big_tile as k16

    monkeypatch.setattr(k13, "sm_count", lambda: 132)  # the H200's, where the sweep ran
    doc = json.loads((pathlib.Path(__file__).parents[1] / "results/h200/simt-plans.json").read_text())
    names = {t.cfg: f"t{t.cfg.BM}x{t.cfg.BN}" for t in k13.TILES}
    checked = 0
    for spec, times in doc["results"].items():
        m, n, k = map(int, spec.split("x"))
        if m <= k13.SKINNY_ROWS or n % 4 or k % 4:
            continue
        if k16.here(m, n, k, True):
            name = "k16"
        elif k15.here(m, n, k, True):
            name = "k15"
        else:
            p = k13.plan(m, n, k, sms=132)
            name = f"{names[p.cfg]}/s{p.splits}"
        fastest = min(v for key, v in times.items() if key not in ("cublas", "auto") and not key.startswith("k12"))
        assert times[name] <= 1.15 * fastest, (spec, name, times[name], fastest)
        checked += 1
    assert checked >= 10


def test_splitk_exact_under_atomics():
    """Split K with slices that are empty, uneven and ragged at every edge: integer operands make
    every order of the atomic additions give the exact product."""
    from tilegemm.kernels.simt import k13_splitk_tiles as k13

    cuda = _cuda.cuda
    cases = [((20, 40, 36), k13.TILES[1].cfg, 5), ((20, 128, 512), None, None)]
    cases += [((33, 72, 52), t.cfg, 3) for t in k13.TILES if t is not k13.TILES[1]]  # every tile (16-byte rows)
    for shape, cfg, splits in cases:
        a, b = integer_operands(*shape, seed=7)
        da, db = cuda.to_device(a), cuda.to_device(b)
        dc = cuda.device_array((shape[0], shape[1]), dtype=a.dtype)
        poison(dc)
        if cfg is None:
            assert k13.plan(*shape).splits > 1  # the registered launch splits this one
            registry.get("splitk_tiles").launch(da, db, dc)
        else:
            k13.launch_plan(da, db, dc, cfg, splits)
        cuda.synchronize()
        want = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
        assert np.array_equal(dc.copy_to_host(), want), (shape, splits)


@pytest.mark.skipif(not _have_offline_tools(), reason="needs ptxas and nvdisasm (CUDA toolkit)")
def test_offline_sass_vectorized():
    """k08's point, proven in its SASS: 16-byte global and shared accesses, no local memory."""
    from tilegemm.bench.sass import resource_table

    rows = resource_table(["vectorized"], route="offline")
    assert rows and "error" not in rows[0], rows
    r = rows[0]
    assert r["LDG"].get("128", 0) >= 2 and r["LDS"].get("128", 0) >= 4 and r["STS"].get("128", 0) >= 1
    assert r["STG"].get("128", 0) >= 1 and r["LDL"] == 0 and r["STL"] == 0 and r["spill_store_bytes"] == 0
    assert r["FFMA"] >= 64 and r["registers"] <= 255 and r["blocks_per_sm"] >= 1


@pytest.mark.skipif(not _have_offline_tools(), reason="needs ptxas and nvdisasm (CUDA toolkit)")
def test_offline_table_in_processes_is_the_kernels_own_records():
    """The table's offline route under the simulator compiles the dispatchers in worker processes,
    several at once: the same records, in the same order, as one kernel's in a process of its own."""
    from tilegemm import _cuda, registry
    from tilegemm.bench import sass

    if not _cuda.SIMULATOR:
        pytest.skip("the processes' route is the simulator's")
    names = ["skinny_m", "vectorized"]  # two dispatchers each
    rows = sass.resource_table(names, route="offline")
    assert rows == [r for n in names for r in sass.resources(registry.get(n), route="offline")]
    assert [r["kernel"] for r in rows] == ["skinny_m"] * 2 + ["vectorized"] * 2


@pytest.mark.skipif(not _have_offline_tools(), reason="needs ptxas and nvdisasm (CUDA toolkit)")
def test_a_workers_failed_compile_is_its_jobs_error_and_the_worker_goes_on():
    """A job that fails in a worker (here a dispatcher index the kernel does not have) raises its
    error to that job alone; the same worker then compiles the next job."""
    from tilegemm import _cuda
    from tilegemm.bench import sass

    if not _cuda.SIMULATOR:
        pytest.skip("the processes' route is the simulator's")
    w = sass._Worker()
    try:
        with pytest.raises(RuntimeError, match="IndexError"):
            w.compile("naive", "float32", 7)
        rows = w.compile("naive", "float32", 0)
        assert len(rows) == 1 and rows[0]["registers"] > 0 and rows[0]["_provenance"]
        assert w.proc.poll() is None
    finally:
        w.close()
    assert w.proc.returncode == 0


def test_offline_table_in_processes_error_records(monkeypatch):
    """A kernel whose dispatchers cannot be listed, or that has none, gets one error record in its
    place, and nothing is compiled for it."""
    from tilegemm.bench import sass

    class Bad:
        name, rung = "bad", 0

        @staticmethod
        def jit_kernels(dt):
            raise RuntimeError("no kernels today")

    class Empty:
        name, rung = "empty", 0
        jit_kernels = staticmethod(lambda dt: [])

    started = []
    monkeypatch.setattr(sass, "_Worker", lambda: started.append(1))
    rows = sass._table_in_processes([Bad(), Empty()], "float32")
    assert [r["kernel"] for r in rows] == ["bad", "empty"] and all("error" in r for r in rows), rows
    assert "no kernels today" in rows[0]["error"] and started == []


# ---------------------------------------------------------------------------------------------
# on a GPU


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(LADDER))
@pytest.mark.parametrize("shape", [(1000, 1000, 1000), (1024, 1024, 1024), (257, 1029, 511), (2048, 512, 4)])
def test_gpu_sizes(name, shape):
    a, b = random_operands(*shape)
    r = check(run(name, a, b), a, b, kernel=name)
    assert r.ok, str(r)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(32, 4096, 14336), (128, 4096, 4096), (48, 1000, 3000), (100, 4096, 517),
                                   (300, 2048, 4096)])
def test_gpu_splitk_shapes(shape):
    a, b = random_operands(*shape)
    r = check(run("splitk_tiles", a, b), a, b, kernel="splitk_tiles")
    assert r.ok, str(r)


@pytest.mark.gpu
def test_gpu_resources_vectorized():
    from tilegemm.bench.sass import resource_table

    r = resource_table(["vectorized"], route="gpu")[0]
    assert "error" not in r, r
    assert r["LDG"].get("128", 0) >= 2 and r["LDS"].get("128", 0) >= 4 and r["LDL"] == 0 and r["STL"] == 0


# ---- k14: the generated, straight-line rung (not in LADDER: not chosen by auto until measured) ----


@pytest.mark.parametrize("shape", [(1, 1, 1), (5, 23, 7), (129, 132, 20), (130, 70, 33), (129, 131, 21)])
def test_unrolled_exact(shape):
    """Tiny and awkward shapes, and one with a full interior block (16-byte path), K tails and
    edge blocks, and interior blocks of an unaligned shape (N and K odd: the scalar-access
    variant); integer operands, so every sum is exact."""
    a, b = integer_operands(*shape, seed=sum(shape))
    assert np.array_equal(run("unrolled", a, b), a.astype(np.float64) @ b.astype(np.float64))


def test_unrolled_random_and_other_config():
    from tilegemm.kernels.simt import k14_unrolled as k14

    a, b = random_operands(129, 132, 20, seed=5)
    r = check(run("unrolled", a, b), a, b, kernel="unrolled")
    assert r.ok, str(r)
    cfg = k14.Config(64, 64, 16, 32, 32, min_blocks=0, max_registers=96)  # 128 threads, 4×8 a thread, BK 16
    cuda = _cuda.cuda
    a, b = integer_operands(65, 68, 36, seed=6)
    dc = cuda.device_array((65, 68), dtype=np.float32)
    poison(dc)
    k14.launch_config(cfg, cuda.to_device(a), cuda.to_device(b), dc)
    assert np.array_equal(dc.copy_to_host(), a.astype(np.float64) @ b.astype(np.float64))


def test_unrolled_takes_its_scalar_variant_where_16_bytes_are_not_legal(monkeypatch):
    """Unaligned rows run the same tiling with one-element accesses (not k07's kernel); aligned
    ones the 16-byte kernel."""
    from tilegemm.kernels.simt import k14_unrolled as k14

    built = []
    real = k14.kernel_for
    monkeypatch.setattr(k14, "kernel_for", lambda dt, cfg=k14.DEFAULT: (built.append(cfg), real(dt, cfg))[1])
    for shape, vector in (((6, 8, 12), True), ((6, 9, 12), False), ((6, 8, 13), False)):
        a, b = integer_operands(*shape, seed=2)
        assert np.array_equal(run("unrolled", a, b), a.astype(np.float64) @ b.astype(np.float64))
        assert built[-1].vector is vector and built[-1].BM == k14.DEFAULT.BM
    src = k14.source(k14.SCALAR)
    assert "ldg4" not in src and "stg4" not in src and "at(A, m0 + ar0, aq0)" in src


def _store_banks(cfg):
    """For each warp and each store the generated code makes to A's transposed tile (float4 l,
    element c): the shared-memory banks its 32 lanes write, from the generated ar/aq lines."""
    import re

    from tilegemm.kernels.simt import k14_unrolled as k14

    lines = [ln.strip() for ln in k14.source(cfg).splitlines() if re.match(r"\s+a[rq]\d+ = ", ln)]
    a_it = cfg.BM * cfg.BK // 4 // cfg.threads
    banks = []
    for warp in range(cfg.threads // 32):
        for l in range(a_it):
            for c in range(4):
                where = []
                for tid in range(32 * warp, 32 * warp + 32):
                    env = {"tid": tid}
                    for ln in lines:
                        exec(ln, env)
                    where.append(((env[f"aq{l}"] + c) * (cfg.BM + cfg.pad) + env[f"ar{l}"]) % 32)
                banks.append(where)
    return banks


def test_lane_rows_stores_meet_no_bank_conflicts():
    """`lane_rows`: each lane of a warp loads its own row of A, so a warp's stores to the transposed
    tile hit 32 banks even unpadded; k14's order (32·4/BK rows, BK/4 float4s along K each) hits
    32·4/BK there (8 at k16's BK = 16). Every float4 of the tile is loaded exactly once either way."""
    import dataclasses

    from tilegemm.kernels.simt import k14_unrolled as k14
    from tilegemm.kernels.simt import k16_big_tile as k16

    narrow = k14.Config(256, 32, 16, 64, 32, lane_rows=True)  # 128 threads for 256 rows: NT < BM
    for cfg in (k16.DEFAULT, k14.Config(lane_rows=True, pad=0), k14.Config(64, 64, 16, 32, 32, lane_rows=True), narrow):
        assert all(len(set(w)) == 32 for w in _store_banks(cfg)), cfg
        k14_order = _store_banks(dataclasses.replace(cfg, lane_rows=False, pad=0))  # BK/4 float4s a row: BK/4-way
        assert all(len(set(w)) == 32 * 4 // cfg.BK for w in k14_order), cfg
    assert k16.DEFAULT.lane_rows and k16.DEFAULT.pad == 0 and not k14.DEFAULT.lane_rows
    for cfg in (k16.DEFAULT, k14.Config(lane_rows=True), k14.Config(64, 64, 16, 32, 32, lane_rows=True), narrow):
        src = k14.source(cfg)
        lines = [ln.strip() for ln in src.splitlines() if ln.strip()[:2] in ("ar", "aq") and " = " in ln]
        a_it = cfg.BM * cfg.BK // 4 // cfg.threads
        seen = set()
        for tid in range(cfg.threads):
            env = {"tid": tid}
            for ln in lines:
                exec(ln, env)
            seen |= {(env[f"ar{l}"], env[f"aq{l}"]) for l in range(a_it)}
        assert seen == {(r, q) for r in range(cfg.BM) for q in range(0, cfg.BK, 4)}, cfg


def test_unrolled_source_is_straight_line():
    """The generated body keeps one loop (over K steps); each of its BK rows is spelled out as
    (WMITER + WNITER) LDS.128 and TM·TN multiply-adds, and the text is what the CLI prints."""
    import ast

    from tilegemm import cli
    from tilegemm.kernels.simt import k14_unrolled as k14

    for cfg in (k14.DEFAULT, k14.Config(64, 64, 16, 32, 32), k14.SCALAR):
        src = k14.source(cfg)
        tree = ast.parse(src)
        loops = [n for n in ast.walk(tree) if isinstance(n, (ast.For, ast.While))]
        assert len(loops) == 1 and "range((K +" in ast.unparse(loops[0].iter)
        tm, tn = cfg.WM // 8, cfg.WN // 4
        fmas = [n for n in ast.walk(loops[0]) if isinstance(n, ast.AugAssign)]
        assert len(fmas) == cfg.BK * tm * tn
        assert src.count("lds4(") == cfg.BK * (tm // 4 + tn // 4)
    assert cli.kernel_source("unrolled") == k14.source(k14.DEFAULT)
    with pytest.raises(ValueError, match="multiples of WM"):
        k14.source(k14.Config(96, 128, 8, 64, 32))  # k10's tiling rules


def test_cli_kernel_source(capsys):
    from tilegemm import cli

    assert cli.main(["kernels", "--source", "unrolled"]) == 0
    assert "def unrolled_128x128x8" in capsys.readouterr().out
    assert cli.main(["kernels", "--source", "big_tile"]) == 0  # k16's generated kernel, not its module
    assert "def unrolled_256x128x16_w128x32_b1_p0_rows_lanerows(A, B, C):" in capsys.readouterr().out
    assert cli.main(["kernels", "--source", "naive"]) == 0
    assert '"""k01 naive' in capsys.readouterr().out
    assert cli.main(["kernels", "--source", "nope"]) == 2
    assert "no kernel named 'nope'" in capsys.readouterr().err


@pytest.mark.gpu
def test_unrolled_sass_on_the_device():
    """On the GPU the compiled k14 is straight-line, BK·TM·TN = 512 FFMA in the kernel, within
    128 registers (two blocks of 256 threads an SM), and right at a size with every path."""
    from tilegemm.bench import sass

    rec = sass.resources(registry.get("unrolled"), route="gpu")[0]
    assert rec["FFMA"] == 512 and rec["registers"] <= 128, rec
    a, b = random_operands(1000, 1028, 516, seed=9)
    r = check(run("unrolled", a, b), a, b, kernel="unrolled")
    assert r.ok, str(r)


@pytest.mark.gpu
def test_unrolled_does_not_spill_on_the_device():
    """Session 13's k14 spilled at the 128-register cap on the H200 (11 local loads a K step); its edge
    guards, written since as one call each (`at_or0`, `put_in`), left the registers for the loop."""
    from tilegemm.bench import sass

    rec = sass.resources(registry.get("unrolled"), route="gpu")[0]
    assert rec["LDL"] == 0 and rec["STL"] == 0, rec


# ---- k15: k14's kernel with one block per SM (the register budget), the FP32 `auto` rung ----


@pytest.mark.parametrize("shape, own", [
    ((129, 132, 20), True),  # M > 128, aligned, no split: k15's 16-byte kernel (interior, edges, K tail)
    ((130, 70, 33), True),  # M > 128, N and K odd: k15's scalar-access variant
    ((5, 23, 7), False),  # skinny M: k12 through k13
    ((40, 64, 516), False),  # mid M, aligned: k13 splits K
    ((40, 66, 20), False),  # mid M, unaligned: k12's scalar kernel
])
def test_budget_exact_on_each_route(shape, own, monkeypatch):
    """k15 runs its own kernel (vector or scalar) where k13 would run k11 or k07, and hands skinny
    and split-K products to k13; exact on integer operands wherever it goes."""
    from tilegemm.kernels.simt import k13_splitk_tiles as k13
    from tilegemm.kernels.simt import k14_unrolled as k14
    from tilegemm.kernels.simt import k15_register_budget as k15

    built, handed = [], []
    real_kernel, real_k13 = k14.kernel_for, k13.launch
    monkeypatch.setattr(k14, "kernel_for", lambda dt, cfg=k14.DEFAULT: (built.append(cfg), real_kernel(dt, cfg))[1])
    monkeypatch.setattr(k13, "launch", lambda *a, **kw: (handed.append(1), real_k13(*a, **kw))[1])
    vector = shape[1] % 4 == 0 and shape[2] % 4 == 0
    if own and vector:  # at sizes the simulator runs, k13's wave model rates its own plan faster: as if not
        assert not k15.here(*shape, vector)
        monkeypatch.setattr(k15, "estimate_us", lambda *a: 0.0)
    a, b = integer_operands(*shape, seed=sum(shape))
    assert np.array_equal(run("budget", a, b), a.astype(np.float64) @ b.astype(np.float64))
    assert k15.here(*shape, vector) is own
    traffic = k15.traffic(*shape, 4)
    if own:  # one block per SM where 16-byte accesses are legal; the scalar variant keeps two
        assert not handed and built[-1].vector is vector and built[-1].min_blocks == (1 if vector else 2)
        assert traffic == k14.traffic(*shape, 4)  # the same tiles as k14's, so the same design traffic
    else:
        assert handed and not built and traffic == k13.traffic(*shape, 4)


def test_budget_is_k14_with_one_block_per_sm():
    """The same generated text but for the launch bound: the rung changes one thing."""
    import dataclasses

    from tilegemm.kernels.simt import k14_unrolled as k14
    from tilegemm.kernels.simt import k15_register_budget as k15

    assert dataclasses.replace(k15.DEFAULT, min_blocks=k14.DEFAULT.min_blocks) == k14.DEFAULT
    assert k15.DEFAULT.min_blocks == 1 and k15.SCALAR == k14.SCALAR
    name = k15.DEFAULT.name
    assert k14.source(k15.DEFAULT) == k14.source(k14.DEFAULT).replace(k14.DEFAULT.name, name)
    assert registry.get("budget").auto_rank > registry.get("splitk_tiles").auto_rank


@pytest.mark.gpu
def test_budget_does_not_spill_on_the_device():
    """With one block per SM the compiled kernel takes more than 128 registers and spills nothing;
    right on an aligned shape and on an unaligned one (the scalar variant)."""
    from tilegemm.bench import sass

    rec = sass.resources(registry.get("budget"), route="gpu")[0]
    assert rec["FFMA"] == 512 and 128 < rec["registers"] <= 255 and rec["LDL"] == 0 and rec["STL"] == 0, rec
    for shape in ((1000, 1028, 516), (777, 1234, 431)):
        a, b = random_operands(*shape, seed=9)
        r = check(run("budget", a, b), a, b, kernel="budget")
        assert r.ok, str(r)


# ---- k16: 16×8 outputs a thread, 256×128 tiles, BK = 16 (the FP32 auto rung) ----


def test_big_tile_exact_and_within_48_kib():
    """k16's configuration (through k14's generator) is exact on a shape with interior and edge
    blocks and a K tail; its shared tiles are exactly the 48 KiB a kernel may declare statically;
    each K row is a one-trip loop (a block of Numba's IR); small products go to k15."""
    import ast

    from tilegemm.kernels.simt import k14_unrolled as k14
    from tilegemm.kernels.simt import k16_big_tile as k16

    cfg = k16.DEFAULT
    assert 2 * cfg.BK * (cfg.BM + cfg.pad) * 4 + 2 * cfg.BK * cfg.BN * 4 == 48 * 1024
    loops = [n for n in ast.walk(ast.parse(k14.source(cfg))) if isinstance(n, ast.For)]
    assert len(loops) == 1 + cfg.BK and all("range(1)" in ast.unparse(n.iter) for n in loops[1:])
    cuda = _cuda.cuda
    a, b = integer_operands(257, 132, 36, seed=7)
    dc = cuda.device_array((257, 132), dtype=np.float32)
    poison(dc)
    k14.launch_config(cfg, cuda.to_device(a), cuda.to_device(b), dc)
    assert np.array_equal(dc.copy_to_host(), a.astype(np.float64) @ b.astype(np.float64))
    assert not k16.here(257, 132, 36, True) and k16.here(4096, 4096, 4096, True)
    assert not k16.here(4096, 4097, 4096, False)
    assert registry.get("big_tile").auto_rank > registry.get("budget").auto_rank  # the FP32 auto rung


def test_big_tile_takes_a_shape_only_where_its_waves_are_shorter(monkeypatch):
    """k16's 256×128 tiles run where k13's wave model rates them no slower than k15's 128×128
    tiles and k13's plan (132 SMs, as on the H200): faster per multiply-add, but coarser waves."""
    from tilegemm.kernels.simt import k13_splitk_tiles as k13
    from tilegemm.kernels.simt import k15_register_budget as k15
    from tilegemm.kernels.simt import k16_big_tile as k16

    monkeypatch.setattr(k13, "sm_count", lambda: 132)
    for shape in [(4096, 4096, 4096), (8192, 8192, 8192), (4096, 14336, 4096), (2560, 2560, 2560)]:
        assert k16.here(*shape, True)  # the first three: the ladder's shapes, k16 measured fastest
    assert not k16.here(3072, 3072, 3072, True)  # 288 tiles: 3 rounds, 2.2 of them k15's 5 × 0.96
    assert not k16.here(1152, 8192, 4096, True)  # ceil(1152/256) = 5 rows of tiles, the last half empty
    assert not k16.here(256, 256, 256, True)  # one tile: k13's plan fills the SMs
    assert not k16.here(4096, 4096, 4096, False) and not k16.here(16, 4096, 4096, True)
    for shape in [(3072, 3072, 3072), (2048, 2048, 2048), (777, 1236, 4324)]:
        p = k13.plan(*shape, sms=132)
        rivals = [k15.estimate_us(*shape, 132)] + ([p.us] if p else [])
        assert k16.here(*shape, True) == (k16.estimate_us(*shape, 132) <= min(rivals))


def test_generated_source_is_written_once_for_numbas_disk_cache(tmp_path, monkeypatch):
    """Numba caches a kernel's machine code only for a function read from a file, keyed by the
    file's time and size: the generated source goes to the cache folder under a name that hashes
    its text and the intrinsics' (a change to either is a new file), an existing file is never
    rewritten, and a folder that cannot be written means no file, not an error."""
    import os

    from tilegemm.kernels.simt import k14_unrolled as k14

    monkeypatch.setenv("TILEGEMM_CACHE_DIR", str(tmp_path))
    src = k14.source(k14.DEFAULT)
    path = k14.source_file("k14_test", src, "intrinsics")
    assert os.path.dirname(path) == str(tmp_path / "kernels") and open(path).read() == src
    assert os.listdir(tmp_path / "kernels") == [os.path.basename(path)]  # no temporary file left
    os.utime(path, (1, 1))
    assert k14.source_file("k14_test", src, "intrinsics") == path and os.stat(path).st_mtime == 1  # not rewritten
    assert len({path, k14.source_file("k14_test", src + "# changed\n", "intrinsics"),
                k14.source_file("k14_test", src, "intrinsics changed")}) == 3
    assert os.stat(path).st_mtime == 1
    (tmp_path / "blocked").write_text("a file where the folder would go")
    monkeypatch.setenv("TILEGEMM_CACHE_DIR", str(tmp_path / "blocked"))
    assert k14.source_file("k14_test", src) is None


@pytest.mark.gpu
def test_generated_kernels_come_from_the_disk_cache_in_a_second_process(tmp_path):
    """The first process compiles k16 and leaves its machine code in the cache folder; a second
    process with the same folder loads it (Numba's cache hit) instead of compiling."""
    import json
    import os
    import subprocess
    import sys

    code = ("import json, numpy as np; from numba import cuda; from tilegemm.kernels.simt import k16_big_tile as k16\n"
            "a = cuda.to_device(np.ones((256, 16), np.float32)); b = cuda.to_device(np.ones((16, 128), np.float32))\n"
            "c = cuda.device_array((256, 128), np.float32)\n"
            "from tilegemm.kernels.simt import k14_unrolled as k14; k14.run_config(k16.DEFAULT, a, b, c)\n"
            "d = k14.kernel_for(np.float32, k16.DEFAULT); s = d.stats\n"
            "print(json.dumps(dict(hits=sum(s.cache_hits.values()), misses=sum(s.cache_misses.values()),"
            " ok=bool((c.copy_to_host() == 16).all()))))\n")
    env = dict(os.environ, TILEGEMM_CACHE_DIR=str(tmp_path))
    got = [json.loads(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                     timeout=300, check=True).stdout.splitlines()[-1]) for _ in range(2)]
    assert got[0] == dict(hits=0, misses=1, ok=True) and got[1] == dict(hits=1, misses=0, ok=True), got
    from tilegemm.kernels.simt import k16_big_tile as k16

    assert len(list((tmp_path / "kernels").glob(f"k14_{k16.DEFAULT.name}_float32_*.py"))) == 1


@pytest.mark.parametrize("m, n, k", [(257, 133, 47), (257, 132, 46), (512, 132, 47), (512, 133, 48)])
def test_big_tile_copies_unaligned_operands_into_whole_tiles(m, n, k, monkeypatch):
    """Where rows are off 16 bytes and k16 would take the padded product, A and B are copied into
    scratch padded with zeros to whole tiles and K steps, and C, where its rows are off, is computed
    into rows padded likewise and copied out (only what needs it); k16's own kernel runs on them.
    Exact on integer operands, C's edges included; the operands are left as they were; a second
    call reuses the first call's scratch."""
    from tilegemm.kernels.simt import _common as S
    from tilegemm.kernels.simt import k14_unrolled as k14
    from tilegemm.kernels.simt import k16_big_tile as k16

    S.forget_scratch()
    real_here = k16.here
    monkeypatch.setattr(k16, "here", lambda mm, nn, kk, vector: vector)  # as if the product filled the GPU
    ran, copied = [], []
    real_run, real_copy = k14.run_config, k16.copy_padded
    monkeypatch.setattr(k14, "run_config", lambda cfg, *a, **kw: (ran.append((cfg, *a[:3])), real_run(cfg, *a, **kw))[1])
    monkeypatch.setattr(k16, "copy_padded", lambda src, dst, s=None: (copied.append(dst), real_copy(src, dst, s))[1])
    cuda = _cuda.cuda
    a, b = integer_operands(m, n, k, seed=m + n + k)
    da, db = cuda.to_device(a), cuda.to_device(b)
    for _ in range(2):
        dc = cuda.device_array((m, n), dtype=np.float32)
        poison(dc)
        k16.launch(da, db, dc)
        assert np.array_equal(dc.copy_to_host(), a.astype(np.float64) @ b.astype(np.float64))
    assert np.array_equal(da.copy_to_host(), a) and np.array_equal(db.copy_to_host(), b)
    mp, np_, kp = k16.padded_shape(m, n, k)
    assert (mp, np_, kp) == (512, 256, 48)
    cfg, ga, gb, gc = ran[-1]
    assert cfg == k16.DEFAULT and ga.shape == (mp, kp) and gb.shape == (kp, np_)
    assert gc.shape == ((m, np_) if n % 4 else (m, n))
    want = [(mp, kp)] * ((mp, kp) != (m, k)) + [(kp, np_)] + [(m, n)] * (n % 4 != 0)  # the last: C, copied out
    assert [x.shape for x in copied] == 2 * want
    half = len(copied) // 2
    assert all(x is y for x, y in zip(copied[:half], copied[half:]) if x.shape != (m, n))  # kept between calls
    monkeypatch.setattr(k16, "here", real_here)
    assert k16.copy_shape(4095, 4097, 1023, 4) == ((4096, 4224, 1024), True)  # k16's kernel on whole tiles
    assert k16.copy_shape(777, 1234, 4321, 4) == ((777, 1236, 4324), False)  # k13's plan on 16-byte rows
    assert k16.copy_shape(257, 133, 47, 4) is None  # three launches would cost more than the scalar kernel saves
    assert k16.copy_shape(4095, 4097, 1023, 8) is None  # FP64 has no 16-byte vectors of 4
    assert k16.copy_shape(16, 4097, 1023, 4) is None  # k12's rows: it reads B once, in any alignment
    S.forget_scratch()


def test_unaligned_operands_copied_to_16_byte_rows_for_k13s_plan(monkeypatch):
    """Where k16's kernel is not the padded product's fastest form and the copies pay, A and B
    are copied with N and K rounded up to 4 (M as it is), C computed into rows of N rounded up and
    copied out, and k15's launch (its kernel or k13's plan) runs on them. Exact on integer operands."""
    from tilegemm.kernels.simt import _common as S
    from tilegemm.kernels.simt import k15_register_budget as k15
    from tilegemm.kernels.simt import k16_big_tile as k16

    S.forget_scratch()
    monkeypatch.setattr(k16, "PAYBACK", 0)  # copies always pay
    copied, handed = [], []
    real_copy, real_k15 = k16.copy_padded, k15.launch
    monkeypatch.setattr(k16, "copy_padded", lambda src, dst, s=None: (copied.append(dst.shape), real_copy(src, dst, s))[1])
    monkeypatch.setattr(k15, "launch", lambda a, b, c, s=None: (handed.append((a.shape, b.shape, c.shape)), real_k15(a, b, c, s))[1])
    cuda = _cuda.cuda
    m, n, k = 40, 70, 37
    assert k16.copy_shape(m, n, k, 4) == ((m, 72, 40), False)
    a, b = integer_operands(m, n, k, seed=11)
    dc = cuda.device_array((m, n), dtype=np.float32)
    poison(dc)
    k16.launch(cuda.to_device(a), cuda.to_device(b), dc)
    assert copied == [(m, 40), (40, 72), (m, n)] and handed == [((m, 40), (40, 72), (m, 72))]
    assert np.array_equal(dc.copy_to_host(), a.astype(np.float64) @ b.astype(np.float64))
    S.forget_scratch()


def test_scratch_is_kept_per_thread_stream_and_shape_within_a_cap(monkeypatch):
    """A rung's Numba scratch is kept for later calls of the same thread, device, stream, shapes
    and dtype, new for any other (two threads on one stream would race on one set); past the cap
    the least recently used sets are given back, and a set larger than the cap is made per call;
    an allocator given by scratch_from (dispatch's, for torch operands) is used instead, afresh
    each call; where the device has not the memory there is none (None), and other errors pass."""
    import threading

    from tilegemm.kernels.simt import _common as S

    S.forget_scratch()
    cuda = _cuda.cuda
    first = S.scratch([(4, 8), (8, 4)], "float32")
    assert [x.shape for x in first] == [(4, 8), (8, 4)] and all(x.dtype == np.float32 for x in first)
    assert all(x is y for x, y in zip(first, S.scratch([(4, 8), (8, 4)], "float32")))
    assert not any(x is y for x, y in zip(first, S.scratch([(4, 8), (8, 4)], "float32", cuda.stream())))
    other = []
    t = threading.Thread(target=lambda: other.extend(S.scratch([(4, 8), (8, 4)], "float32")))
    t.start(), t.join()
    assert not any(x is y for x, y in zip(first, other))
    assert S.scratch([(4, 8)], "float32")[0] is not first[0]
    assert S.scratch([(4, 8), (8, 4)], "float64")[0].dtype == np.float64
    monkeypatch.setattr(S, "KEPT_SCRATCH_MAX_BYTES", 600)
    S.forget_scratch()
    one, two = S.scratch([(8, 8)], "float32"), S.scratch([(6, 8)], "float32")  # 256 and 192 bytes: both kept
    assert S.scratch([(8, 8)], "float32")[0] is one[0]  # now the most recently used
    S.scratch([(5, 8)], "float32")  # 160 more would pass 600: the least recently used (two's) given back
    assert S.scratch([(8, 8)], "float32")[0] is one[0] and S.scratch([(6, 8)], "float32")[0] is not two[0]
    big = S.scratch([(20, 10)], "float32")  # 800 bytes: past the cap, made per call
    assert S.scratch([(20, 10)], "float32")[0] is not big[0]
    made = []
    with S.scratch_from(lambda shape, dt: made.append((shape, dt)) or cuda.device_array(shape, dtype=dt)):
        (x,) = S.scratch([(3, 5)], np.float32)
        assert x.shape == (3, 5)
    assert made == [((3, 5), np.float32)]
    S.scratch([(3, 5)], np.float32)  # outside: Numba's own again
    assert made == [((3, 5), np.float32)]

    def refuse(text):
        def alloc(shape, dt):
            raise RuntimeError(text)
        return alloc

    with S.scratch_from(refuse("CUDA out of memory. Tried to allocate 64 MiB")):
        assert S.scratch([(3, 5)], np.float32) is None
    with S.scratch_from(refuse("something else")), pytest.raises(RuntimeError, match="something else"):
        S.scratch([(3, 5)], np.float32)
    S.forget_scratch()


def test_big_tile_copies_an_operand_off_16_bytes_and_falls_back_without_scratch(monkeypatch):
    """A of whole tiles whose address is 4 bytes off is copied (and only A); where no scratch can
    be had, k15 takes the product. Exact either way."""
    from tilegemm.kernels.simt import _common as S
    from tilegemm.kernels.simt import k10_warptile as k10
    from tilegemm.kernels.simt import k15_register_budget as k15
    from tilegemm.kernels.simt import k16_big_tile as k16

    S.forget_scratch()
    monkeypatch.setattr(k16, "here", lambda mm, nn, kk, vector: vector)
    copied, fell_back = [], []
    real_copy, real_k15 = k16.copy_padded, k15.launch
    monkeypatch.setattr(k16, "copy_padded", lambda src, dst, s=None: (copied.append(dst.shape), real_copy(src, dst, s))[1])
    monkeypatch.setattr(k15, "launch", lambda *a: (fell_back.append(1), real_k15(*a))[1])
    cuda = _cuda.cuda
    m, n, k = 256, 128, 48
    a, b = integer_operands(m, n, k, seed=5)
    flat = cuda.to_device(np.concatenate([np.zeros(1, np.float32), a.ravel()]))
    da = flat[1:].reshape(m, k)  # one element past a fresh allocation: 4 bytes off 16
    assert not k10.aligned16(da) and k10.aligned16(flat)
    dc = cuda.device_array((m, n), dtype=np.float32)
    poison(dc)
    k16.launch(da, cuda.to_device(b), dc)
    assert copied == [(m, k)] and not fell_back
    assert np.array_equal(dc.copy_to_host(), a.astype(np.float64) @ b.astype(np.float64))
    monkeypatch.setattr(k16, "scratch", lambda *a, **kw: None)
    poison(dc)
    k16.launch(da, cuda.to_device(b), dc)
    assert fell_back and np.array_equal(dc.copy_to_host(), a.astype(np.float64) @ b.astype(np.float64))
    assert k16.copy_shape(4095, 4097, 15, 4) is None and k16.copy_shape(4095, 4097, 0, 4) is None  # K below one step
    S.forget_scratch()


@pytest.mark.gpu
def test_no_kept_scratch_while_a_stream_is_captured():
    """Numba's kept scratch is refused while the stream is captured into a CUDA graph (the graph
    would hold buffers that the cache may give back), and k16 then takes a form without copies."""
    torch = pytest.importorskip("torch")
    from tilegemm.kernels.simt import _common as S

    s = torch.cuda.Stream()
    ns = _cuda.cuda.external_stream(s.cuda_stream)
    x = torch.zeros(4, device="cuda")
    assert not S._capturing(ns) and S.scratch([(4, 4)], np.float32, ns) is not None
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        x.add_(1)
        assert S._capturing(ns) and S.scratch([(4, 4)], np.float32, ns) is None
    assert not S._capturing(ns)
    S.forget_scratch()


@pytest.mark.gpu
def test_big_tile_on_the_device():
    from tilegemm.bench import sass

    rec = sass.resources(registry.get("big_tile"), route="gpu")[0]
    assert rec["FFMA"] == 2048 and rec["LDL"] == 0 and rec["STL"] == 0 and rec["shared_bytes"] <= 48 * 1024, rec
    a, b = random_operands(4100, 4096, 520, seed=3)
    r = check(run("big_tile", a, b), a, b, kernel="big_tile")
    assert r.ok, str(r)


def test_explain_names_the_fp32_form_and_the_wave_models_estimates():
    """`tilegemm.explain` on the FP32 auto rung says which form runs (k16's, k15's kernel, k13's
    plan, k12's, or copies first) and the wave model's estimates that chose it."""
    import tilegemm

    def says(m, n, k):
        a, b = np.ones((m, k), np.float32), np.ones((k, n), np.float32)
        return tilegemm.explain(a, b, kernel="big_tile").splitlines()[-1]

    assert "k16's kernel: 256×128 tiles (wave model, 132 SMs" in says(4096, 4096, 4096)
    assert "k13's plan: 32×64 tiles, K split 4 ways" in says(256, 256, 256)
    assert says(777, 1234, 4321).startswith("  - copies into 16-byte rows (777×4324 and 4324×1236), then k13's plan")
    assert "k12's one-column kernel: 16 rows a block" in says(16, 4096, 4096)
    assert "its loads serve any alignment" in says(40, 70, 37)
    assert "k15's scalar kernel" in says(300, 70, 37)


# ---- k17: split-K on the generated kernel, seven tiles (the FP32 auto rung) ----


def _exact(launch, m, n, k, seed, offset_a=False):
    """launch(a, b, c) on integer operands into a poisoned C: exact, and A and B left as they were."""
    cuda = _cuda.cuda
    a, b = integer_operands(m, n, k, seed=seed)
    if offset_a:  # A one element past a fresh allocation: 4 bytes off 16
        da = cuda.to_device(np.concatenate([np.zeros(1, np.float32), a.ravel()]))[1:].reshape(m, k)
    else:
        da = cuda.to_device(a)
    db = cuda.to_device(b)
    dc = cuda.device_array((m, n), dtype=np.float32)
    poison(dc)
    launch(da, db, dc)
    cuda.synchronize()
    assert np.array_equal(dc.copy_to_host(), a.astype(np.float64) @ b.astype(np.float64)), (m, n, k)
    assert np.array_equal(da.copy_to_host(), a) and np.array_equal(db.copy_to_host(), b)


def test_splitk_unrolled_exact_on_every_tile():
    """Every tile of k17's menu in its split-K form (slices uneven, the last one empty), with an
    interior block, ragged edges and a K tail, through 16-byte loads and 16-byte atomic adds, and
    with one element at a time (N and K odd): exact on integer operands, whatever the adds' order."""
    from tilegemm.kernels.simt import k17_splitk_unrolled as k17

    for i, t in enumerate(k17.TILES):
        cfg = t.cfg
        m, n, k = cfg.BM + 3, cfg.BN + 4, 3 * cfg.BK + 4  # 4 K steps; 3 splits: slices of 2, 2 and none
        assert cfg.split and k17.ceil_div(4, k17.ceil_div(4, 3)) == 2
        _exact(lambda a, b, c: k17.launch_plan(a, b, c, cfg, 3), m, n, k, seed=i)
        if cfg.BM <= 64:  # one-element form (the larger tiles' scalar body costs the simulator minutes)
            scalar = k17.dataclasses.replace(cfg, vector=False)
            _exact(lambda a, b, c: k17.launch_plan(a, b, c, scalar, 2), cfg.BM + 1, cfg.BN + 3, 2 * cfg.BK + 3, seed=i)
    src = k17.k14.source(k17.TILES[2].cfg)
    assert "red4(C, row, col," in src and "add_in(C, row, col + 3," in src and "k_hi = min(K, k_lo + per)" in src
    plain = k17.dataclasses.replace(k17.TILES[2].cfg, split=False)
    assert "red4" not in k17.k14.source(plain) and "k_lo" not in k17.k14.source(plain)


def test_splitk_unrolled_reads_the_weights_rows_and_adds_a_bias(monkeypatch):
    """x @ Wᵀ + bias with W's rows read in place (`b_rows`: B's tile loaded as A's is, stored
    transposed into shared memory), split (uneven slices; only the first adds the bias) and
    unsplit, with 16-byte loads and one element at a time: exact on integer operands, W and the
    bias left as they were. launch() given W.t() (a transposed view) runs it, with the bias where
    given; a bias with a B that is not a transposed view is refused."""
    from tilegemm.kernels.simt import k17_splitk_unrolled as k17

    cuda = _cuda.cuda
    rng = np.random.default_rng(7)

    def exact(cfg, splits, m, n, k, bias=True):
        a, b = integer_operands(m, n, k, seed=splits)
        row = rng.integers(-8, 9, (1, n)).astype(np.float32)
        w = np.ascontiguousarray(b.T)
        da, dw, dr = cuda.to_device(a), cuda.to_device(w), cuda.to_device(row)
        dc = cuda.device_array((m, n), dtype=np.float32)
        poison(dc)
        cfg = k17.dataclasses.replace(cfg, b_rows=True, bias=bias)
        k17.launch_plan(da, dw, dc, cfg, splits, None, dr if bias else None)
        want = a.astype(np.float64) @ b.astype(np.float64) + (row if bias else 0)
        assert np.array_equal(dc.copy_to_host(), want), (cfg.name, splits)
        assert np.array_equal(dw.copy_to_host(), w) and np.array_equal(dr.copy_to_host(), row)

    small, square = k17.TILES[0].cfg, k17.TILES[1].cfg  # 32×128 (BK 16) and 64×64 (BK 8)
    exact(small, 3, small.BM + 3, small.BN + 4, 3 * small.BK + 4)  # slices of 2, 2 and none
    exact(small, 1, small.BM + 3, small.BN + 4, 3 * small.BK + 4)
    exact(square, 2, 67, 68, 20, bias=False)
    exact(k17.dataclasses.replace(square, vector=False), 2, 65, 67, 19)
    src = k17.k14.source(k17.dataclasses.replace(square, b_rows=True, bias=True))
    assert "N = B.shape[0]" in src and "sB[base + bq0 + 3, br0] = gb0_3" in src and "if cuda.blockIdx.z == 0" in src
    ran = []
    monkeypatch.setattr(k17, "launch_plan", lambda a, b, c, cfg, splits, stream=None, bias=None: ran.append(
        (b.shape, cfg.b_rows, cfg.bias, cfg.vector, None if bias is None else bias.shape)))
    w = cuda.to_device(np.ones((36, 24), np.float32))
    a, c = cuda.to_device(np.ones((20, 24), np.float32)), cuda.device_array((20, 36), np.float32)
    assert k17.rows_of(w.T) is not None and k17.rows_of(w) is None
    k17.launch(a, w.T, c, None, bias=cuda.to_device(np.ones(36, np.float32)))
    assert ran == [((36, 24), True, True, True, (1, 36))]
    with pytest.raises(ValueError, match="bias"):
        k17.launch(a, cuda.to_device(np.ones((24, 36), np.float32)), c, None, bias=cuda.to_device(np.ones(36, np.float32)))


def test_splitk_unrolled_decode_form_of_x_at_w_transposed(monkeypatch):
    """x @ Wᵀ (+ bias) at M ≤ 16 with 16-byte rows runs the decode form (a warp a few columns of
    C, its lanes along W's rows, x's rows staged in shared memory) where its blocks fill enough of
    the SMs (one SM here): exact on integer operands for 1, 3, 5, 8, 11 and 16 rows, K with a
    tail past its 256-element steps and K below one step, N past a block's last column, with and
    without the bias; every form of GEMV_FORMS, K split over warps or not. Too few columns for the
    SMs: the tiles, which split K."""
    from tilegemm.kernels.simt import k17_splitk_unrolled as k17

    cuda = _cuda.cuda
    rng = np.random.default_rng(3)
    ran = []
    monkeypatch.setattr(k17, "launch_plan", lambda *args: ran.append(args))  # (the tiles: not at these M)
    monkeypatch.setattr(k17, "sm_count", lambda: 1)
    assert k17.GEMV_ROWS == 16
    for m, n, k, bias in ((1, 12, 296, True), (3, 8, 260, False), (8, 20, 520, True), (5, 8, 12, True),
                          (16, 36, 264, True), (11, 4, 256, False), (6, 13, 264, True)):  # (N = 13: any N)
        a, b = integer_operands(m, n, k, seed=m)
        w, row = np.ascontiguousarray(b.T), rng.integers(-8, 9, n).astype(np.float32)
        dc = cuda.device_array((m, n), np.float32)
        poison(dc)
        k17.launch(cuda.to_device(a), cuda.to_device(w).T, dc, None, bias=cuda.to_device(row) if bias else None)
        assert np.array_equal(dc.copy_to_host(), a.astype(np.float64) @ b + (row if bias else 0)), (m, n, k)
    assert not ran
    for rows, forms in k17.GEMV_FORMS.items():  # every form, at its rows and below them, two steps of K and a tail
        for i, form in enumerate(forms):
            m, n, k = max(1, rows - i), form.warps // form.ks * form.cols + 4, 512 * form.ks + 72  # (the second
            a, b = integer_operands(m, n, k, seed=rows + i)  # block's columns run past N; K's tail over 3 warps)
            dc = cuda.device_array((m, n), np.float32)
            poison(dc)
            k17.launch_gemv(cuda.to_device(a), cuda.to_device(np.ascontiguousarray(b.T)), dc, form)
            assert np.array_equal(dc.copy_to_host(), a.astype(np.float64) @ b), (rows, form)
    assert any(form.ks > 1 for forms in k17.GEMV_FORMS.values() for form in forms)
    with pytest.raises(ValueError, match="decode form"):
        k17.gemv_for("float32", 16, 1, 8, False, 4)  # (x's step, 16 × 1024 FP32: 64 KB of shared memory)
    monkeypatch.setattr(k17, "sm_count", lambda: 132)  # 8 columns, 2 blocks: the tiles
    k17.launch(cuda.to_device(np.ones((1, 256), np.float32)), cuda.to_device(np.ones((8, 256), np.float32)).T,
               cuda.device_array((1, 8), np.float32))
    assert len(ran) == 1 and ran[0][3].b_rows


def test_splitk_unrolled_copies_the_weight_where_that_pays(monkeypatch):
    """Reading W's rows costs the product ROWS_COST; where that is more than copying W into B's
    layout (large products: 4096³, not 64 × 4096 × 4096), launch_linear copies it first (the
    32×32 transposing tile, ragged edges) and runs the plain tiles on the copy, with the bias:
    exact on integer operands."""
    from tilegemm.kernels.simt import k17_splitk_unrolled as k17

    monkeypatch.setattr(k17, "sm_count", lambda: 132)
    assert k17.copy_pays(k17.linear_plan(4096, 4096, 4096, True), 4096, 4096)
    assert not k17.copy_pays(k17.linear_plan(64, 4096, 4096, True), 4096, 4096)
    cuda = _cuda.cuda
    m, n, k = 40, 68, 36
    a, b = integer_operands(m, n, k, seed=5)
    w = np.ascontiguousarray(b.T)
    dt = cuda.device_array((k, n), np.float32)
    k17.transpose_for(np.dtype(np.float32))[(2, 3), (32, 8)](cuda.to_device(w), dt)
    assert np.array_equal(dt.copy_to_host(), b)
    row = np.arange(n, dtype=np.float32).reshape(1, n)
    ran = []
    monkeypatch.setattr(k17, "copy_pays", lambda plan, n, k: True)
    real = k17.launch_plan
    monkeypatch.setattr(k17, "launch_plan", lambda *args: ran.append(args[3].b_rows) or real(*args))
    dc = cuda.device_array((m, n), np.float32)
    poison(dc)
    k17.launch_linear(cuda.to_device(a), cuda.to_device(w), dc, cuda.to_device(row[0]))
    assert ran == [False] and np.array_equal(dc.copy_to_host(), a.astype(np.float64) @ b + row)


def test_splitk_unrolled_is_the_fp32_auto_rung_and_unsplit_runs_k15s_and_k16s_kernels(monkeypatch):
    """k17 outranks every FP32 rung; its 128×128 8×8 tile and 256×128 16×8 tile are k15's and k16's
    configurations with split on, so a plan that leaves them unsplit runs those rungs' own kernels."""
    import dataclasses

    from tilegemm.kernels.simt import k14_unrolled as k14
    from tilegemm.kernels.simt import k15_register_budget as k15
    from tilegemm.kernels.simt import k16_big_tile as k16
    from tilegemm.kernels.simt import k17_splitk_unrolled as k17

    simt = [k for k in registry.all_kernels() if k.backend == "simt" and k.supports("float32") and not k.teaching]
    assert max(simt, key=lambda k: k.auto_rank).name == "splitk_unrolled"
    assert dataclasses.replace(k17.TILES[4].cfg, split=False) == k15.DEFAULT
    assert dataclasses.replace(k17.TILES[-1].cfg, split=False) == k16.DEFAULT
    ran = []
    monkeypatch.setattr(k14, "run_config", lambda cfg, *a, **kw: ran.append(cfg))
    cuda = _cuda.cuda
    a = cuda.device_array((300, 64), np.float32)
    k17.launch_plan(a, cuda.device_array((64, 300), np.float32), cuda.device_array((300, 300), np.float32),
                    k17.TILES[-1].cfg, 1)
    assert ran == [k16.DEFAULT]


def test_splitk_unrolled_routes(monkeypatch):
    """On 132 SMs: 16-byte rows run the plan's tile; rows off 16 bytes run it one element at a time,
    or, where the copies cost less than that form's 7%, on copies in whole tiles (A only where K
    asks); M ≤ 16, K = 0 and FP64 go to k16's routing."""
    from tilegemm.kernels.simt import k17_splitk_unrolled as k17

    monkeypatch.setattr(k17, "sm_count", lambda: 132)
    r = k17.route(1000, 1000, 1000)
    assert r.form == "vector" and (r.plan.cfg.BM, r.plan.cfg.BN, r.plan.splits) == (64, 128, 3)
    assert k17.route(777, 1234, 4321).form == "scalar"  # copies 26 µs against 7% of 243
    # the one-element form runs the split kernel at one slice too: C zeroed first, in its estimate as well
    tile = k17.TILES[0]
    zero = k17.ZERO_US + k17.ZERO_US_PER_MELEM * 100 * 12348 / 1e6
    assert k17.estimate_us(100, 12348, 680, tile, 1, 132, vector=False) == k17.estimate_us(100, 12348, 680, tile, 1, 132) + zero
    r = k17.route(100, 12345, 678)  # (the sweep's fastest one-element form there; 32×128 unsplit before the rule)
    assert r.form == "scalar" and (r.plan.cfg.BM, r.plan.cfg.BN, r.plan.splits) == (64, 128, 2)
    assert r.plan.us == k17.estimate_us(100, 12348, 680, r.plan.tile, 2, 132, vector=False)
    r = k17.route(2047, 2049, 2048)  # K a multiple of 4: B copied to whole tiles, A as it is
    assert r.form == "copies" and r.shape == (2047, k17.ceil_div(2049, r.plan.cfg.BN) * r.plan.cfg.BN, 2048)
    r = k17.route(4095, 4097, 1023)
    bm, bn, bk = r.plan.cfg.BM, r.plan.cfg.BN, r.plan.cfg.BK
    whole = lambda x, step: k17.ceil_div(x, step) * step  # noqa: E731
    assert r.form == "copies" and r.shape == (whole(4095, bm), whole(4097, bn), whole(1023, bk))  # K in whole steps
    assert k17.route(16, 4096, 4096) is None and k17.route(64, 64, 0) is None and k17.route(64, 64, 64, 8) is None
    for m, n, k in ((128, 1024, 8192), (3000, 3000, 3000), (8192, 8192, 8192)):  # splits fill SMs, never past 12 rounds
        p = k17.route(m, n, k).plan
        blocks = k17.ceil_div(m, p.cfg.BM) * k17.ceil_div(n, p.cfg.BN)
        assert p.splits == 1 or blocks * p.splits <= k17.MAX_ROUNDS * 132
        assert k17.estimate_us(m, n, k, p.tile, p.splits, 132) == p.us
    assert k17.traffic(1000, 1000, 1000, 4) == (1000 * 1000 * 8 + 1000 * 1000 * 16 + 1000 * 1000 * 7) * 4.0


def test_splitk_unrolled_picks_within_12_percent_of_the_fastest_measured(monkeypatch):
    """Against the committed H200 sweep (every tile × split at 28 shapes): the plan's form ran
    within 12% of the fastest form timed there, and on unaligned shapes its route's form within 10%
    of the fastest of the scalar and copied forms."""
    import json
    import pathlib

    from tilegemm.kernels.simt import k17_splitk_unrolled as k17

    monkeypatch.setattr(k17, "sm_count", lambda: 132)
    doc = json.loads((pathlib.Path(__file__).parents[1] / "results/h200/simt-splitk-unrolled.json").read_text())

    def name(p):
        if p.splits == 1 and p.tile in (k17.TILES[4], k17.TILES[-1]):
            return "k15" if p.tile is k17.TILES[4] else "k16"
        return f"{'v' if p.cfg.BK == 16 and p.cfg.WM == 128 else 'u'}{p.cfg.BM}x{p.cfg.BN}/s{p.splits}"

    checked = 0
    for spec, times in doc["results"].items():
        m, n, k = map(int, spec.split("x"))
        p = k17.route(m, n, k).plan
        fastest = min(v for key, v in times.items() if key not in ("cublas", "auto") and not key.startswith("zero"))
        if name(p) in times:
            assert times[name(p)] <= 1.12 * fastest, (spec, name(p), times[name(p)], fastest)
            checked += 1
    assert checked >= 24
    for spec, times in doc["unaligned"].items():
        m, n, k = map(int, spec.split("x"))
        r = k17.route(m, n, k)
        key = f"{'copy' if r.form == 'copies' else 'scalar'}-{name(r.plan).replace('k15', 'u128x128/s1')}"
        fastest = min(v for key_, v in times.items() if key_.startswith(("copy-", "scalar-")))
        assert times[key] <= 1.10 * fastest, (spec, key, times[key], fastest)  # (every route's form was timed)


def test_splitk_unrolled_launches_each_route_exactly(monkeypatch):
    """Through the registered launch: a split plan on 16-byte rows, the one-element form on odd
    rows, copies into whole tiles (and, with no scratch, the one-element form), a pointer off 16
    bytes (the one-element form), and M ≤ 16 (k16's routing: k12): exact on integer operands."""
    from tilegemm.kernels.simt import _common as S
    from tilegemm.kernels.simt import k16_big_tile as k16
    from tilegemm.kernels.simt import k17_splitk_unrolled as k17

    S.forget_scratch()
    launch = registry.get("splitk_unrolled").launch
    plans, copies, handed = [], [], []
    real_plan, real_copies, real_k16 = k17.launch_plan, k16.run_on_copies, k16.launch
    monkeypatch.setattr(k17, "launch_plan", lambda a, b, c, cfg, s, st=None: (plans.append((cfg.vector, s, c.shape)),
                                                                             real_plan(a, b, c, cfg, s, st))[1])
    monkeypatch.setattr(k16, "run_on_copies", lambda *a: (copies.append(a[3]), real_copies(*a))[1])
    monkeypatch.setattr(k16, "launch", lambda *a: (handed.append(1), real_k16(*a))[1])
    _exact(launch, 40, 64, 516, seed=1)  # a 16-byte plan with K split
    assert plans[-1][0] and plans[-1][1] > 1 and not copies and not handed
    _exact(launch, 40, 66, 21, seed=2)  # rows off 16 bytes: the same tile, one element at a time
    assert not plans[-1][0] and not copies
    route = k17.Route(k17.best(40, 68, 24, 132), "copies", (64, 128, 24))
    monkeypatch.setattr(k17, "route", lambda *a: route)
    _exact(launch, 40, 66, 21, seed=3)  # on copies: A padded to whole tiles, B and C to whole tiles of N
    assert copies == [(64, 128, 24)] and plans[-1] == (True, route.plan.splits, (40, 128))
    monkeypatch.setattr(k16, "scratch", lambda *a, **kw: None)
    _exact(launch, 40, 66, 21, seed=4)  # no scratch: the one-element form
    assert not plans[-1][0]
    monkeypatch.undo()
    _exact(launch, 40, 64, 516, seed=5, offset_a=True)  # 16-byte rows, A's pointer off 16 bytes
    _exact(launch, 9, 40, 36, seed=6)  # M ≤ 16: k12
    S.forget_scratch()


def test_explain_names_k17s_tile_split_and_form():
    """`tilegemm.explain` on k17 (the FP32 auto rung on a GPU) names the tile, the thread tile, the
    split and the form (16-byte, one element, on copies), with the wave model's estimate."""
    import tilegemm

    def says(m, n, k):
        a, b = np.ones((m, k), np.float32), np.ones((k, n), np.float32)
        return tilegemm.explain(a, b, kernel="splitk_unrolled").splitlines()[-1]

    assert "k17's kernel: 64×128 tiles, 8×8 a thread, K split 3 ways (wave model, 132 SMs" in says(1000, 1000, 1000)
    assert "one-element loads (rows off 16 bytes)" in says(777, 1234, 4321)
    assert "on copies in 16-byte rows (2047×2048 and 2048×" in says(2047, 2049, 2048)
    assert "k12's one-column kernel" in says(16, 4096, 4096)


@pytest.mark.parametrize("kernel, scalar", [("splitk_unrolled", "one-element loads (rows off 16 bytes)"),
                                            ("autotuned", "k07's scalar kernel")])
def test_explain_weighs_a_device_operands_own_alignment_as_the_launch_does(kernel, scalar, monkeypatch):
    """A device operand read in place at an address off 16 bytes runs one element at a time (k17's
    one-element form, k07 under k11); explain judged 16-byte rows by the shape alone, and named
    the 16-byte form."""
    import tilegemm
    from tilegemm.kernels.simt import k07_smem_transposed as k07
    from tilegemm.kernels.simt import k17_splitk_unrolled as k17

    ran = []  # what ran: k17's plan, 16-byte accesses or not; k07's scalar kernel
    real17, real07 = k17.launch_plan, k07.launch
    monkeypatch.setattr(k17, "launch_plan", lambda *a, **kw: (ran.append(("k17", a[3].vector)), real17(*a, **kw))[1])
    monkeypatch.setattr(k07, "launch", lambda *a, **kw: (ran.append(("k07", False)), real07(*a, **kw))[1])
    cuda = _cuda.cuda
    a, b = integer_operands(20, 8, 8, seed=4)
    off = cuda.to_device(np.concatenate([np.zeros(1, np.float32), a.ravel()]))[1:].reshape(a.shape)  # 4 bytes off
    db = cuda.to_device(b)
    for da, one_element in ((off, True), (cuda.to_device(a), False)):
        said = tilegemm.explain(da, db, kernel=kernel).splitlines()[-1]
        ran.clear()
        assert np.array_equal(tilegemm.matmul(da, db, kernel=kernel).copy_to_host(), a @ b)
        assert (scalar in said) == one_element, said
        assert ran == ([("k17", not one_element)] if kernel == "splitk_unrolled" else [("k07", False)] * one_element)


def test_explain_names_k17s_form_of_x_at_w_transposed(monkeypatch):
    """For x @ W.t() (B the transpose of a C-contiguous W, as a GPU operand is: forced here), explain
    says what `launch_linear` runs: the decode form with its warps and columns, the tiles on W's
    rows (16-byte or one-element loads), or the tiles on a copy of W."""
    import tilegemm
    from tilegemm import dispatch

    monkeypatch.setattr(dispatch, "transposed_contiguous", lambda X: True)

    def says(m, n, k):
        a, b = np.ones((m, k), np.float32), np.ones((k, n), np.float32)
        return tilegemm.explain(a, b, kernel="splitk_unrolled").splitlines()[-1]

    assert "decode form of x @ Wᵀ: 8 warps a block, 2 columns a warp (256 blocks, 132 SMs)" in says(16, 4096, 4096)
    assert "decode form of x @ Wᵀ: 4 warps a block, 4 columns a warp" in says(8, 4095, 4096)  # (any N)
    assert ("decode form of x @ Wᵀ: 8 warps a block, 1 column a warp, 4 warps splitting each column's K (512 blocks"
            in says(1, 1024, 4096))  # (a narrow weight)
    assert "decode form of x @ Wᵀ: 4 warps a block, 4 columns a warp (1792 blocks" in says(16, 28672, 8192)
    assert "reading W's rows in place: 64×128 tiles" in says(64, 4096, 4096)
    assert "one-element loads" in says(9, 13, 4096)  # (too few columns for the decode form; N off 16 bytes)
    assert "on a copy of W in B's layout" in says(1024, 4096, 4096)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(1000, 1000, 1000), (128, 1024, 4096), (777, 1234, 4321), (2047, 2049, 2048),
                                   (100, 12345, 678), (256, 256, 256), (4095, 4097, 1023)])
def test_splitk_unrolled_on_the_device(shape):
    """On a GPU: 16-byte atomic adds in every split kernel's SASS (sm_90), no spills, the resident
    blocks the wave model assumes, and every route right."""
    from tilegemm.bench import sass
    from tilegemm.kernels.simt import k17_splitk_unrolled as k17

    recs = sass.resources(registry.get("splitk_unrolled"), route="gpu")
    sm90 = _cuda.cuda.get_current_device().compute_capability >= (9, 0)
    for rec, tile in zip(recs, k17.TILES, strict=True):
        assert rec["LDL"] == 0 and rec["STL"] == 0 and rec["blocks_per_sm"] == tile.per_sm, rec
        assert rec["RED"].get("128", 0) > 0 or not sm90, rec
    a, b = random_operands(*shape, seed=4)
    r = check(run("splitk_unrolled", a, b), a, b, kernel="splitk_unrolled")
    assert r.ok, str(r)
