"""Issue 23's eager decode: where a patched layer's host time goes. (1) host µs a call of a patched
nn.Linear (new: linear plans; old: reshape + t + matmul + view) against the unpatched layer, 8B
shapes at M = 1, 8, 64; (2) slow calls during a patched generate; (3) generate at batch 1/8/64,
torch / new / old alternating, 3 rounds; (4) cProfile of a short patched generate."""
import cProfile, io, json, os, pstats, statistics, time
import torch
import tilegemm
from tilegemm import dispatch, torchop
from tilegemm.bench import model as MB
from tilegemm.bench.overhead import time_calls

OUT = os.environ["OUT"]
dev = "cuda"
real_fast, real_remember = torchop._fast_linear, dispatch.remember_linear


def old_path(on: bool):
    torchop._fast_linear = (lambda x, w: None) if on else real_fast
    dispatch.remember_linear = (lambda *a: None) if on else real_remember


res = {"host_us": [], "generate": [], "stats": {}}
model = MB.build(MB.LLAMA3_8B, None, dev, torch.bfloat16)
layer = model.model.layers[0]
lins = dict(q=layer.self_attn.q_proj, k=layer.self_attn.k_proj, gate=layer.mlp.gate_proj, down=layer.mlp.down_proj)
sync = torch.cuda.synchronize
with torch.no_grad():
    for b in (1, 8, 64):
        for name, lin in lins.items():
            x = torch.randn(b, 1, lin.in_features, device=dev, dtype=torch.bfloat16)
            row = dict(batch=b, layer=name)
            row["torch"] = time_calls(lambda: lin(x), 3000, sync=sync)["median_us"]
            with tilegemm.patch(lin):
                for tag, on in (("old", True), ("new", False), ("old2", True), ("new2", False)):
                    old_path(on)
                    row[tag] = time_calls(lambda: lin(x), 3000, sync=sync)["median_us"]
                old_path(False)
            res["host_us"].append(row)
            print(row, flush=True)

    g = torch.Generator(device="cpu").manual_seed(1)
    kw = dict(max_new_tokens=128, min_new_tokens=128, do_sample=False, pad_token_id=0)
    for b in (1, 8, 64):
        x = torch.randint(0, model.config.vocab_size, (b, 128), generator=g).to(dev)
        mask = torch.ones_like(x)
        call = lambda: model.generate(x, attention_mask=mask, **kw)
        with tilegemm.patch(model):
            call()  # warm: plans for every shape
            s0 = dispatch.STATS["slow_calls"]; np0 = dict(dispatch.STATS["not_planned"])
            call()
            res["stats"][b] = dict(slow_calls=dispatch.STATS["slow_calls"] - s0,
                                   not_planned={k: v - np0.get(k, 0) for k, v in dispatch.STATS["not_planned"].items()})
        call()
        print("stats", b, res["stats"][b], flush=True)
        times = {"torch": [], "new": [], "old": []}
        for rnd in range(3):
            for tag in (("torch", "new", "old") if rnd % 2 == 0 else ("old", "new", "torch")):
                ctx = tilegemm.patch(model) if tag != "torch" else None
                old_path(tag == "old")
                sync(); t0 = time.perf_counter(); call(); sync()
                times[tag].append(time.perf_counter() - t0)
                old_path(False)
                if ctx: ctx.undo()
        row = dict(batch=b, **{k: v for k, v in times.items()}, ratio_new=statistics.median(times["torch"]) / statistics.median(times["new"]),
                   ratio_old=statistics.median(times["torch"]) / statistics.median(times["old"]))
        res["generate"].append(row)
        print(row, flush=True)

    x = torch.randint(0, model.config.vocab_size, (1, 128), generator=g).to(dev)
    kw16 = dict(kw, max_new_tokens=32, min_new_tokens=32)
    for tag in ("torch", "new"):
        ctx = tilegemm.patch(model) if tag != "torch" else None
        model.generate(x, attention_mask=torch.ones_like(x), **kw16)
        pr = cProfile.Profile(); pr.enable()
        model.generate(x, attention_mask=torch.ones_like(x), **kw16); sync()
        pr.disable()
        if ctx: ctx.undo()
        s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(30)
        open(f"{OUT}/profile-{tag}.txt", "w").write(s.getvalue())
json.dump(res, open(f"{OUT}/linear-host.json", "w"), indent=1)
