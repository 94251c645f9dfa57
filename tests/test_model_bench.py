"""`tilegemm model-bench` end to end on the CPU: a tiny Llama-shaped model from transformers,
patched and unpatched, prefill and decode, with the logits compared (the GPU run is the benchmark)."""

from __future__ import annotations

import json

import pytest

from tilegemm import cli

torch = pytest.importorskip("torch")
pytest.importorskip("transformers", reason="the model benchmark's optional extra (pip install 'tilegemm[model]')")


def test_model_bench_on_a_tiny_model(tmp_path, capsys):
    if torch.cuda.is_available():
        pytest.skip("checks the CPU run; on a GPU the command builds Llama-3-8B")
    from tilegemm.bench import model as mb

    path = tmp_path / "model.json"
    assert cli.main(["model-bench", "--runs", "2", "--json", str(path)]) == 0
    doc = json.loads(path.read_text())
    recs = [r for r in doc["records"] if "ratio" in r]
    assert {(r["phase"], r["batch"]) for r in recs} == {("prefill", 1), ("prefill", 2), ("decode", 1), ("decode", 2)}
    for r in recs:
        assert r["tokens_per_s"] > 0 and r["ref_tokens_per_s"] > 0 and r["first_forward_s"] > 0
        assert r["logits_rel_err"] < 1e-5 and r["argmax_agree"] == 1.0
        # the first call's products, every Linear on tilegemm: 2 layers × 7 + lm_head a forward
        forwards = 1 if r["phase"] == "prefill" else mb.CPU_PLAN["new"]
        assert r["counts"] == {"tilegemm": 15 * forwards, "torch": 0}, r
    assert "not a GPU's" in capsys.readouterr().out
    # the logits check: every input the phases run (prefills; each decode batch's prompt and one token)
    acc = doc["accuracy"]
    assert [(a["batch"], a["seq"]) for a in acc] == [(1, 32), (2, 16), (1, 8), (1, 1), (2, 8), (2, 1)]
    for a in acc:  # an FP32 model: the wide copy is FP64, and both sides are within FP32's rounding of it
        assert a["wide"] == "float64" and a["rel_err"] < 1e-5 and a["argmax_agree"] == 1.0, a
        assert 0 < a["ref_wide_rel_err"] < 1e-5 and 0 < a["ours_wide_rel_err"] < 1e-5, a
    decode1 = next(r for r in recs if r["phase"] == "decode" and r["batch"] == 1)
    assert decode1["logits_rel_err"] == max(a["rel_err"] for a in acc if a["batch"] == 1 and a["seq"] in (8, 1))
    text = mb.render(doc, str(tmp_path / "model.png"))
    rows = [line for line in text.splitlines() if line.startswith("| tiny |")]
    assert len(rows) == len(recs) + len(acc) and all(f"{r['ratio']:.3f}" in text for r in recs)
    assert "| tiny | 2×1 |" in text and "ours against FP64" in text
    assert (tmp_path / "model.png").stat().st_size > 10_000
    assert cli.main(["model-bench", "--modes", "graph"]) == 2  # CUDA graphs need a GPU: one line, no traceback
    assert cli.main(["model-bench", "--no-timing", "--modes", "eager"]) == 2
    assert cli.main(["model-bench", "--no-timing", "--merge", str(path), "--json", str(path)]) == 2


