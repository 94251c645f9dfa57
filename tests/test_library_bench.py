"""`tilegemm library` and `tilegemm tune` without a GPU: their reports from synthetic results, the
offline database derivation, and one clear line (no traceback) where a GPU is needed."""

from __future__ import annotations

import json

import pytest

from tilegemm import cli
from tilegemm.bench import library


def _doc():
    recs = []
    for (m, n, k), eager, device in (((256, 256, 256), 1.10, 0.98), ((4096, 4096, 4096), 1.02, 1.01),
                                     ((1, 4096, 4096), 0.90, 1.20)):
        for mode, ratio in (("eager", eager), ("device", device)):
            recs.append(dict(dtype="bf16", m=m, n=n, k=k, mode=mode, ours_ms=1.0, ref_ms=ratio, ratio=ratio,
                             runs=[dict(ours_ms=1.0, ref_ms=ratio, ratio=ratio)] * 3))
    recs.append(dict(dtype="fp8", m=3000, n=5000, k=7000, mode="eager", error="RuntimeError: _scaled_mm"))
    return dict(environment=dict(gpu=dict(name="NVIDIA H200"), date="2026-11-23"), harness=dict(runs=3),
                records=recs, host_us=[dict(dtype="bf16", path="tilegemm.matmul", ours_us=10.1, ref="torch.mm",
                                            ref_us=11.4)],
                first_call=[dict(triton_cache="cold", m=3000, n=5000, k=7000, dtype="bfloat16", first_s=0.4,
                                 second_s=0.0001)])


def test_summary_and_report_of_both_clocks():
    doc = _doc()
    s = library.summarise(doc["records"])
    assert s["bf16/eager"]["shapes"] == 3 and s["bf16/eager"]["below_095"] == 1
    assert s["bf16/eager"]["worst"] == dict(shape=[1, 4096, 4096], ratio=0.90)
    assert abs(s["bf16/device"]["geomean"] - (0.98 * 1.01 * 1.20) ** (1 / 3)) < 1e-12
    text = library.render(doc)
    assert "| bf16 | 3 | 1.003 | 0.900 (1×4096×4096); 1 under 0.95 | 1.059 | 0.980 (256×256×256); 0 under 0.95 |" \
        in text  # eager (1.10·1.02·0.90)^(1/3); the shapes under 0.95: one eager, none on the device clock
    assert "`tilegemm.matmul` | 10.1 | `torch.mm` | 11.4" in text and "| cold | 3000×5000×7000 bfloat16 | 0.400 |" in text
    assert "RuntimeError: _scaled_mm" in text  # a shape with no ratio says why
    assert "| bf16 | 4096×4096×4096 | eager |" not in library.render(doc, full=False)
    assert "(one run: 400 calls back to back, median of 15):" in text  # a run from before the alternating order
    assert "(one sample each, host clock" in text
    doc["harness"]["host_order"] = library.HOST_ORDER
    assert f"median of 15, {library.HOST_ORDER}):" in library.render(doc)


def test_the_report_names_the_fp8_references_accumulation():
    """FP8 is timed against torch._scaled_mm with fast accumulation, as gemm's default computes;
    records from before name the bare torch._scaled_mm, its default mode, and the report says so."""
    fp8 = dict(dtype="fp8", m=64, n=64, k=64, mode="eager", ours_ms=1.0, ref_ms=1.0, ratio=1.0)
    doc = _doc()
    doc["records"] = [dict(fp8, reference=library.FP8_REFERENCE)]
    assert "torch._scaled_mm for FP8, with fast accumulation, as gemm's default)" in library.render(doc)
    doc["records"] = [dict(fp8, reference="torch._scaled_mm")]
    assert "torch._scaled_mm for FP8, in its default mode: FP32 promotion" in library.render(doc)
    doc["records"] = [dict(fp8, reference="torch._scaled_mm"), dict(fp8, reference=library.FP8_REFERENCE)]
    assert "each record naming its mode" in library.render(doc)
    doc["records"] = [dict(fp8, reference=library.FP8_REFERENCE),
                      dict(fp8, dtype="fp8-promoted", reference=library.FP8_PROMOTED_REFERENCE)]
    text = library.render(doc)
    assert "for fp8-promoted, `gemm(..., fast_accum=False)`, torch._scaled_mm in its default mode" in text
    assert "| fp8-promoted | 1 (1 of them the median of fewer runs) | 1.000 |" in text
    doc["records"] = doc["records"][1:]  # fp8-promoted alone: no word of FP8's own reference
    text = library.render(doc)
    assert "for FP8, with" not in text and "(cuBLAS through torch; for fp8-promoted, `gemm(..., fast_accum=False)`" in text


