"""`tilegemm model-bench`: a Llama-shaped model from transformers, on tilegemm and on torch, in the same run.

    tilegemm model-bench --json results/h200/model.json        # on a GPU: Llama-3-8B, and a 70B slice
    tilegemm model-bench                                         # without one: a tiny model on the CPU

The models are built from `transformers` configurations with random weights (nothing is
downloaded; `pip install 'tilegemm[model]'`), on the device, in BF16: Llama-3-8B's shapes with all
32 layers, and a slice of Llama-3-70B (its widths, `--slice-layers` layers). The same model runs
patched (`tilegemm.patch`: every nn.Linear on tilegemm; applied around each of our eager runs,
outside its timing, and around the capture of our graphs) and unpatched (torch), alternately
(ABBA: `tilegemm.sampling`), each figure the median of `--runs` runs, a run the median of its
calls (up to 5 a side, as many as fit in about a second; one where a call takes over half a
second):
- prefill: tokens per second of a forward over batch × sequence tokens (1×2048, 4×512, 1×8192);
- decode: tokens per second of `generate` producing 128 tokens greedily after a 128-token prompt,
  with a KV cache, at batch 1, 8 and 64 (the prompt's prefill is part of the time on both sides);
- modes: eager (the model's forward and `generate` as users call them), and graph: each phase
  captured in CUDA graphs by hand (`torch.cuda.graph`), on both sides, and replayed; decode then
  runs greedily on a static KV cache, one graph for the prompt and one for a token's step.
  (`torch.compile(mode="reduce-overhead")` would give the same graphs after minutes of compiling
  per batch size and per side for the 32-layer model.)
- the first forward at a batch size not seen before (plans to build, kernels to compile; graph
  mode: warm-up and capture), on both;
- the logits of one forward at every input the phases run (each prefill's; a decode batch's prompt
  and one token): relative error and argmax agreement against torch's, and each side's against
  the same model in FP32 (torch, TF32 off as torch's default has it), the size of BF16's own
  rounding; made after the timing (`--no-timing`: this check alone, joined to a timed run by
  `--merge`).
Records: model, phase, mode, batch, seq, tokens_per_s, ref_tokens_per_s, ratio, calls_per_run,
first_forward_s, ref_first_forward_s, logits_rel_err and argmax_agree (its input's; a decode
phase's, the worse of its two), counts (products on tilegemm and on torch in our first call);
beside them `accuracy`, the check's entries. (Generated tokens are not compared across the sides: a model
with random weights has near-equal logits everywhere, so the last bit of a rounding difference
flips greedy choices.)
"""

from __future__ import annotations

import contextlib
import statistics
import sys
import time

from .. import arrays
from ..argtypes import positive_int
from ..sampling import paired_ratio
from . import results

LLAMA3_8B = dict(hidden_size=4096, intermediate_size=14336, num_attention_heads=32, num_key_value_heads=8,
                 num_hidden_layers=32, vocab_size=128256, max_position_embeddings=8192 + 512, rope_theta=500000.0)
LLAMA3_70B = dict(hidden_size=8192, intermediate_size=28672, num_attention_heads=64, num_key_value_heads=8,
                  num_hidden_layers=80, vocab_size=128256, max_position_embeddings=8192 + 512, rope_theta=500000.0)
TINY = dict(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=2,
            vocab_size=256, max_position_embeddings=512)
GPU_PLAN = dict(prefill=[(1, 2048), (4, 512), (1, 8192)], decode=[1, 8, 64], prompt=128, new=128)
CPU_PLAN = dict(prefill=[(1, 32), (2, 16)], decode=[1, 2], prompt=8, new=4)
MEASURING = ("models", "modes", "runs", "slice_layers")  # the options of a timed run, which --merge (no timing)
# refuses rather than ignores (--no-timing: refused with it in its own words)


def weight_bytes(spec: dict, layers: int | None, itemsize: int) -> int:
    """The bytes of a LlamaForCausalLM's weights of these widths (embedding and head untied, as
    LlamaConfig has them): what `build` allocates before anything runs."""
    h, i, v = spec["hidden_size"], spec["intermediate_size"], spec["vocab_size"]
    kv = h * spec["num_key_value_heads"] // spec["num_attention_heads"]
    per_layer = 2 * h * h + 2 * h * kv + 3 * h * i + 2 * h  # q, o; k, v; gate, up, down; two norms
    return itemsize * ((layers or spec["num_hidden_layers"]) * per_layer + 2 * v * h + h)


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