def test_the_logits_check_comes_after_the_timing_and_a_failed_one_is_said(monkeypatch):
    """The check runs after the timed phases (its forwards would otherwise make the plans that the
    first forward is timed making), and a check that fails (out of memory for the wide copy, say)
    is an entry with its error, said in the report, while the timing stands."""
    from tilegemm.bench import model as mb

    net = mb.build(mb.TINY, None, "cpu", torch.float32)
    calls = []
    timing = mb._phases
    monkeypatch.setattr(mb, "_phases", lambda *a: (calls.append("timing"), timing(*a))[1])

    def check(*a, **k):
        calls.append("check")
        raise MemoryError("the wide copy")

    monkeypatch.setattr(mb, "accuracy", check)
    got = []
    plan = dict(mb.CPU_PLAN, prefill=[(1, 8)], decode=[1])
    recs = mb.measure("tiny", net, plan, ["eager"], 1, "cpu", progress=lambda s: None, on_accuracy=got.append)
    assert calls == ["timing", "check"] and len(recs) == 2 and all(r["tokens_per_s"] > 0 for r in recs)
    assert got == [[dict(model="tiny", error="MemoryError: the wide copy")]]
    assert all("logits_rel_err" not in r for r in recs)
    text = mb.render(dict(records=recs, accuracy=got[0], runs=1))
    assert "tiny: the logits check did not run: MemoryError: the wide copy" in text and "on one input" not in text


def test_the_logits_check_sees_a_wrong_product(monkeypatch):
    """The check is not blind: patched layers that scale the weight by 1.01 show a relative error
    against torch's of about 1e-2 (and none against themselves: torch's own side is unchanged)."""
    from tilegemm import torchop
    from tilegemm.bench import model as mb

    net = mb.build(mb.TINY, None, "cpu", torch.float32)
    g = torch.Generator().manual_seed(5)
    ids = lambda b, s: torch.randint(0, mb.TINY["vocab_size"], (b, s), generator=g)  # noqa: E731
    monkeypatch.setattr(torchop, "_linear", lambda x, w, b, counts: torch.nn.functional.linear(x, w * 1.01, b))
    (a,) = mb.accuracy("tiny", net, [(2, 8)], ids, "cpu", progress=lambda s: None)
    assert a["rel_err"] > 5e-3 and a["ours_wide_rel_err"] > 5e-3 and a["ref_wide_rel_err"] < 1e-5, a


def test_static_decode_is_greedy_decoding():
    """The graph mode's decode loop (a static KV cache, the position and the tokens kept on the
    device so that each step can be captured) gives the tokens of greedy decoding without a
    cache, patched or not, and again on a second run over the same cache."""
    import tilegemm
    from tilegemm.bench import model as mb

    net = mb.build(mb.TINY, None, "cpu", torch.float32)
    prompt = torch.randint(0, mb.TINY["vocab_size"], (2, 8), generator=torch.Generator().manual_seed(3))
    new = 6
    with torch.no_grad():
        seq = prompt  # greedy decoding the long way: the whole sequence's forward for each token, no cache
        for _ in range(new):
            seq = torch.cat([seq, net(seq, use_cache=False).logits[:, -1].argmax(-1, keepdim=True)], 1)
        want = seq[:, 8:]
        for patched in (False, True):
            with tilegemm.patch(net) if patched else _nothing():
                prefill, step, tokens = mb._static_decode(net, prompt, new)
                for _ in range(2):  # a second run over the same cache must not see the first's entries
                    tokens.zero_()
                    prefill()
                    for _ in range(new - 1):
                        step()
                    assert torch.equal(tokens, want), (patched, tokens, want)