def test_fp8_and_fp8_promoted_call_ours_and_the_reference_in_the_same_accumulation(monkeypatch):
    """fp8: gemm's default (fast_accum) against _scaled_mm's fast accumulation; fp8-promoted:
    gemm(..., fast_accum=False) against _scaled_mm's default mode, both adding partial sums in FP32."""
    import torch

    import tilegemm

    seen = []
    monkeypatch.setattr(torch, "_scaled_mm", lambda *a, **kw: seen.append(("ref", kw["use_fast_accum"])), raising=False)
    monkeypatch.setattr(tilegemm, "gemm", lambda *a, **kw: seen.append(("ours", kw["fast_accum"])))
    for dtype in library.FP8:
        library._reference_call(dtype, 1, 2, 3, 4)()
        library._library_call(dtype, 1, 2, 3, 4)()
    assert seen == [("ref", True), ("ours", True), ("ref", False), ("ours", False)]
    assert set(library.FP8) <= set(library.DTYPES)


def test_shapes_left_out_of_the_means_are_counted_in_the_table():
    """A shape not timed for an error left the means and the shape count without a word (the H100's
    FP8 row read 60 shapes, 8 more refused by torch._scaled_mm in a run that recorded it so); a shape whose result failed its check in a run kept
    its ratio in the means; a median of fewer runs than asked was not said. Each is said now, and a
    wrong result's time is in no mean."""
    doc = _doc()
    assert "| fp8 | 0 (and 1 not timed, for an error the shapes' table gives: not in the means) | — |" in \
        library.render(doc)
    recs = doc["records"]
    recs[0]["failed_checks"] = recs[1]["failed_checks"] = ["max rel err 0.5"]  # 256³, both clocks
    recs[2]["runs"] = recs[2]["runs"][:2]  # 4096³ eager: a run lost
    s = library.summarise(recs)
    assert s["bf16/eager"]["shapes"] == 2 and abs(s["bf16/eager"]["geomean"] - (1.02 * 0.90) ** 0.5) < 1e-12
    assert ("| bf16 | 2 (and 1 whose result failed a check in a run: not in the means; 1 of them the median of "
            "fewer runs) |") in library.render(doc)
    for r in recs:
        r["failed_checks"] = ["max rel err 0.5"]
    assert "| bf16 | 0 (and 3 whose result failed a check in a run: not in the means) | — |" in library.render(doc)


def test_a_shape_the_reference_refuses_is_timed_for_ours_alone_without_a_ratio():
    """torch._scaled_mm takes N and K in multiples of 16; FP8 gemm runs the others (12 of the 30
    shapes of a held-out draw). Such a shape keeps our time on each clock and the reference's
    reason, is counted apart from the rated shapes, and no ratio is made up for it."""
    why = "RuntimeError: mat2 shape (1696x376) must be divisible by 16"
    per = {("fp8", 696, 376, 1696): [dict(dtype="fp8", m=696, n=376, k=1696, check="ok", ref_error=why,
                                          eager=dict(ours_ms=x, samples=10), device=dict(ours_ms=x / 2, samples=10))
                                     for x in (0.03, 0.01, 0.02)],
           ("fp8", 512, 512, 512): [dict(dtype="fp8", m=512, n=512, k=512, check="ok",
                                         eager=dict(ours_ms=0.01, ref_ms=0.011),
                                         device=dict(ours_ms=0.01, ref_ms=0.012))] * 3}
    recs = library.records(per, ("eager", "device"))
    alone = [r for r in recs if r["m"] == 696]
    assert [(r["mode"], r["ours_ms"]) for r in alone] == [("eager", 0.02), ("device", 0.01)]
    assert all("ratio" not in r and "ref_ms" not in r and r["ref_error"] == why and len(r["runs"]) == 3 for r in alone)
    s = library.summarise(recs)
    assert s["fp8/device"]["shapes"] == 1 and abs(s["fp8/device"]["geomean"] - 1.2) < 1e-12
    text = library.render(dict(environment=dict(gpu=dict(name="NVIDIA H200"), date="2026-12-02"), harness=dict(runs=3),
                               records=recs))
    assert "| fp8 | 1 (and 1 the reference refused: ours timed alone) | 1.100 |" in text
    assert f"| fp8 | 696×376×1696 | device | 0.0100 | — | — | torch._scaled_mm refused it: {why} |" in text
    only = dict(environment=dict(gpu=dict(name="NVIDIA H200"), date="2026-12-02"), harness=dict(runs=3), records=alone)
    assert "| fp8 | 0 (and 1 the reference refused: ours timed alone) | — |" in library.render(only)
    # a run where the reference raised beside runs where it did not: the ratio of those that have one
    mixed = {("fp8", 512, 512, 512): per[("fp8", 512, 512, 512)][:2] + per[("fp8", 696, 376, 1696)][:1]}
    r = library.records(mixed, ("device",))[0]
    assert r["ratio"] == 1.2 and len(r["runs"]) == 2
    # a failed check is said before the refusal, in the record and on the progress line
    wrong = dict(per[("fp8", 696, 376, 1696)][0], check="max rel err 0.5")
    del wrong["eager"], wrong["device"]
    assert library.records({("fp8", 696, 376, 1696): [wrong]}, ("device",))[0]["error"] == "check: max rel err 0.5"
    assert library._progress_words(wrong) == "check: max rel err 0.5"
    assert library._progress_words(per[("fp8", 696, 376, 1696)][0]) == f"eager 0.0300 ms device 0.0150 ms {why}"
    assert library._progress_words(per[("fp8", 512, 512, 512)][0]) == "eager 1.100 device 1.200"