def measure(name: str, model, plan: dict, modes, runs: int, device, progress=print, on_record=None,
            on_accuracy=None) -> list[dict]:
    """Every phase of the plan in every mode, then the logits check at every input of the plan
    (`accuracy`; after the timing, so that no first forward finds its shapes' plans made), on one
    model; `on_record(rec)` as each record is made, `on_accuracy(acc)` with the check's entries
    once the records have taken their own input's figures (`_logits_of`). A check that fails is
    one entry with its error; the timing stands."""
    import torch

    vocab = model.config.vocab_size
    recs = []
    keep = on_record or (lambda rec: None)
    g = torch.Generator(device="cpu").manual_seed(1)

    def ids(batch, seq):
        return torch.randint(0, vocab, (batch, seq), generator=g).to(device)

    for mode in modes:
        try:
            _phases(name, model, plan, mode, runs, device, ids, progress, recs, keep)
        except Exception as e:  # noqa: BLE001  (one mode failing is recorded; the other stands)
            recs.append(dict(model=name, mode=mode, error=f"{type(e).__name__}: {e}"[:400]))
            keep(recs[-1])
            progress(f"{name} {mode}: {recs[-1]['error']}")
    try:
        acc = accuracy(name, model, checked_inputs(plan), ids, device, progress)
    except Exception as e:  # noqa: BLE001  (out of memory for the wide copy, say: said, not raised)
        acc = [dict(model=name, error=f"{type(e).__name__}: {e}"[:400])]
        progress(f"{name} logits check: {acc[0]['error']}")
    for r in recs:
        if "phase" in r:
            r.update(_logits_of(r["phase"], r["batch"], r["seq"], acc))
    if on_accuracy:
        on_accuracy(acc)
    return recs


def checked_inputs(plan: dict) -> list[tuple[int, int]]:
    """The inputs (batch, seq) whose logits are checked: each prefill's, and for each decode batch
    its prompt and one token (a step's products, at M = batch)."""
    shapes = [tuple(s) for s in plan["prefill"]]
    for batch in plan["decode"]:
        shapes += [(batch, plan["prompt"]), (batch, 1)]
    return list(dict.fromkeys(shapes))


def accuracy(name: str, model, inputs, ids, device, progress=print) -> list[dict]:
    """One forward (no cache) at each input, patched against torch's, and each against the same
    model in a wider dtype (FP32; FP64 for an FP32 model): the rounding of the model's own dtype,
    the scale beside which a difference from torch's is read. The caller's TF32 setting is left
    as it is (torch's default, and the CLI's: off) and said in `wide` where it is on. Each entry:
    model, batch, seq, rel_err and argmax_agree (ours against torch's), ref_wide_rel_err and
    ref_wide_argmax_agree (torch's against the wide model's), ours_wide_rel_err and
    ours_wide_argmax_agree, wide."""
    import copy

    import torch

    import tilegemm

    wide_dtype = torch.float64 if model.dtype == torch.float32 else torch.float32
    label = str(wide_dtype).removeprefix("torch.")
    if wide_dtype == torch.float32 and str(device).startswith("cuda") and torch.backends.cuda.matmul.allow_tf32:
        label += " (TF32)"
    wide = copy.deepcopy(model).to(wide_dtype)
    rel = lambda a, b: float(torch.linalg.vector_norm(a - b, dtype=torch.float64)  # noqa: E731
                             / torch.linalg.vector_norm(b, dtype=torch.float64))
    agree = lambda a, b: float((a.argmax(-1) == b.argmax(-1)).double().mean())  # noqa: E731
    out = []
    try:
        for batch, seq in inputs:
            x = ids(batch, seq)
            with torch.no_grad():
                w = wide(x, use_cache=False).logits.to(wide_dtype)
                ref = model(x, use_cache=False).logits.to(wide_dtype)
                with tilegemm.patch(model):
                    got = model(x, use_cache=False).logits.to(wide_dtype)
            out.append(dict(model=name, batch=batch, seq=seq, rel_err=rel(got, ref), argmax_agree=agree(got, ref),
                            ref_wide_rel_err=rel(ref, w), ref_wide_argmax_agree=agree(ref, w),
                            ours_wide_rel_err=rel(got, w), ours_wide_argmax_agree=agree(got, w),
                            wide=label))
            e = out[-1]
            progress(f"{name} logits at {batch}×{seq}: against torch's {e['rel_err']:.2e} "
                     f"(argmax {e['argmax_agree']:.4f}); against {e['wide']}: torch's {e['ref_wide_rel_err']:.2e}, "
                     f"ours {e['ours_wide_rel_err']:.2e}")
            del x, w, ref, got
    finally:
        del wide
        if str(device).startswith("cuda"):
            torch.cuda.empty_cache()
    return out