def test_graph_mode_records_on_the_cpu_stand_in():
    """Graph mode's phases run end to end where CUDA graphs are stood in for by the steps
    themselves (the CLI offers graph mode only with a GPU; this checks the bookkeeping)."""
    from tilegemm.bench import model as mb

    net = mb.build(mb.TINY, None, "cpu", torch.float32)
    recs = mb.measure("tiny", net, mb.CPU_PLAN, ["graph"], 1, "cpu", progress=lambda s: None)
    assert all("error" not in r for r in recs), recs
    assert {(r["phase"], r["batch"]) for r in recs} == {("prefill", 1), ("prefill", 2), ("decode", 1), ("decode", 2)}
    for r in recs:
        assert r["mode"] == "graph" and r["tokens_per_s"] > 0
        # the stand-in's warm-up: one forward for prefill; the prompt's and one token's for decode
        assert r["counts"] == {"tilegemm": 15 if r["phase"] == "prefill" else 30, "torch": 0}, r


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_graph_mode_captures_a_patched_model_on_the_gpu(dtype):
    """On a GPU, graph mode captures the patched model's decode steps in CUDA graphs (tilegemm's
    launches inside the capture: the SIMT path for float32, the tensor cores for bfloat16), and
    the replays generate the tokens that the same steps give uncaptured, with other tensors
    allocated between capture and replay (the graphs' own tensors must outlive the capture)."""
    import tilegemm
    from tilegemm.bench import model as mb

    net = mb.build(mb.TINY, None, "cuda", getattr(torch, dtype))
    prompt = torch.randint(0, mb.TINY["vocab_size"], (2, 8), generator=torch.Generator().manual_seed(3)).cuda()
    new = 6
    with torch.no_grad(), tilegemm.patch(net) as p:
        prefill, step, want = mb._static_decode(net, prompt, new)
        prefill()
        for _ in range(new - 1):
            step()
        call, got = mb._graphed(net, "decode", prompt, new, "cuda")
        got.zero_()
        # allocations between capture and replay: they would take the blocks of any tensor the
        # graphs use that was left to die (the static cache, the position, the tokens)
        junk = [torch.full((n,), 7, device="cuda", dtype=torch.int64) for n in (1, 8, 64, 512, 4096) for _ in range(64)]
        call()
        torch.cuda.synchronize()
        assert all(bool((j == 7).all()) for j in junk)
    assert torch.equal(got, want) and p.counts["torch"] == 0 and p.counts["tilegemm"] > 0
    recs = mb.measure("tiny", net, mb.CPU_PLAN, ["graph"], 2, "cuda", progress=lambda s: None)
    assert all("error" not in r for r in recs) and len(recs) == 4, recs


def _written(tmp_path, docs) -> list[str]:
    """Each document as a JSON file under tmp_path (p0.json, p1.json, …): the merge's parts."""
    paths = [str(tmp_path / f"p{i}.json") for i in range(len(docs))]
    for path, d in zip(paths, docs):
        with open(path, "w") as f:
            json.dump(d, f)
    return paths