def test_gpu_commands_say_so_in_one_line(capsys):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("checks the no-GPU message")
    for argv in (["library"], ["tune", "--sizes", "64"]):
        assert cli.main(argv) == 2
        out = capsys.readouterr()
        text = (out.out + out.err).strip()
        assert "GPU" in text and "Traceback" not in text and len(text.splitlines()) == 1, text


def test_tune_derives_decisions_offline(tmp_path, capsys):
    """`tilegemm tune --derive`: the t03/t05 verdict where one was re-timed (and still names the
    configurations it compared), else the lowest eager score, then tuned median; entries the GPU tuned
    stay."""
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    from tilegemm.tuning.cache import TUNER_VERSION as v

    cls = "bf16|bfloat16|bfloat16|nn|nobeta"
    t03, t05, t04 = {"BM": 128}, {"BM": 128, "STAGES": 3}, {"BM": 16, "SPLIT": 4}
    cache = {
        f"tc_tma_persistent|NVIDIA H200|{cls}|8192x8192x8192||{v}": dict(config=t03, ms=1.40, m=8192, n=8192, k=8192),
        f"tc_warp_specialized|NVIDIA H200|{cls}|8192x8192x8192||{v}": dict(config=t05, ms=1.39, m=8192, n=8192, k=8192),
        f"tc_tma_persistent+tc_warp_specialized|NVIDIA H200|{cls}|8192x8192x8192||{v}":
            dict(winner="tc_tma_persistent", ms={"tc_tma_persistent": 1.38, "tc_warp_specialized": 1.39},
                 configs={"tc_tma_persistent": t03, "tc_warp_specialized": t05}),
        f"tc_tma_persistent|NVIDIA H200|{cls}|16x4096x4096||{v}": dict(config=t03, ms=0.012, m=16, n=4096, k=4096),
        f"tc_splitk|NVIDIA H200|{cls}|16x4096x4096||{v}": dict(config=t04, ms=0.009, m=16, n=4096, k=4096),
        f"tc_splitk|NVIDIA H100|{cls}|16x4096x4096||{v}": dict(config=t04, ms=0.001, m=16, n=4096, k=4096),
        f"tc_splitk|NVIDIA H200|{cls}|1x4096x4096||v7": dict(config=t04, ms=0.001, m=1, n=4096, k=4096),
        # two launches: the lower device time, the higher eager score (tuner.eager_score)
        f"tc_tma_persistent|NVIDIA H200|{cls}|1x1024x4096||{v}": dict(config=t03, ms=0.008, score_ms=0.013, m=1,
                                                                      n=1024, k=4096),
        f"tc_splitk|NVIDIA H200|{cls}|1x1024x4096||{v}": dict(config=t04, ms=0.0054, score_ms=0.026, m=1, n=1024,
                                                              k=4096),
    }
    path = tmp_path / "cache.json"
    path.write_text(json.dumps(cache))
    db = tmp_path / "db.json"
    db.write_text(json.dumps(dict(gpu="NVIDIA H200", capability=[9, 0], sms=132,
                                  entries={f"{cls}|1024x1024x1024": dict(rung="tc_persistent", config={}, ms=1, shape=[1, 1, 1])})))
    assert cli.main(["tune", "--derive", str(path), "--gpu", "NVIDIA H200", "--db", str(db)]) == 0
    got = json.loads(db.read_text())
    assert got["entries"][f"{cls}|8192x8192x8192"]["rung"] == "tc_tma_persistent"  # the verdict, not the medians
    assert got["entries"][f"{cls}|16x4096x4096"]["rung"] == "tc_splitk"
    assert got["entries"][f"{cls}|1x1024x4096"]["rung"] == "tc_tma_persistent"  # by eager score, not device time
    assert f"{cls}|1x4096x4096" not in got["entries"]  # another tuner version's entry is not used
    assert got["entries"][f"{cls}|1024x1024x1024"]["rung"] == "tc_persistent" and got["sms"] == 132
    capsys.readouterr()
    for name, text in (("list.json", "[1, 2]"), ("run.json", json.dumps({"schema": "tilegemm.results/1", "records": []})),
                       ("prose.json", "not json")):  # (a list was overwritten, a results file merged into)
        (tmp_path / name).write_text(text)
        assert cli.main(["tune", "--derive", str(path), "--gpu", "NVIDIA H200", "--db", str(tmp_path / name)]) == 2
        assert "not a tuning database" in capsys.readouterr().err or name == "prose.json"
        assert (tmp_path / name).read_text() == text


