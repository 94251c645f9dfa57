"""`tilegemm model-bench`: a Llama-shaped model from transformers, on tilegemm and on torch, in the same run.

    tilegemm model-bench --json results/h200/model.json        # on a GPU: Llama-3-8B, and a 70B slice
    tilegemm model-bench                                         # without one: a tiny model on the CPU

The models are built from `transformers` configurations with random weights (nothing is
downloaded; `pip install 'tilegemm[model]'`), on the device, in BF16: Llama-3-8B's shapes with all
32 layers, and a slice of Llama-3-70B (its widths, `--slice-layers` layers). The same model runs
patched (`tilegemm.patch`: every nn.Linear on tilegemm; applied around each of our runs, outside
its timing) and unpatched (torch), alternately (ABBA: `tilegemm.sampling`), each figure the median
of `--runs` runs:
- prefill: tokens per second of a forward over batch × sequence tokens (1×2048, 4×512, 1×8192);
- decode: tokens per second of `generate` producing 128 tokens greedily after a 128-token prompt,
  with a KV cache, at batch 1, 8 and 64 (the prompt's prefill is part of the time on both sides);
- modes: eager, and graph (`torch.compile(mode="reduce-overhead")` of the model's forward with a
  static cache: CUDA graphs on both sides);
- the first forward at a batch size not seen before (plans to build, kernels to compile), on both;
- the logits' relative error and argmax agreement against torch's on the same input.
Records: model, phase, mode, batch, seq, tokens_per_s, ref_tokens_per_s, ratio, first_forward_s,
ref_first_forward_s, logits_rel_err, argmax_agree, counts (products on tilegemm and on torch).
"""

from __future__ import annotations

import json
import statistics
import sys
import time

from . import results

LLAMA3_8B = dict(hidden_size=4096, intermediate_size=14336, num_attention_heads=32, num_key_value_heads=8,
                 num_hidden_layers=32, vocab_size=128256, max_position_embeddings=8192 + 512, rope_theta=500000.0)
LLAMA3_70B = dict(hidden_size=8192, intermediate_size=28672, num_attention_heads=64, num_key_value_heads=8,
                  num_hidden_layers=80, vocab_size=128256, max_position_embeddings=8192 + 512, rope_theta=500000.0)
TINY = dict(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=2,
            vocab_size=256, max_position_embeddings=512)
GPU_PLAN = dict(prefill=[(1, 2048), (4, 512), (1, 8192)], decode=[1, 8, 64], prompt=128, new=128)
CPU_PLAN = dict(prefill=[(1, 32), (2, 16)], decode=[1, 2], prompt=8, new=4)