def test_merge_joins_runs_over_different_models(tmp_path, capsys):
    """`model-bench --merge`: one model per GPU call, joined with each part's models and date (the
    report names them); a model in two parts, or another plan, is one clear line and exit 2."""
    from tilegemm.bench import model

    def part(name, date, runs=3):
        return dict(schema="tilegemm.model/1", environment=dict(date=date, gpu=dict(name="G")), runs=runs,
                    modes=["eager"], plan=dict(decode=[1]),
                    records=[dict(model=name, phase="decode", mode="eager", batch=1, seq=128, tokens_per_s=2.0,
                                  ref_tokens_per_s=1.0, ratio=2.0, first_forward_s=0.1, ref_first_forward_s=0.2,
                                  logits_rel_err=0.0, argmax_agree=1.0)])
    paths = _written(tmp_path, [part("a", "d1"), part("b", "d2"), part("a", "d3"), part("c", "d4", runs=1)])
    out = str(tmp_path / "m.json")
    assert cli.main(["model-bench", "--merge", paths[0], paths[1], "--json", out]) == 0
    doc = json.load(open(out))
    assert [r["model"] for r in doc["records"]] == ["a", "b"]
    assert doc["parts"] == [dict(models=["a"], date="d1"), dict(models=["b"], date="d2")]
    assert "(a d1; b d2;" in model.render(doc)
    capsys.readouterr()
    assert cli.main(["model-bench", "--merge", paths[0], paths[2], "--json", out]) == 2
    assert cli.main(["model-bench", "--merge", paths[0], paths[3], "--json", out]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == ["tilegemm model-bench --merge: a is measured in parts 1 and 2",
                   "tilegemm model-bench --merge: part 2 ran another plan than part 1 (runs, modes, plan)"]


def test_the_ratio_pairs_each_run_with_its_own_reference(tmp_path):
    """A figure's ratio is the median over runs of torch's time / ours in the same run, not torch's
    median over ours (which paired one run's reference with another run's ours: the H200's 8B decode
    8×128 read 1.040 where its runs' own ratios have the median 1.105). --merge re-derives it for
    parts written before; a loss that rounds to 1.000 is shown to four places."""
    from tilegemm.bench import model

    ours, ref = [1.0, 1.0, 2.0], [0.9, 2.0, 2.5]  # runs' ratios 0.9, 2.0, 1.25 (median 1.25); medians' ratio 2.0
    assert model.paired_ratio(ours, ref) == pytest.approx(1.25)
    assert (model.ratio_text(0.99957), model.ratio_text(1.0004), model.ratio_text(0.981)) == ("0.9996", "1.000",
                                                                                               "0.981")
    rec = dict(model="a", phase="decode", mode="eager", batch=1, seq=128, tokens_per_s=2.0, ref_tokens_per_s=1.0,
               ratio=2.0, first_forward_s=0.1, ref_first_forward_s=0.2, runs=dict(ours_s=ours, ref_s=ref))
    part = dict(schema="tilegemm.model/1", environment=dict(date="d", gpu=dict(name="G")), runs=3,
                modes=["eager"], plan=dict(decode=[1]), records=[rec])
    (path,) = _written(tmp_path, [part])
    out = str(tmp_path / "m.json")
    assert cli.main(["model-bench", "--merge", path, "--json", out]) == 0
    doc = json.load(open(out))
    assert doc["records"][0]["ratio"] == pytest.approx(1.25) and "| 1.250 |" in model.render(doc)


def test_merge_gives_timed_records_a_later_logits_check(tmp_path, capsys):
    """`model-bench --no-timing` (the logits check alone, another run, another plan's runs and
    modes) joined to a merged timed document: the timed parts keep their dates, the records take
    their inputs' figures (a decode record the worse of its prompt's and its step's), the report
    names the check's part; a model checked in two parts is refused."""
    from tilegemm.bench import model

    plan = dict(prefill=[[1, 64]], decode=[1], prompt=128, new=128)
    rec = lambda phase, seq: dict(model="a", phase=phase, mode="eager", batch=1, seq=seq, tokens_per_s=2.0,  # noqa: E731
                                  ref_tokens_per_s=1.0, ratio=2.0, first_forward_s=0.1, ref_first_forward_s=0.2,
                                  logits_rel_err=0.0, argmax_agree=1.0)
    timed = dict(schema="tilegemm.model/1", environment=dict(date="d0", gpu=dict(name="G")), runs=3,
                 modes=["eager"], plan=plan, records=[rec("prefill", 64), rec("decode", 128)],
                 parts=[dict(models=["a"], date="d1")])
    entry = lambda seq, err, agree: dict(model="a", batch=1, seq=seq, rel_err=err, argmax_agree=agree,  # noqa: E731
                                         ref_wide_rel_err=0.03, ref_wide_argmax_agree=0.9, ours_wide_rel_err=0.03,
                                         ours_wide_argmax_agree=0.9, wide="float32")
    check = dict(schema="tilegemm.model/1", environment=dict(date="d2", gpu=dict(name="G")), runs=3, modes=[],
                 plan=plan, records=[], accuracy=[entry(64, 0.0, 1.0), entry(128, 0.01, 0.95), entry(1, 0.03, 1.0)])
    paths = _written(tmp_path, [timed, check])
    out = str(tmp_path / "m.json")
    assert cli.main(["model-bench", "--merge", paths[0], paths[1], "--json", out]) == 0
    doc = json.load(open(out))
    assert doc["modes"] == ["eager"] and doc["runs"] == 3 and len(doc["accuracy"]) == 3
    assert doc["parts"] == [dict(models=["a"], date="d1"), dict(models=["a"], date="d2", logits_only=True)]
    pre, dec = doc["records"]
    assert (pre["logits_rel_err"], pre["argmax_agree"]) == (0.0, 1.0)
    assert (dec["logits_rel_err"], dec["argmax_agree"]) == (0.03, 0.95)
    text = model.render(doc)
    assert "(a d1; a d2 (logits check);" in text and "| a | 1×1 | 3.00e-02 | 1.0000 | 3.00e-02 (0.9000) |" in text
    capsys.readouterr()
    assert cli.main(["model-bench", "--merge", paths[1], paths[1], "--json", out]) == 2
    assert capsys.readouterr().err.strip() == "tilegemm model-bench --merge: a is checked in parts 1 and 2"
    # a model timed before the check existed, beside one checked: its one input's line stays
    old = dict(timed, records=[dict(rec("prefill", 64), model="b")], parts=[dict(models=["b"], date="d0")])
    both = model.merge([doc, old])
    text = model.render(both)
    assert "| a | 1×64 | 0.00e+00 |" in text
    assert "Prefill logits against torch's on one input: b: relative error 0.00e+00" in text
    # a part that is no result: one line
    (tmp_path / "x").mkdir()
    (bad,) = _written(tmp_path / "x", [[1, 2]])
    assert cli.main(["model-bench", "--merge", bad, paths[0], "--json", out]) == 2
    assert capsys.readouterr().err.strip() == \
        "tilegemm model-bench --merge: part 1 is not a `tilegemm model-bench` result (a JSON list)"


def test_a_run_is_the_median_of_its_calls_sized_by_a_warm_pair():
    """model-bench's runs: a warm pair (not kept) sizes a run at RUN_S a side (here 0.3 s a call:
    3 calls), the sides alternate call by call (ABBA), and a run's figure is the median of its own
    consecutive calls on each side; a call longer than RUN_S makes a run of one, and a call too
    short to see makes CALLS_MAX."""
    from tilegemm.bench import model

    order = []

    def side(name, values):
        it = iter(values)

        def call():
            order.append(name)
            return next(it)
        return call

    ours = side("o", [0.3, 1.0, 2.0, 3.0, 10.0, 20.0, 30.0, 100.0, 200.0, 300.0])
    ref = side("r", [0.25, 4.0, 5.0, 6.0, 40.0, 50.0, 60.0, 400.0, 500.0, 600.0])
    t_ours, t_ref, calls = model._runs(ours, ref, 3)
    assert calls == 3 and t_ours == [2.0, 20.0, 200.0] and t_ref == [5.0, 50.0, 500.0]
    assert order[:2] == ["o", "r"] and order[2:8] == ["o", "r", "r", "o", "o", "r"]  # warm pair, then ABBA
    assert model._runs(lambda: 4.0, lambda: 3.5, 3) == ([4.0] * 3, [3.5] * 3, 1)
    t_ours, t_ref, calls = model._runs(lambda: 0.0, lambda: 0.0, 2)
    assert calls == model.CALLS_MAX and t_ours == [0.0, 0.0]


def test_the_table_says_how_many_calls_a_run_took_model_by_model():
    from tilegemm.bench import model

    rec = lambda m, c=None: dict(model=m, **({} if c is None else dict(calls_per_run=c)))  # noqa: E731
    assert model._calls_words([rec("a"), rec("b")]) == ", a call a run"
    said = model._calls_words([rec("a", 1), rec("a", 5), rec("b")])
    assert "a: 1–5" in said and "b: 1;" in said, said
    assert "c: 5;" in model._calls_words([rec("c", 5), rec("c", 5)])


def test_slice_layers_without_the_slice_is_said(capsys):
    """`--slice-layers 5` on a run without llama3-70b-slice (a CPU's tiny, or --models naming others)
    ran as if it were not given, exit 0."""
    pytest.importorskip("transformers")
    from tilegemm import cli

    for argv, says in ((["--slice-layers", "5"], "this run leaves out"),
                       (["--models", "tiny", "--slice-layers", "5"], "--models tiny leaves out")):
        if argv[0] == "--slice-layers" and __import__("torch").cuda.is_available():
            continue  # (a GPU's default runs the slice)
        assert cli.main(["model-bench", *argv]) == 2
        err = capsys.readouterr().err
        assert "--slice-layers sizes llama3-70b-slice" in err and says in err and len(err.strip().splitlines()) == 1
