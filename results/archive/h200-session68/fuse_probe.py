"""Sibling products in one launch: a Llama-3-8B-shaped model (LAYERS layers, random weights), its
q/k/v projections (one input) computed as one product on their weights concatenated, and gate/up
likewise (the concatenation a copy; k/v and up return the slices the first call stashed). Decode
(graph, eager) at batch 1 and 8: ours and torch's, fused and not, model-bench's _phase (ABBA, 3
runs). Logits checked fused against unfused on both libraries. Writes $OUT/fuse_probe.json."""
import json, os, statistics, time
import torch
import tilegemm
from tilegemm.bench import model as MB

OUT = os.environ.get("OUT", "/tmp")
LAYERS = int(os.environ.get("LAYERS", "32"))
dev = torch.device("cuda")


class First(torch.nn.Module):
    def __init__(self, mods, stash):
        super().__init__()
        w = torch.cat([m.weight.detach() for m in mods], 0)
        self.lin = torch.nn.Linear(w.shape[1], w.shape[0], bias=False, device=w.device, dtype=w.dtype)
        self.lin.weight.data = w
        self.sizes = [m.weight.shape[0] for m in mods]
        self.stash = stash

    def forward(self, x):
        y = self.lin(x).split(self.sizes, -1)
        self.stash[:] = y[1:]
        return y[0]


class Later(torch.nn.Module):
    def __init__(self, stash, i):
        super().__init__()
        self.stash, self.i = stash, i

    def forward(self, x):
        return self.stash[self.i]


def fuse(model):
    saved = []
    for layer in model.model.layers:
        for parent, names in ((layer.self_attn, ("q_proj", "k_proj", "v_proj")), (layer.mlp, ("gate_proj", "up_proj"))):
            mods = [getattr(parent, n) for n in names]
            stash = []
            saved.append((parent, names, mods))
            setattr(parent, names[0], First(mods, stash))
            for i, n in enumerate(names[1:]):
                setattr(parent, n, Later(stash, i))
    return saved


def unfuse(saved):
    for parent, names, mods in saved:
        for n, m in zip(names, mods):
            setattr(parent, n, m)


model = MB.build(MB.LLAMA3_8B, LAYERS, dev, torch.bfloat16)
gen = torch.Generator(device="cpu").manual_seed(1)
ids = lambda b, s: torch.randint(0, model.config.vocab_size, (b, s), generator=gen).to(dev)

# correctness: logits fused against unfused, on torch and on tilegemm, prefill and one decode-shaped forward
x = ids(1, 256)
errs = {}
with torch.no_grad():
    ref = model(x, use_cache=False).logits.float()
    with tilegemm.patch(model):
        ours = model(x, use_cache=False).logits.float()
    saved = fuse(model)
    reff = model(x, use_cache=False).logits.float()
    with tilegemm.patch(model):
        oursf = model(x, use_cache=False).logits.float()
    unfuse(saved)
rel = lambda a, b: float((a - b).norm() / b.norm())
errs = dict(torch_fused_vs_torch=rel(reff, ref), ours_fused_vs_ours=rel(oursf, ours), ours_fused_vs_torch=rel(oursf, ref),
            argmax_ours_fused=float((oursf.argmax(-1) == ref.argmax(-1)).float().mean()))
print("errs", errs, flush=True)
del ref, ours, reff, oursf
torch.cuda.empty_cache()

CASES = [("decode", "graph", 1), ("decode", "graph", 8), ("decode", "eager", 1), ("decode", "eager", 8)]
CASES = CASES[:int(os.environ.get("NCASES", "4"))]
res = []
for phase, mode, batch in CASES:
    x = ids(batch, 128)
    rec = dict(phase=phase, mode=mode, batch=batch, seq=128)
    for fused in (False, True, False, True):
        saved = fuse(model) if fused else None
        with torch.no_grad():
            r = MB._phase(model, phase, mode, x, 128, 3, dev)
        if saved:
            unfuse(saved)
        rec.setdefault("fused" if fused else "plain", []).append(dict(ours=r["t_ours"], ref=r["t_ref"]))
        torch.cuda.empty_cache()
    med = lambda key, side: statistics.median([t for rr in rec[key] for t in rr[side]])
    po, pr, fo, fr = med("plain", "ours"), med("plain", "ref"), med("fused", "ours"), med("fused", "ref")
    rec.update(plain_ours=po, plain_ref=pr, fused_ours=fo, fused_ref=fr,
               ratio_plain=pr / po, ratio_fused_vs_torch=pr / fo, ratio_fused_vs_torch_fused=fr / fo)
    print(f"{phase} {mode} b{batch}: ms ours {po*1e3:.2f} ref {pr*1e3:.2f} | fused ours {fo*1e3:.2f} ref {fr*1e3:.2f} | "
          f"ratio plain {pr/po:.3f} fused-vs-torch {pr/fo:.3f} fused-vs-torch-fused {fr/fo:.3f}", flush=True)
    res.append(rec)
    json.dump(dict(gpu=torch.cuda.get_device_name(), layers=LAYERS, when=time.strftime("%Y-%m-%dT%H:%M:%S"),
                   errs=errs, records=res), open(f"{OUT}/fuse_probe.json", "w"), indent=1)