def _logits_of(phase: str, batch: int, seq: int, acc: list[dict]) -> dict:
    """A record's logits_rel_err and argmax_agree: its input's (a decode phase's, the worse of its
    prompt's and its one-token step's); {} where the check has none of them."""
    want = {(batch, seq)} if phase == "prefill" else {(batch, seq), (batch, 1)}
    mine = [a for a in acc if "error" not in a and (a["batch"], a["seq"]) in want]
    if not mine:
        return {}
    return dict(logits_rel_err=max(a["rel_err"] for a in mine), argmax_agree=min(a["argmax_agree"] for a in mine))


def _phases(name, model, plan, mode, runs, device, ids, progress, recs, keep) -> None:
    """Every phase of the plan in one mode. Eager: the model's own forward and `generate`, called
    back to back. Graph: each phase's work captured in CUDA graphs (one set on tilegemm, one on
    torch) and replayed; decode then runs greedily on a static KV cache (`_static_decode`)."""
    import torch

    phases = [("prefill", batch, seq, batch * seq) for batch, seq in plan["prefill"]]
    phases += [("decode", batch, plan["prompt"], batch * plan["new"]) for batch in plan["decode"]]
    for phase, batch, seq, tokens in phases:
        with torch.no_grad():
            rec = _phase(model, phase, mode, ids(batch, seq), plan["new"], runs, device)
        recs.append(dict(model=name, phase=phase, mode=mode, batch=batch, seq=seq, **_rates(tokens, **rec)))
        keep(recs[-1])
        shape = f"{batch}×{seq}" if phase == "prefill" else f"batch {batch}"
        progress(f"{name} {phase} {shape} {mode}: ratio {recs[-1]['ratio']:.3f}")
        if str(device).startswith("cuda"):
            torch.cuda.empty_cache()  # the phase's graphs and buffers are gone with _phase's frame


def _phase(model, phase: str, mode: str, x, new: int, runs: int, device) -> dict:
    """One phase timed on both sides: the first call's seconds (eager: the first forward or
    generate; graph: warm-up and capture) and the products it ran on each library, then `runs`
    runs each (`_runs`: 1 to CALLS_MAX timed calls a run). In graph mode each timed call replays
    graphs captured for it alone, outside its timing (as session 13's H200 run did; see `_capture`
    for why a set once faulted)."""
    import torch

    import tilegemm

    if mode == "eager":
        kw = dict(max_new_tokens=new, min_new_tokens=new, do_sample=False, pad_token_id=0)
        mask = torch.ones_like(x)  # all prompt tokens real (generate would take id 0 for padding)
        call = (lambda: model(x, use_cache=False)) if phase == "prefill" else (
            lambda: model.generate(x, attention_mask=mask, **kw))
        ref_first = _timed(call, device)
        with tilegemm.patch(model) as p:
            first = _timed(call, device)
            counts = dict(p.counts)  # the first call's products only (Patch.counts keeps counting)

        def make():
            return call
    else:
        def make():
            return _graphed(model, phase, x, new, device)[0]

        ref_first = _timed(make, device)
        with tilegemm.patch(model) as p:
            first = _timed(make, device)
            counts = dict(p.counts)  # warm-up and capture's products
    t_ours, t_ref, calls = _runs(lambda: _sample(model, True, make, device),
                                 lambda: _sample(model, False, make, device), runs)
    return dict(t_ours=t_ours, t_ref=t_ref, calls=calls, first=first, ref_first=ref_first, counts=counts)