def test_decode_part_bandwidth_table_and_merge():
    """The decode products (B = Wᵀ): GB/s of the bytes moved on the device clock beside the read
    bandwidth, in their own table, out of the set's geometric means; merged from the part that
    measured them, and refused from two."""
    shapes = library.decode_shapes()
    assert len(shapes) == 48 and ("llama3-8b", 1, 1024, 4096) in shapes and ("llama3-70b", 128, 28672, 8192) in shapes
    per = {(dt, 1, 1024, 4096): [dict(dtype=dt, m=1, n=1024, k=4096, check="ok",
                                      device=dict(ours_ms=0.004 * size, ref_ms=0.006 * size),
                                      eager=dict(ours_ms=0.010, ref_ms=0.011 * size))] * 3
           for dt, size in (("bf16", 1), ("fp32", 2))}
    dec = library.decode_records(per, ("eager", "device"), [4000.0, 4200.0, 4100.0])
    dev = {r["dtype"]: r for r in dec["records"] if r["mode"] == "device"}
    moved = (1024 * 4096 + 4096 + 1024) * 2
    assert dev["bf16"]["layout"] == "nt" and dev["bf16"]["model"] == "llama3-8b" and dev["bf16"]["bytes"] == moved
    assert dev["fp32"]["bytes"] == 2 * moved and dev["fp32"]["reference"] == "cuBLAS (torch.matmul, TF32 off)"
    for d in dev.values():  # FP32 moves twice the bytes in twice the time: the same rate
        assert abs(d["gbps"] - moved / 4e-6 / 1e9) < 1e-6 and abs(d["ref_gbps"] - moved / 6e-6 / 1e9) < 1e-6
    assert dec["read_gbps"] == 4100.0
    doc = dict(_doc(), decode=dec)
    assert "read bandwidth" not in library.render(doc, full=False)  # the README's part: the set alone
    text = library.render(doc)
    assert "read bandwidth of 4100 GB/s" in text and "(BF16, FP32; B = Wᵀ)" in text
    assert f"| llama3-8b | bf16 | 1×1024×4096 | 4.0 (6.0) | 1.500 | {moved / 4e-6 / 1e9:.0f}" in text
    assert f"| llama3-8b | fp32 | 1×1024×4096 | 8.0 (12.0) | 1.500 | {moved / 4e-6 / 1e9:.0f}" in text
    assert "- FP32: eager geometric mean 2.200 over 1 (below 0.95: 0); device geometric mean 1.500 over 1" in text
    eager_only = library.decode_records(per, ("eager",), [])
    lines = library.render_decode(eager_only)
    assert "| llama3-8b | bf16 | 1×1024×4096 | — | — | — | — | 1.100 |" in lines
    assert "- BF16: eager geometric mean 1.100 over 1 (below 0.95: 0)" in lines
    for d in (doc, _doc()):
        d["schema"] = "tilegemm.library/1"
    part = dict(doc, records=[], host_us=None, first_call=None)
    merged = library.merge([dict(_doc(), schema="tilegemm.library/1"), part])
    assert merged["decode"] == dec and len(merged["records"]) == len(_doc()["records"])
    with pytest.raises(ValueError, match="decode is measured in parts 1 and 2"):
        library.merge([part, part])
    again = library.merge([dict(merged, decode=None), dict(part, environment=dict(part["environment"], date="D2"))])
    assert [p.get("decode", False) for p in merged["parts"]] == [False, True]
    assert again["decode"] == dec and [p.get("decode", False) for p in again["parts"]] == [False, True]
    assert again["parts"][0] == merged["parts"][0] and again["parts"][1]["date"] == "D2"  # a merged part keeps its own
    p0 = merged["parts"][0]
    assert f"({', '.join(p0['dtypes'])}, host µs, first calls {p0['date']}; decode D2)" in library.render(again)  # the old decode part gone


