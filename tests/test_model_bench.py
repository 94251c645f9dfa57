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
    path = tmp_path / "model.json"
    assert cli.main(["model-bench", "--runs", "1", "--json", str(path)]) == 0
    doc = json.loads(path.read_text())
    recs = [r for r in doc["records"] if "ratio" in r]
    assert {(r["phase"], r["batch"]) for r in recs} == {("prefill", 1), ("prefill", 2), ("decode", 1), ("decode", 2)}
    for r in recs:
        assert r["tokens_per_s"] > 0 and r["ref_tokens_per_s"] > 0 and r["first_forward_s"] > 0
        assert r["logits_rel_err"] < 1e-5 and r["argmax_agree"] == 1.0
        assert r["counts"]["tilegemm"] > 0 and r["counts"]["torch"] == 0  # every Linear of the model on tilegemm
    assert "not a GPU's" in capsys.readouterr().out
    assert cli.main(["model-bench", "--modes", "graph"]) == 2  # CUDA graphs need a GPU: one line, no traceback