def _sample(model, patched: bool, make, device) -> float:
    """Seconds of one call of what make() gives, on tilegemm (the model patched) or on torch.
    The patch's module walk and make's work (a graph's capture) are outside the timing."""
    import tilegemm

    with tilegemm.patch(model) if patched else contextlib.nullcontext():
        call = make()
        return _timed(call, device)


def _static_decode(model, prompt, new: int):
    """Greedy decoding of `new` tokens after `prompt` on a static KV cache, as two steps whose
    tensors never move, so that each can be captured in a CUDA graph: the prompt's forward
    (giving token 0), then one token's forward (token i+1 from token i at position prompt + i),
    `new - 1` times. The position advances and each token is written on the device, with no host
    work between steps. Returns (prefill, step, tokens: the generated ids, batch × new)."""
    import torch
    from transformers import StaticCache

    batch, length = prompt.shape
    cache = StaticCache(config=model.config, max_cache_len=length + new)
    tok = prompt.new_zeros(batch, 1)
    pos = torch.zeros(1, dtype=torch.long, device=prompt.device)
    tokens = prompt.new_zeros(batch, new)
    start = torch.arange(length, device=prompt.device)

    def emit(logits):
        tok.copy_(logits[:, -1:].argmax(-1))
        tokens.scatter_(1, (pos - length).expand(batch, 1), tok)

    def prefill():
        cache.reset()  # in place (a static cache's tensors keep their addresses): captured with the rest
        logits = model(prompt, past_key_values=cache, cache_position=start, use_cache=True, logits_to_keep=1).logits
        pos.fill_(length)
        emit(logits)

    def step():
        logits = model(tok, past_key_values=cache, cache_position=pos, use_cache=True, logits_to_keep=1).logits
        pos.add_(1)
        emit(logits)

    return prefill, step, tokens


def _graphed(model, phase: str, x, new: int, device):
    """A phase's work as replays of CUDA graphs captured now (after a warm-up on a side stream, as
    torch asks), returning (call, generated tokens or None). Off CUDA the steps run as they are
    (a stand-in that lets the CPU test check the decode loop)."""
    if phase == "prefill":
        fwd = _capture(lambda: model(x, use_cache=False), device)
        return fwd, None
    prefill, step, tokens = _static_decode(model, x, new)
    prefill, step = _capture(prefill, device), _capture(step, device)

    def decode():  # closes over `tokens` too: the graphs write it
        prefill()
        for _ in range(new - 1):
            step()
        return tokens

    return decode, tokens


def _capture(fn, device):
    """fn captured in a CUDA graph; returns a replay that keeps fn, and with it every tensor the
    graph reads and writes (a static cache, positions, tokens), alive. A CUDAGraph holds no
    reference to them: session 13's first version returned the bare `graph.replay`, the caching
    allocator took those tensors back once the closure died, and replaying one decode after a
    second had been captured (its cache allocated in the freed blocks) faulted on the H200."""
    import torch

    fn()  # the warm-up: plans built, kernels compiled, a static cache's tensors allocated
    if not str(device).startswith("cuda"):
        return fn
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()

    def replay():
        graph.replay()
        return fn  # referenced here, so it lives as long as the replay does

    return replay


RUN_S = 1.0  # a run of a phase: about this many seconds of calls a side,
CALLS_MAX = 5  # at most this many (one where a call takes longer than RUN_S)


def _runs(ours, ref, runs: int) -> tuple[list[float], list[float], int]:
    """Seconds of `runs` runs of ours and of torch's, and the calls a run takes: a pair of calls
    first (warm-up, not kept) sizes a run at RUN_S a side, 1 to CALLS_MAX calls; then every call
    alternates between the sides (ABBA: sampling.alternate), and a run's figure is the median of
    its consecutive calls. (One call a run left a 60 ms prefill's ratio to three samples a side,
    whose spread, 1-2%, is the size of what the ratio is asked to show.)"""
    import math

    from ..sampling import alternate

    calls = max(1, min(CALLS_MAX, int(RUN_S / max(ours(), ref(), 1e-6))))
    (t_ours, t_ref), _ = alternate([lambda n: [ours() for _ in range(n)], lambda n: [ref() for _ in range(n)]],
                                   budget_s=math.inf, min_reps=runs * calls, max_reps=runs * calls,
                                   target_rse=0.0, batch=1)
    per_run = lambda t: [statistics.median(t[i * calls:(i + 1) * calls]) for i in range(runs)]  # noqa: E731
    return per_run(t_ours), per_run(t_ref), calls