def test_a_part_of_host_us_and_first_calls_alone_keeps_its_date():
    """`tilegemm library --dtypes ""` measures host µs and first calls alone: merged, that part stays
    (its date rendered, the figures its own), the other part's flags go with the figures stripped from
    it, and two parts with host µs are refused."""
    old, new = _doc(), _doc()
    for d in (old, new):
        d["schema"] = "tilegemm.library/1"
    new.update(records=[], environment=dict(new["environment"], date="D9"),
               host_us=[dict(new["host_us"][0], ours_us=9.0)])
    with pytest.raises(ValueError, match="host_us is measured in parts 1 and 2"):
        library.merge([old, new])
    merged = library.merge([dict(old, host_us=None, first_call=None), new])
    assert merged["host_us"][0]["ours_us"] == 9.0 and merged["first_call"] == new["first_call"]
    assert [(p["dtypes"], p.get("host_us", False), p["date"]) for p in merged["parts"]] == [
        (["bf16", "fp8"], False, "2026-11-23"), ([], True, "D9")]
    assert "(bf16, fp8 2026-11-23; host µs, first calls D9)" in library.render(merged)
    again = library.merge([dict(merged, host_us=None), dict(_doc(), schema="tilegemm.library/1", records=[],
                                                           first_call=None)])
    assert [p.get("host_us", False) for p in again["parts"]] == [False, False, True]  # the old host part: first calls
    assert again["parts"][1]["first_call"] and "host_us" not in again["parts"][1]


def test_a_run_reads_its_after_clocks_once_every_part_is_measured(monkeypatch):
    """The document's clocks bracket the whole run: "after" is read once host µs and first calls are
    measured too (a part of those alone, `--dtypes ""`, read it before either ran)."""
    from tilegemm.bench import clocks

    events = []
    flush = type("Flush", (), dict(mode="l2-flush", kind="read"))()
    monkeypatch.setattr(library, "_Clock", lambda: type("Clock", (), dict(flush=flush))())
    monkeypatch.setattr(clocks, "read", lambda: events.append("clocks") or dict(source="unavailable", time=len(events)))
    monkeypatch.setattr(library, "host_us", lambda: events.append("host_us") or [])
    monkeypatch.setattr(library, "first_calls", lambda: events.append("first_call") or [])
    doc = library.run([], [], progress=lambda line: None, with_decode=False, shape_set="library")
    assert events == ["clocks", "host_us", "first_call", "clocks"]
    assert doc["clocks"]["before"]["time"] == 1 and doc["clocks"]["after"]["time"] == 4


def test_merge_joins_parts_of_other_dtypes_and_refuses_a_dtype_twice(tmp_path, capsys):
    """A GPU call has a time limit, so the set is measured in parts (BF16/FP16/TF32, then FP8/FP32
    with host µs and first calls): the merged file has every record, each part's date, one summary."""
    a, b = _doc(), _doc()
    for d in (a, b):
        d["schema"] = "tilegemm.library/1"
    a["records"] = [r for r in a["records"] if r["dtype"] == "bf16"]
    a.pop("host_us"), a.pop("first_call")
    b["records"] = [dict(r, dtype="fp8") for r in b["records"] if r["dtype"] == "bf16"]
    b["environment"] = dict(b["environment"], date="2026-11-24", libraries=dict(torch="2.11.0"), code=dict(source="ab"))
    m = library.merge([a, b])
    assert len(m["records"]) == 12 and {p["dtypes"][0] for p in m["parts"]} == {"bf16", "fp8"}
    # the document is as new as its newest part (it kept part 1's date), and each part keeps what ran it
    assert m["environment"]["date"] == "2026-11-24" and m["parts"][1]["code"] == dict(source="ab")
    assert m["parts"][1]["libraries"] == dict(torch="2.11.0") and "code" not in m["parts"][0]
    assert m["host_us"] == b["host_us"] and set(m["summary"]) == {"bf16/eager", "bf16/device", "fp8/eager", "fp8/device"}
    with pytest.raises(ValueError, match="bf16 is measured in parts 1 and 2"):
        library.merge([a, a])
    with pytest.raises(ValueError, match="another harness"):
        library.merge([a, dict(b, harness=dict(runs=1))])
    pa, pb, out = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "m.json"
    pa.write_text(json.dumps(a)), pb.write_text(json.dumps(b))
    assert cli.main(["library", "--merge", str(pa), str(pb), "--json", str(out)]) == 0
    assert len(json.loads(out.read_text())["records"]) == 12
    assert cli.main(["library", "--merge", str(pa), str(pa), "--json", str(out)]) == 2
    assert "measured in parts 1 and 2" in capsys.readouterr().err


