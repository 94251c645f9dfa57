"""How near are the patched model's logits to torch's, at several input shapes, and how near is each
to the same model in FP32 (torch, TF32 off)? Llama-3-8B-shaped, LAYERS layers, random weights.
Writes $OUT/acc_probe.json."""
import copy, json, os, time
import torch
import tilegemm
from tilegemm.bench import model as MB

OUT = os.environ.get("OUT", "/tmp")
LAYERS = int(os.environ.get("LAYERS", "32"))
dev = torch.device("cuda")
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
model = MB.build(MB.LLAMA3_8B, LAYERS, dev, torch.bfloat16)
m32 = copy.deepcopy(model).float()
gen = torch.Generator(device="cpu").manual_seed(1)
rel = lambda a, b: float((a - b).norm() / b.norm())
agree = lambda a, b: float((a.argmax(-1) == b.argmax(-1)).float().mean())
res = []
for b, s in [(1, 1), (8, 1), (64, 1), (1, 8), (1, 64), (1, 128), (1, 256), (1, 512), (4, 512), (1, 2048)]:
    x = torch.randint(0, model.config.vocab_size, (b, s), generator=gen).to(dev)
    with torch.no_grad():
        r = m32(x, use_cache=False).logits.double()
        t = model(x, use_cache=False).logits.double()
        with tilegemm.patch(model):
            o = model(x, use_cache=False).logits.double()
    rec = dict(batch=b, seq=s, ours_vs_torch=rel(o, t), torch_vs_fp32=rel(t, r), ours_vs_fp32=rel(o, r),
               agree_ours_torch=agree(o, t), agree_torch_fp32=agree(t, r), agree_ours_fp32=agree(o, r))
    print({k: (round(v, 5) if isinstance(v, float) else v) for k, v in rec.items()}, flush=True)
    res.append(rec)
    del r, t, o
    torch.cuda.empty_cache()
json.dump(dict(gpu=torch.cuda.get_device_name(), layers=LAYERS, when=time.strftime("%Y-%m-%dT%H:%M:%S"),
               torch=torch.__version__, records=res), open(f"{OUT}/acc_probe.json", "w"), indent=1)