def ratio_text(x: float) -> str:
    """A ratio to three decimals, or four where three would round a loss up to 1.000."""
    return f"{x:.4f}" if x < 1 and f"{x:.3f}" == "1.000" else f"{x:.3f}"


def _rates(tokens, t_ours, t_ref, calls, first, ref_first, counts) -> dict:
    ours, ref = statistics.median(t_ours), statistics.median(t_ref)
    return dict(tokens_per_s=tokens / ours, ref_tokens_per_s=tokens / ref, ratio=paired_ratio(t_ours, t_ref),
                runs=dict(ours_s=t_ours, ref_s=t_ref), calls_per_run=calls, first_forward_s=first,
                ref_first_forward_s=ref_first, counts=counts)


def run(models, modes, runs: int, device, dtype, plan, slice_layers: int, progress=print, save=None) -> dict:
    """Every model's records in one document; `save(doc)`, if given, after each record (a long run
    cut short keeps what it measured)."""
    import torch

    from .results import environment

    from . import clocks

    doc = dict(schema="tilegemm.model/1", environment=environment(), runs=runs, modes=list(modes), plan=plan,
               records=[], accuracy=[], clocks=dict(before=clocks.read()))

    def keep(rec):
        rec["clock"] = doc["clocks"]["after"] = clocks.read()  # (read as each figure is done; the record is
        doc["records"].append(rec)  # measure's own, which it gives the logits check's figures later)
        if save:
            save(doc)

    def keep_accuracy(acc):
        doc["accuracy"] += acc
        if save:
            save(doc)
    for name in models:
        spec, layers = {"llama3-8b": (LLAMA3_8B, None), "llama3-70b-slice": (LLAMA3_70B, slice_layers),
                        "tiny": (TINY, None)}[name]
        progress(f"building {name} ({layers or spec['num_hidden_layers']} layers, {dtype}) on {device} …")
        model = build(spec, layers, device, dtype)
        try:
            measure(name, model, plan, modes, runs, device, progress, on_record=keep, on_accuracy=keep_accuracy)
        finally:
            del model
            if str(device).startswith("cuda"):
                torch.cuda.empty_cache()
    return doc


TARGETS = "prefill ≥ 1.00 in both modes; decode ≥ 1.00 eager and ≥ 1.20 graph at batch 1 and 8, ≥ 1.00 at 64"


def _calls_words(recs: list[dict]) -> str:
    """How many calls a run took, model by model, as the records say (runs made before session 42
    took one a call and do not say)."""
    per: dict = {}
    for r in recs:
        per.setdefault(r["model"], set()).add(r.get("calls_per_run", 1))
    if all(c == {1} for c in per.values()):
        return ", a call a run"
    span = lambda c: f"{min(c)}" if len(c) == 1 else f"{min(c)}–{max(c)}"  # noqa: E731
    return ", a run the median of its calls a side (" + "; ".join(f"{m}: {span(c)}" for m, c in per.items()) + \
        "; fewer where a call is long)"