def test_merge_refuses_parts_that_flushed_l2_differently_and_keeps_the_timed_parts_harness():
    """Parts that timed products must have flushed L2 the same way (a memset's dirty lines add their
    write-back to a memory-bound call); a part of host µs alone flushed nothing, and the merged
    document names the timed parts' flush even where that part comes first."""
    read, write = "l2-flush by reading 120 MiB (L2 60 MiB, torch)", "l2-flush 120 MiB (L2 60 MiB, torch)"
    host, timed, old = _doc(), _doc(), _doc()
    for d, flush in ((host, write), (timed, read), (old, write)):
        d["schema"], d["harness"] = "tilegemm.library/1", dict(runs=3, flush=flush)
    host["records"] = []
    timed.pop("host_us"), timed.pop("first_call"), old.pop("host_us"), old.pop("first_call")
    timed["records"] = [r for r in timed["records"] if r["dtype"] == "bf16"]
    old["records"] = [dict(r, dtype="fp16") for r in timed["records"]]
    merged = library.merge([host, timed])
    assert merged["harness"]["flush"] == read and merged["host_us"] == host["host_us"]
    assert f"L2 flushed before each sample: {read} (clean lines)." in library.render(merged)
    assert "zeroed (dirty lines" in library.render(old) and "not recorded" in library.render(_doc())
    old["harness"]["flush_kind"] = "write"  # the kind, where recorded, decides (not the mode's words)
    assert "zeroed (dirty lines" in library.render(dict(old, harness=dict(old["harness"], flush=read)))
    # the host part's harness stays (its host_order captions host µs); the timed parts' flush joins it
    host["harness"]["host_order"] = library.HOST_ORDER
    assert library.merge([host, timed])["harness"]["host_order"] == library.HOST_ORDER
    bare = [{k: v for k, v in d.items() if k != "harness"} for d in (host, timed)]  # no harness: merged, rendered
    assert "not recorded" in library.render(library.merge(bare))
    with pytest.raises(ValueError, match="flushed L2 in different ways"):
        library.merge([host, timed, old])


def test_a_held_out_run_names_its_draw_and_does_not_merge_with_another_set():
    """A document's shape set is in its harness: a held-out draw's report names the seed and what
    was drawn; parts of different sets are refused; a document from before the field is `library`."""
    held, lib = _doc(), _doc()
    for d, which in ((held, "held-out:5799"), (lib, None)):
        d["schema"], d["harness"] = "tilegemm.library/1", dict(runs=3, **({"shapes": which} if which else {}))
    assert library.shape_set(lib) == "library" and library.shape_set(held) == "held-out:5799"
    text = library.render(held, full=False)
    assert text.startswith("`tilegemm library` on `held-out:5799`: 30 shapes drawn from seed 5799 that no tuning")
    assert library.render(lib, full=False).startswith("`tilegemm library` on NVIDIA H200")
    lib["records"] = [dict(r, dtype="fp16") for r in lib["records"] if r["dtype"] == "bf16"]
    held["records"] = [r for r in held["records"] if r["dtype"] == "bf16"]
    with pytest.raises(ValueError, match="different shape sets"):
        library.merge([held, lib])
    lib.pop("host_us"), lib.pop("first_call")  # measured by the held-out part
    more = dict(lib, harness=dict(runs=3, shapes="held-out:5799"))
    assert library.shape_set(library.merge([held, more])) == "held-out:5799"
    # a part without products (host µs alone, of no set) first: the merged document is still the draw's
    host = dict(lib, records=[], host_us=held["host_us"], harness=dict(runs=3))
    held.pop("host_us")
    assert library.shape_set(library.merge([host, held, more])) == "held-out:5799"