def build(spec: dict, layers: int | None, device, dtype):
    """A LlamaForCausalLM of these widths with random weights, made on the device."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(**dict(spec, **({"num_hidden_layers": layers} if layers else {})))
    torch.manual_seed(0)
    prev = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = LlamaForCausalLM(cfg)
    finally:
        torch.set_default_dtype(prev)
    return model.eval()


def _sync(device) -> None:
    import torch

    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def _timed(fn, device) -> float:
    _sync(device)
    t0 = time.perf_counter()
    fn()
    _sync(device)
    return time.perf_counter() - t0


def measure(name: str, model, plan: dict, modes, runs: int, device, progress=print) -> list[dict]:
    import torch

    import tilegemm

    vocab = model.config.vocab_size
    recs = []
    g = torch.Generator(device="cpu").manual_seed(1)

    def ids(batch, seq):
        return torch.randint(0, vocab, (batch, seq), generator=g).to(device)

    # accuracy: prefill logits, patched against torch's, on one input
    x = ids(1, min(512, plan["prefill"][0][1]))
    with torch.no_grad():
        ref = model(x, use_cache=False).logits.double()
        with tilegemm.patch(model):
            got = model(x, use_cache=False).logits.double()
    rel = float((got - ref).norm() / ref.norm())
    agree = float((got.argmax(-1) == ref.argmax(-1)).double().mean())
    base = dict(model=name, logits_rel_err=rel, argmax_agree=agree)
    progress(f"{name}: logits rel. error {rel:.2e}, argmax agreement {agree:.4f}")
    for mode in modes:
        fwd = model.forward
        if mode == "graph":
            model.forward = torch.compile(fwd, mode="reduce-overhead")
        try:
            recs += _phases(name, model, plan, mode, runs, device, ids, base, progress)
        except Exception as e:  # noqa: BLE001  (one mode failing is recorded; the other stands)
            recs.append(dict(base, mode=mode, error=f"{type(e).__name__}: {e}"[:400]))
        finally:
            model.forward = fwd
    return recs


def _phases(name, model, plan, mode, runs, device, ids, base, progress) -> list[dict]:
    import torch

    import tilegemm

    recs = []
    cache = {"cache_implementation": "static"} if mode == "graph" else {}
    kw = dict(max_new_tokens=plan["new"], min_new_tokens=plan["new"], do_sample=False, pad_token_id=0, **cache)

    def prefill(x):
        return lambda: model(x, use_cache=False)

    def decode(x):
        return lambda: model.generate(x, **kw)

    phases = [("prefill", batch, seq, batch * seq, prefill(ids(batch, seq))) for batch, seq in plan["prefill"]]
    phases += [("decode", batch, plan["prompt"], batch * plan["new"], decode(ids(batch, plan["prompt"])))
               for batch in plan["decode"]]
    for phase, batch, seq, tokens, call in phases:
        with torch.no_grad():
            ref_first = _timed(call, device)
            with tilegemm.patch(model) as p:
                first = _timed(call, device)
            t_ours, t_ref = _runs(model, call, runs, device)
        recs.append(_record(base, phase, mode, batch, seq, tokens, t_ours, t_ref, first, ref_first, p.counts))
        shape = f"{batch}×{seq}" if phase == "prefill" else f"batch {batch}"
        progress(f"{name} {phase} {shape} {mode}: ratio {recs[-1]['ratio']:.3f}")
    return recs


def _runs(model, call, runs: int, device) -> tuple[list[float], list[float]]:
    """Seconds of `runs` calls patched (ours) and unpatched (torch's), alternating (ABBA:
    sampling.alternate). The model is patched around each of our calls, outside its timing, so
    the module walk of `tilegemm.patch` is never timed."""
    import math

    import tilegemm

    from ..sampling import alternate

    def ours(n):
        out = []
        for _ in range(n):
            with tilegemm.patch(model):
                out.append(_timed(call, device))
        return out

    def ref(n):
        return [_timed(call, device) for _ in range(n)]

    (t_ours, t_ref), _ = alternate([ours, ref], budget_s=math.inf, min_reps=runs, max_reps=runs, target_rse=0.0,
                                   batch=1)
    return t_ours, t_ref


def _record(base, phase, mode, batch, seq, tokens, t_ours, t_ref, first, ref_first, counts) -> dict:
    ours, ref = statistics.median(t_ours), statistics.median(t_ref)
    return dict(base, phase=phase, mode=mode, batch=batch, seq=seq, tokens_per_s=tokens / ours,
                ref_tokens_per_s=tokens / ref, ratio=ref / ours, runs=dict(ours_s=t_ours, ref_s=t_ref),
                first_forward_s=first, ref_first_forward_s=ref_first, counts=counts)


def run(models, modes, runs: int, device, dtype, plan, slice_layers: int, progress=print) -> dict:
    import torch

    from .results import environment

    doc = dict(schema="tilegemm.model/1", environment=environment(), runs=runs, modes=list(modes), plan=plan,
               records=[])
    for name in models:
        spec, layers = {"llama3-8b": (LLAMA3_8B, None), "llama3-70b-slice": (LLAMA3_70B, slice_layers),
                        "tiny": (TINY, None)}[name]
        progress(f"building {name} ({layers or spec['num_hidden_layers']} layers, {dtype}) on {device} …")
        model = build(spec, layers, device, dtype)
        try:
            doc["records"] += measure(name, model, plan, modes, runs, device, progress)
        finally:
            del model
            if str(device).startswith("cuda"):
                torch.cuda.empty_cache()
    return doc


def add_cli(subparsers) -> None:
    p = subparsers.add_parser("model-bench", help="a Llama-shaped model (transformers) on tilegemm against torch")
    p.add_argument("--models", help="llama3-8b, llama3-70b-slice, tiny (default: the first two on a GPU, tiny without)")
    p.add_argument("--modes", help="eager, graph (default: both on a GPU, eager without)")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--slice-layers", type=int, default=4, help="layers of the 70B slice")
    p.add_argument("--json", help="write the results here")
    p.set_defaults(func=cli_model_bench)


def cli_model_bench(args) -> int:
    try:
        import torch
        import transformers  # noqa: F401
    except ImportError as e:
        print(f"tilegemm model-bench: needs torch and transformers (pip install 'tilegemm[model]'): {e}",
              file=sys.stderr)
        return 2
    gpu = torch.cuda.is_available()
    models = (args.models or ("llama3-8b,llama3-70b-slice" if gpu else "tiny")).split(",")
    modes = (args.modes or ("eager,graph" if gpu else "eager")).split(",")
    bad = [m for m in models if m not in ("llama3-8b", "llama3-70b-slice", "tiny")]
    bad += [m for m in modes if m not in ("eager", "graph") or (m == "graph" and not gpu)]
    if bad:
        print(f"tilegemm model-bench: not available here: {', '.join(bad)}", file=sys.stderr)
        return 2
    if not gpu:
        print("No CUDA GPU: a tiny model on the CPU, to show the benchmark works (its times are not a GPU's).")
    device, dtype = ("cuda", torch.bfloat16) if gpu else ("cpu", torch.float32)
    doc = run(models, modes, args.runs, device, dtype, GPU_PLAN if gpu else CPU_PLAN, args.slice_layers,
              progress=lambda s: print(s, flush=True))
    for r in doc["records"]:
        if "ratio" in r:
            print(f"{r['model']:16s} {r['phase']:7s} {r['mode']:5s} batch {r['batch']:3d} seq {r['seq']:5d}: "
                  f"{r['tokens_per_s']:10.1f} tok/s against {r['ref_tokens_per_s']:10.1f} ({r['ratio']:.3f}); "
                  f"first forward {r['first_forward_s']:.2f} s (torch {r['ref_first_forward_s']:.2f})")
        else:
            print(f"{r['model']:16s} {r.get('mode')}: {r.get('error')}")
    if args.json:
        results.write_json(args.json, json.dumps(doc, indent=1, default=str))
        print(f"results written to {args.json}")
    return 0
