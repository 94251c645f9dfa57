"""Is the patched model's argmax further from the FP32 model's than torch's is? Llama-3-8B-shaped
(LAYERS layers, random weights), many inputs of the decode shapes (64 one-token rows, DRAWS draws;
1x128 prompts, DRAWS draws): per position, does ours / torch's argmax equal the FP32 model's
(torch, TF32 off)? Paired counts (ours right and torch's wrong, and the reverse) and relative
errors. Writes $OUT/argmax_probe.json."""
import copy, json, os, time
import torch
import tilegemm
from tilegemm.bench import model as MB

OUT = os.environ.get("OUT", "/tmp")
LAYERS = int(os.environ.get("LAYERS", "32"))
DRAWS = int(os.environ.get("DRAWS", "16"))
dev = torch.device("cuda")
torch.backends.cuda.matmul.allow_tf32 = False
model = MB.build(MB.LLAMA3_8B, LAYERS, dev, torch.bfloat16)
m32 = copy.deepcopy(model).float()
gen = torch.Generator(device="cpu").manual_seed(7)
res = []
for b, s in [(64, 1), (8, 1), (1, 128)]:
    c = dict(batch=b, seq=s, draws=DRAWS, positions=0, ours_right=0, torch_right=0, only_ours=0, only_torch=0,
             ours_torch_same=0, rel_ours=[], rel_torch=[], rel_ours_torch=[])
    for _ in range(DRAWS):
        x = torch.randint(0, model.config.vocab_size, (b, s), generator=gen).to(dev)
        with torch.no_grad():
            r = m32(x, use_cache=False).logits.float()
            t = model(x, use_cache=False).logits.float()
            with tilegemm.patch(model):
                o = model(x, use_cache=False).logits.float()
        ar, at, ao = r.argmax(-1), t.argmax(-1), o.argmax(-1)
        okt, oko = at == ar, ao == ar
        c["positions"] += ar.numel()
        c["ours_right"] += int(oko.sum()); c["torch_right"] += int(okt.sum())
        c["only_ours"] += int((oko & ~okt).sum()); c["only_torch"] += int((okt & ~oko).sum())
        c["ours_torch_same"] += int((ao == at).sum())
        rel = lambda a, b: float((a - b).norm() / b.norm())
        c["rel_ours"].append(rel(o, r)); c["rel_torch"].append(rel(t, r)); c["rel_ours_torch"].append(rel(o, t))
    print({k: v for k, v in c.items() if not isinstance(v, list)},
          "mean rel ours %.4f torch %.4f ours-torch %.4f" % tuple(sum(c[k]) / DRAWS for k in ("rel_ours", "rel_torch", "rel_ours_torch")), flush=True)
    res.append(c)
json.dump(dict(gpu=torch.cuda.get_device_name(), layers=LAYERS, when=time.strftime("%Y-%m-%dT%H:%M:%S"),
               records=res), open(f"{OUT}/argmax_probe.json", "w"), indent=1)