def test_l2_flush_by_reading_is_torchs_only():
    from tilegemm.bench.timing import L2Flush

    with pytest.raises(ValueError, match="'read' is for torch only"):
        L2Flush(framework="numba", kind="read")
    with pytest.raises(ValueError, match="kind 'erase'"):
        L2Flush(framework="torch", kind="erase")


def test_host_us_forms_compute_what_their_references_do(monkeypatch):
    """The other forms `host_us` times (batched, N-D @ W, x @ Wᵀ, a patched nn.Linear) each call
    what its reference calls: on the CPU, FP32, ours and the reference give one product; a host
    record of a form renders with it, the plain one without."""
    import torch

    from tilegemm import torchop

    served = {"tilegemm": 0, "torch": 0}
    linear = torchop._linear
    monkeypatch.setattr(torchop, "_linear", lambda x, w, b, counts: linear(x, w, b, served))
    forms = library._forms("fp32", device="cpu")
    assert [f[1] for f in forms] == ["batched", "N-D @ W", "x @ Wᵀ", "nn.Linear, patched"]
    with torch.no_grad():
        for path, form, shape, ref_name, ours, ref in forms:
            before = served["tilegemm"]
            got, want = ours(), ref()
            assert got.shape == want.shape and torch.allclose(got, want, rtol=1e-5, atol=1e-5), form
            assert served["tilegemm"] == before + (path == "tilegemm.patch")  # the patched layer's, on tilegemm
    doc = _doc()
    doc["host_us"].append(dict(dtype="fp32", path="tilegemm.patch", form="nn.Linear, patched", shape="64×64 → 64, with bias",
                               ours_us=30.0, ref="nn.Linear", ref_us=25.0))
    text = library.render(doc)
    assert "| bf16 | `tilegemm.matmul` | 10.1 |" in text
    assert "| fp32 | `tilegemm.patch`, nn.Linear, patched (64×64 → 64, with bias) | 30.0 | `nn.Linear` | 25.0 |" in text
    assert "The rows with a form are the other calls a model makes" in text
    assert "other calls a model makes" not in library.render(_doc())  # no form, no such words


