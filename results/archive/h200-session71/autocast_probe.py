"""Under CUDA autocast, a patched Linear casts its FP32 weight each call; torch's autocast keeps the
cast of a leaf parameter that requires grad for the region. Eager time per layer call, 32 distinct
4096x4096 layers (the cast weights do not fit L2), back-to-back, one region vs a region per pass."""
import json, os, statistics, time
import torch, tilegemm

torch.manual_seed(0)
dev = "cuda"
layers = [torch.nn.Linear(4096, 4096, bias=False, device=dev) for _ in range(32)]
model = torch.nn.Sequential(*layers)
out = {}

def timed(fn, reps=20):
    fn(); torch.cuda.synchronize()
    ts = []
    for _ in range(5):
        torch.cuda.synchronize(); t = time.perf_counter()
        for _ in range(reps):
            fn()
        torch.cuda.synchronize(); ts.append((time.perf_counter() - t) / reps / 32 * 1e6)
    return statistics.median(ts)

for m in (1, 16, 2048):
    x = torch.randn(m, 4096, device=dev)
    def one_region():
        with torch.autocast("cuda", torch.bfloat16):
            for _ in range(8):
                model(x)
    def per_pass():
        for _ in range(8):
            with torch.autocast("cuda", torch.bfloat16):
                model(x)
    xb = x.to(torch.bfloat16); mb = torch.nn.Sequential(*[torch.nn.Linear(4096, 4096, bias=False, device=dev, dtype=torch.bfloat16) for _ in range(32)])
    def bf16_weights():
        for _ in range(8):
            mb(xb)
    with torch.no_grad():
        row = {"torch_one_region_us": timed(one_region) / 8, "torch_per_pass_us": timed(per_pass) / 8,
               "torch_bf16_weights_us": timed(bf16_weights) / 8}
        with tilegemm.patch(model), tilegemm.patch(mb):
            row.update(ours_one_region_us=timed(one_region) / 8, ours_per_pass_us=timed(per_pass) / 8,
                       ours_bf16_weights_us=timed(bf16_weights) / 8)
    out[f"{m}x4096x4096"] = row
    print(m, {k: round(v, 2) for k, v in row.items()}, flush=True)
json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": out},
          open(os.path.join(os.environ.get("OUT", "/tmp"), "autocast-probe.json"), "w"), indent=1)