def render(doc: dict, plot: str | None = None) -> str:
    """Markdown of a model-bench document: a row per model, phase, size and mode (tokens per second
    on both sides, the ratio, the first forward), the logits' agreement, and with `plot` a chart
    of the ratios written there."""
    env = doc.get("environment", {})
    gpu = (env.get("gpu") or {}).get("name", "the CPU")
    lib = env.get("libraries", {})
    recs = [r for r in doc.get("records", []) if "ratio" in r]
    when = "; ".join(f"{', '.join(p['models'])} {p['date']}" + (" (logits check)" if p.get("logits_only") else "")
                     for p in doc["parts"]) if doc.get("parts") else \
        env.get("date", "?")  # parts: one run per model, joined
    out = [f"`tilegemm model-bench` on {gpu} ({when}; torch {lib.get('torch', '?')}, "
           f"Triton {lib.get('triton', '?')}): the same model patched (`tilegemm.patch`) and on torch alone, "
           f"alternating call by call, each figure the median of {doc.get('runs', '?')} runs{_calls_words(recs)}; "
           "ratio = ours / torch's tokens per second in each run, the median of the runs' ratios (> 1: tilegemm "
           "faster). Prefill: one forward over batch × sequence tokens. Decode: 128 tokens "
           "generated greedily after a 128-token prompt, with a KV cache (eager: `generate`; graph: CUDA graphs "
           "of the prompt and of a token's step, on a static cache). First forward: the first call at that size "
           "(graph: warm-up and capture), ours beside torch's. Targets (issue 23): " + TARGETS + ".", "",
           "| model | phase | batch × seq | mode | tokens/s ours | tokens/s torch | ratio | first forward s (torch) |",
           "|---|---|---|---|---:|---:|---:|---:|"]
    for r in recs:
        out.append(f"| {r['model']} | {r['phase']} | {r['batch']}×{r['seq']} | {r['mode']} | {r['tokens_per_s']:,.1f} | "
                   f"{r['ref_tokens_per_s']:,.1f} | {ratio_text(r['ratio'])} | {r['first_forward_s']:.2f} "
                   f"({r['ref_first_forward_s']:.2f}) |")
    errs = [r for r in doc.get("records", []) if "error" in r]
    out += [f"\n{r['model']} {r['mode']}: did not run: {r['error']}" for r in errs]
    acc = doc.get("accuracy", [])
    if [a for a in acc if "error" not in a]:
        out += ["", _accuracy_table([a for a in acc if "error" not in a])]
    out += [f"\n{a['model']}: the logits check did not run: {a['error']}" for a in acc if "error" in a]
    checked = {a["model"] for a in acc}
    seen = {}
    for r in recs:  # a model timed before session 68 and not checked since: its one input, prefill 1×512
        if r["model"] not in checked and "logits_rel_err" in r:
            seen.setdefault(r["model"], r)
    if seen:
        out += ["", "Prefill logits against torch's on one input: " + "; ".join(
            f"{m}: relative error {r['logits_rel_err']:.2e}, argmax agreement {r['argmax_agree']:.4f}"
            for m, r in seen.items()) + "."]
    from .clocks import during

    said = during([(f"{r['model']} {r['phase']} {r['batch']}×{r['seq']} {r['mode']}", r.get("clock")) for r in recs])
    out += ["", said] if said else []
    if plot and recs:
        _plot(recs, plot)
    return "\n".join(out)


def _accuracy_table(acc: list[dict]) -> str:
    """The logits check as a table: an input a row, ours against torch's and each against the wide model."""
    wide = "/".join(dict.fromkeys(a["wide"].upper().replace("FLOAT", "FP") for a in acc))
    how = "torch" if "TF32" in wide else "torch, TF32 off"
    out = [f"Logits of one forward (no cache) at each input the phases run (a decode phase: its prompt and one "
           f"token), ours against torch's, and each against the same model in {wide} ({how}): the "
           "rounding of the model's own dtype, beside which the difference from torch's is read. Target (issue 23): "
           "relative error ≤ 2e-2 and argmax agreement ≥ 0.99 against torch's.", "",
           f"| model | batch × seq | against torch: rel. error | argmax agreement | torch against {wide}: rel. error "
           f"(argmax) | ours against {wide}: rel. error (argmax) |",
           "|---|---|---:|---:|---:|---:|"]
    for a in acc:
        out.append(f"| {a['model']} | {a['batch']}×{a['seq']} | {a['rel_err']:.2e} | {a['argmax_agree']:.4f} | "
                   f"{a['ref_wide_rel_err']:.2e} ({a['ref_wide_argmax_agree']:.4f}) | "
                   f"{a['ours_wide_rel_err']:.2e} ({a['ours_wide_argmax_agree']:.4f}) |")
    return "\n".join(out)