def test_merge_with_replace_keeps_what_no_later_part_measured(tmp_path, capsys):
    """A part measured again (a dtype, decode, host µs, first calls) replaces the earlier one with
    --replace: the earlier part keeps the rest under its own date, a part left with nothing goes,
    and without --replace the same parts are refused."""
    old = dict(_doc(), schema="tilegemm.library/1", decode=dict(records=[dict(dtype="bf16", m=1, n=8, k=8)]))
    old["records"] += [dict(r, dtype="tf32") for r in old["records"] if r["dtype"] == "bf16"]
    tf32 = dict(_doc(), schema="tilegemm.library/1", environment=dict(gpu=dict(name="NVIDIA H200"), date="D2"),
                records=[dict(r, dtype="tf32", ratio=2.0) for r in old["records"] if r["dtype"] == "bf16"],
                host_us=None, first_call=None)
    dec = dict(tf32, records=[], environment=dict(tf32["environment"], date="D3"),
               decode=dict(records=[dict(dtype=dt, m=1, n=8, k=8, mode="eager", ratio=1.0) for dt in ("bf16", "fp32")]))
    old["read_error"] = "RuntimeError: the old read"
    with pytest.raises(ValueError, match="tf32 is measured in parts 1 and 2"):
        library.merge([old, tf32, dec])
    m = library.merge([old, tf32, dec], replace=True)
    assert {r["ratio"] for r in m["records"] if r["dtype"] == "tf32"} == {2.0}
    assert len([r for r in m["records"] if r["dtype"] == "bf16"]) == 6 and m["decode"] == dec["decode"]
    assert m["host_us"] == old["host_us"] and m["first_call"] == old["first_call"] and "read_error" not in m
    assert "| None | fp32 | 1×8×8 | — | — | — | — | 1.000 |" in library.render_decode(m["decode"])
    assert [(p["dtypes"], p["date"], [x for x in library.ONCE if p.get(x)]) for p in m["parts"]] == [
        (["bf16", "fp8"], "2026-11-23", ["host_us", "first_call"]), (["tf32"], "D2", []), ([], "D3", ["decode"])]
    again = library.merge([m, dict(dec, environment=dict(dec["environment"], date="D4"))], replace=True)
    assert [p["date"] for p in again["parts"]] == ["2026-11-23", "D2", "D4"]  # the decode-only part gone
    assert library.superseded(dec, {"decode"}) is None
    paths = [tmp_path / f"{i}.json" for i in range(3)]
    for p, d in zip(paths, (old, tf32, dec)):
        p.write_text(json.dumps(d))
    out = tmp_path / "m.json"
    assert cli.main(["library", "--merge", *map(str, paths), "--replace", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["parts"] == m["parts"]
    assert cli.main(["library", "--replace"]) == 2 and "--replace goes with --merge" in capsys.readouterr().err


def test_merge_with_replace_refuses_a_part_that_lost_products_or_is_not_a_library_run():
    """A later part cut short (fewer shapes of a dtype, or decode without a dtype the earlier had)
    would drop the earlier part's other figures: refused, as are parts of another tool or GPU,
    checked before anything is replaced; a part of errors alone is kept."""
    old = dict(_doc(), schema="tilegemm.library/1")
    short = dict(old, records=[r for r in old["records"] if r["dtype"] == "bf16" and r["m"] == 256],
                 host_us=None, first_call=None)
    with pytest.raises(ValueError, match=r"part 2 measured bf16 again without 2 of part 1's products \(bf16 1×4096×4096"):
        library.merge([old, short], replace=True)
    dec = lambda dts: dict(old, records=[], host_us=None, first_call=None,  # noqa: E731
                           decode=dict(records=[dict(dtype=dt, m=1, n=8, k=8) for dt in dts]))
    with pytest.raises(ValueError, match="part 2 measured decode again without 1 of part 1's products"):
        library.merge([dec(["bf16", "fp32"]), dec(["fp32"])], replace=True)
    assert library.merge([dec(["fp32"]), dec(["bf16", "fp32"])], replace=True)["decode"]["records"][0]["dtype"] == "bf16"
    with pytest.raises(ValueError, match="part 2 is not a `tilegemm library` result"):
        library.merge([old, dict(records=[dict(m=1)])], replace=True)
    with pytest.raises(ValueError, match=r"part 2 is not a `tilegemm library` result \(a JSON list\)"):
        library.merge([old, [old]])  # (was AttributeError: 'list' object has no attribute 'get')
    with pytest.raises(ValueError, match="part 2 ran on NVIDIA H100"):
        library.merge([old, dict(old, environment=dict(gpu=dict(name="NVIDIA H100")))], replace=True)
    errors = dict(old, records=[], host_us=None, first_call=None, host_us_error="RuntimeError: x")
    m = library.merge([old, errors], replace=True)
    assert m["host_us"] == old["host_us"] and m["host_us_error"] == "RuntimeError: x"


def test_library_cli_names_an_unknown_dtype_mode_or_decode_dtype_before_needing_a_gpu(capsys):
    """The options are checked first, so a mistake is one line on any machine."""
    assert cli.main(["library", "--decode-dtypes", "fp16"]) == 2
    assert "unknown decode dtype fp16 (of bf16, fp32)" in capsys.readouterr().err
    assert cli.main(["library", "--dtypes", "int8", "--modes", "warm"]) == 2
    err = capsys.readouterr().err
    assert "unknown dtype int8 (of bf16, fp16, tf32, fp8, fp8-promoted, fp32); mode warm (of eager, device)" in err
    assert err.count("\n") == 1


def test_the_host_table_times_a_quantised_fp8_call_against_torchs_recipe():
    """The host µs table's BF16 forms end with gemm(x, Wᵀ, precision="fp8") (gemm quantises both
    operands each call) against the same in torch's operations: amax / 448 scales, e4m3 casts,
    torch._scaled_mm. The reference computes the product (to e4m3's rounding, run here on the
    CPU), and FP32 has no such form."""
    torch = pytest.importorskip("torch")
    forms = library._forms("bf16", device="cpu")
    path, form, shape, ref_name, _, ref = forms[-1]
    assert (path, form, ref_name) == ("tilegemm.gemm", "FP8 quantised by gemm", library.TORCH_FP8)
    assert not any("FP8" in f[1] for f in library._forms("fp32", device="cpu"))
    g = torch.Generator().manual_seed(0)
    x, w = ((torch.rand(64, 64, generator=g) * 2 - 1).bfloat16() for _ in range(2))
    got, want = library._torch_fp8(x, w.t()), x.double() @ w.t().double()
    assert got.dtype == torch.bfloat16 and float((got.double() - want).norm() / want.norm()) < 0.08