def _plot(recs: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = list(dict.fromkeys(r["model"] for r in recs))
    fig, axes = plt.subplots(1, len(models), figsize=(6 * len(models), 3.6), squeeze=False, sharey=True)
    for ax, model in zip(axes[0], models):
        mine = [r for r in recs if r["model"] == model]
        labels = list(dict.fromkeys(f"{r['phase']}\n{r['batch']}×{r['seq']}" for r in mine))
        for k, mode in enumerate(("eager", "graph")):
            ratio = {f"{r['phase']}\n{r['batch']}×{r['seq']}": r["ratio"] for r in mine if r["mode"] == mode}
            xs = [i + (k - 0.5) * 0.38 for i, lab in enumerate(labels) if lab in ratio]
            ax.bar(xs, [ratio[lab] for lab in labels if lab in ratio], width=0.38, label=mode)
        ax.axhline(1.0, color="black", lw=0.8)
        ax.set_xticks(range(len(labels)), labels, fontsize=7)
        ax.set_title(model)
        ax.set_ylim(min(0.5, min(r["ratio"] for r in mine) - 0.05), max(1.3, max(r["ratio"] for r in mine) + 0.05))
    axes[0][0].set_ylabel("tokens/s, tilegemm / torch")
    axes[0][0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def add_cli(subparsers) -> None:
    p = subparsers.add_parser("model-bench", help="a Llama-shaped model (transformers) on tilegemm against torch")
    p.add_argument("--models", help="llama3-8b, llama3-70b-slice, tiny (default: the first two on a GPU, tiny without)")
    p.add_argument("--modes", help="eager, graph (default: both on a GPU, eager without)")
    p.add_argument("--runs", type=positive_int, default=3)
    p.add_argument("--slice-layers", type=positive_int, default=4, help="layers of the 70B slice")
    p.add_argument("--no-timing", action="store_true", help="the logits check alone (each input, against torch "
                   "and a wider copy of the model); join it to a timed run with --merge")
    p.add_argument("--merge", nargs="+", metavar="PART", help="no timing: join runs over different models into "
                   "--json (CPU is fine)")
    p.add_argument("--json", help="write the results here")
    p.set_defaults(func=cli_model_bench, measuring={dest: p.get_default(dest) for dest in MEASURING})


def merge(docs: list[dict]) -> dict:
    """One document from runs of the same plan over different models (a GPU call has a time limit,
    so each model is its own run, one after another on one machine): records and logits checks
    joined, each part's models and date kept (render names them). A part may be a merged document
    (its parts kept) or a logits check alone (`--no-timing`, whose entries then give the records
    of its models their logits_rel_err and argmax_agree). A model timed in two parts, or checked
    in two, is refused."""
    if not docs:
        raise ValueError("nothing to merge")
    for i, d in enumerate(docs):
        if not isinstance(d, dict) or d.get("schema") != "tilegemm.model/1":
            what = f"schema {d.get('schema')!r}" if isinstance(d, dict) else f"a JSON {type(d).__name__}"
            raise ValueError(f"part {i + 1} is not a `tilegemm model-bench` result ({what})")
    first = next((i for i, d in enumerate(docs) if d.get("records")), 0)  # the first timed part
    timed, checked = {}, {}
    for i, d in enumerate(docs):
        if d.get("plan") != docs[0].get("plan"):
            raise ValueError(f"part {i + 1} ran another plan than part 1 (runs, modes, plan)")
        if d.get("records") and any(d.get(k) != docs[first].get(k) for k in ("runs", "modes")):
            raise ValueError(f"part {i + 1} ran another plan than part {first + 1} (runs, modes, plan)")
        if (d.get("environment", {}).get("gpu") or {}).get("name") != \
                (docs[0].get("environment", {}).get("gpu") or {}).get("name"):
            raise ValueError(f"part {i + 1} ran on another GPU than part 1")
        for seen, key, how in ((timed, "records", "measured"), (checked, "accuracy", "checked")):
            for m in dict.fromkeys(r["model"] for r in d.get(key, [])):
                if m in seen:
                    raise ValueError(f"{m} is {how} in parts {seen[m] + 1} and {i + 1}")
                seen[m] = i
    acc = [a for d in docs for a in d.get("accuracy", [])]
    records = [dict(r, ratio=paired_ratio(r["runs"]["ours_s"], r["runs"]["ref_s"])) if "runs" in r else r
               for d in docs for r in d.get("records", [])]  # (the ratio as paired_ratio defines it, for every part)
    fresh = {m for m, i in checked.items() if not docs[i].get("records")}  # checked apart from its timing
    records = [dict(r, **_logits_of(r["phase"], r["batch"], r["seq"], [a for a in acc if a["model"] == r["model"]]))
               if r["model"] in fresh and "phase" in r else r for r in records]
    parts = []
    for d in docs:
        if d.get("parts"):
            parts += d["parts"]
            continue
        models = list(dict.fromkeys([r["model"] for r in d.get("records", [])]
                                    + [a["model"] for a in d.get("accuracy", [])]))
        part = dict(models=models, date=d.get("environment", {}).get("date"))
        parts.append(part if d.get("records") else dict(part, logits_only=True))
    return dict(docs[first], records=records, accuracy=acc, parts=parts)


def cli_model_bench(args) -> int:
    if args.merge and args.no_timing:
        print("tilegemm model-bench: --merge joins results and runs nothing: drop --no-timing", file=sys.stderr)
        return 2
    if args.merge:
        if results.measuring_given("model-bench", args):
            return 2
        return results.merge_files("model-bench", args.merge, args.json, merge)
    try:
        import torch
        import transformers  # noqa: F401
    except ImportError as e:
        print(f"tilegemm model-bench: needs torch and transformers (pip install 'tilegemm[model]'): {e}",
              file=sys.stderr)
        return 2
    gpu = torch.cuda.is_available()
    models = [m.strip() for m in (args.models or ("llama3-8b,llama3-70b-slice" if gpu else "tiny")).split(",")
              if m.strip()]  # ('tiny,' or ',': an empty name, said as "unknown model ''" once for each comma)
    if args.no_timing and args.modes:
        print("tilegemm model-bench: --no-timing runs no mode: drop --modes", file=sys.stderr)
        return 2
    modes = [] if args.no_timing else [m.strip() for m in (args.modes or ("eager,graph" if gpu else "eager")).split(",")
                                       if m.strip()]
    if not models or not (modes or args.no_timing):
        what = "model" if not models else "mode"
        print(f"tilegemm model-bench: --{what}s {getattr(args, what + 's')!r} names no {what}", file=sys.stderr)
        return 2
    specs = {"llama3-8b": (LLAMA3_8B, None), "llama3-70b-slice": (LLAMA3_70B, args.slice_layers), "tiny": (TINY, None)}
    said = [f"unknown model {m!r} (choose from {', '.join(specs)})" for m in models if m not in specs]
    said += [f"unknown mode {m!r} (eager, graph)" for m in modes if m not in ("eager", "graph")]
    said += ["graph mode needs a CUDA GPU" for m in modes if m == "graph" and not gpu]
    if "slice_layers" in getattr(args, "named_options", ()) and "llama3-70b-slice" not in models:  # (ignored, exit 0)
        said.append("--slice-layers sizes llama3-70b-slice, which " + (f"--models {args.models} leaves out"
                    if args.models else "this run leaves out (without a GPU it runs tiny)"))
    device, dtype = ("cuda", torch.bfloat16) if gpu else ("cpu", torch.float32)
    free = torch.cuda.mem_get_info()[0] if gpu else arrays.available_host_bytes()
    for m in models:
        need = weight_bytes(*specs[m], dtype.itemsize) if m in specs else 0
        if free is not None and need > free:  # refused here, not killed for want of memory halfway through a build
            said.append(f"{m}'s weights alone need {need / 1e9:.1f} GB in {str(dtype).removeprefix('torch.')} on "
                        f"{device}, and {free / 1e9:.1f} GB are free" + ("" if gpu else " (it is a GPU's model: "
                                                                                    "--models tiny here)"))
    if said:
        print(f"tilegemm model-bench: {'; '.join(said)}", file=sys.stderr)
        return 2
    if not gpu:
        print("No CUDA GPU: a tiny model on the CPU, to show the benchmark works (its times are not a GPU's).")
    def save(doc):
        results.write_json(args.json, results.dumps(doc))

    doc = run(models, modes, args.runs, device, dtype, GPU_PLAN if gpu else CPU_PLAN, args.slice_layers,
              progress=lambda s: print(s, flush=True), save=save if args.json else None)
    for r in doc["records"]:
        if "ratio" in r:
            print(f"{r['model']:16s} {r['phase']:7s} {r['mode']:5s} batch {r['batch']:3d} seq {r['seq']:5d}: "
                  f"{r['tokens_per_s']:10.1f} tok/s against {r['ref_tokens_per_s']:10.1f} ({r['ratio']:.3f}); "
                  f"first forward {r['first_forward_s']:.2f} s (torch {r['ref_first_forward_s']:.2f})")
        else:
            print(f"{r['model']:16s} {r.get('mode')}: {r.get('error')}")
    if args.json:
        print(f"results written to {args.json}")
    return 0
