"""t04's fused split-K, the last slice's sum with RED partials loaded at once (1, 2, 4), at the
TF32 shapes whose tiles are 64x64 (where reduce_width gives 1) and at 12 slices, where the sum is
a chain of 12 L2 round trips; the two-launch form beside it. Per variant: registers, spills,
shared memory, programs an SM (from the compiled kernel on the device); then the library's
measure_shape (eager + device, cuBLAS in the same runs), 3 rounds, the order rotating, the
configuration forced through the user's cache. Writes $OUT/red_probe2.json."""
import json, os, statistics, time
import torch
from tilegemm.kernels.tensorcore import _problem as P
from tilegemm.kernels.tensorcore import t04_splitk as t04
from tilegemm.tuning import cache
from tilegemm.tuning.cache import Decision
from tilegemm.bench import library as L
from tilegemm import shipped, tuning

OUT = os.environ.get("OUT", "/tmp")
T04 = "tc_splitk"
db = shipped.databases()[shipped.slug(torch.cuda.get_device_name())]

def problem(m, n, k):
    a = torch.rand(m, k, device="cuda") * 2 - 1
    b = torch.rand(k, n, device="cuda") * 2 - 1
    return P.Problem(a, b, torch.empty(m, n, device="cuda"), "tf32")

def force(p, cfg):
    key = cache.decision_key(p, P.gpu_name(p.a.device))
    path = cache.cache_path()
    data = json.load(open(path)) if os.path.exists(path) else {}
    data.pop(key, None)
    if cfg is not None:
        data[key] = cache.record(p, Decision(T04, cfg, "probe", None))
    json.dump(data, open(path, "w"))
    cache.reset()

def resources(p, cfg):
    out = []
    for call in t04.launches(p, cfg):
        k = call.fn.run(*call.args, grid=call.grid, warmup=True, **call.options)
        k._init_handles()
        smem = k.metadata.shared
        regs = k.n_regs
        warps = call.options["num_warps"]
        per_block = warps * 32 * ((regs * 32 + 255) // 256 * 256) // 32
        occ = min(65536 // max(per_block, 1), (233472 // (smem + 1024)) if smem else 32, 64 // warps)
        out.append(dict(kernel=call.fn.fn.__name__, regs=regs, spills=k.n_spills, shared=smem, per_sm=occ))
    return out

P64 = dict(BM=64, BN=64, BK=32, GROUP_M=8, num_warps=4, num_stages=4, SWAP=True, REG_A=True, TMA=True)
# shape: {variant: (config or None for the database's pick, RED or None for reduce_width's)}
CASES = {
    (128, 1024, 4096): {"db": (None, None), "db RED4": (None, 4),
                        "p64 S12 RED1": (dict(P64, SPLIT=12, FUSED=True), 1),
                        "p64 S12 RED2": (dict(P64, SPLIT=12, FUSED=True), 2),
                        "p64 S12 RED4": (dict(P64, SPLIT=12, FUSED=True), 4),
                        "p64 S8 RED4": (dict(P64, SPLIT=8, FUSED=True), 4),
                        "p64 S12 unfused": (dict(P64, SPLIT=12), None)},
    (256, 1024, 4096): {"db": (None, None), "db RED2": (None, 2), "db RED4": (None, 4)},
    (384, 1024, 4096): {"db": (None, None), "db RED2": (None, 2), "db RED4": (None, 4)},
    (512, 1024, 4096): {"db": (None, None), "db RED2": (None, 2)},
}
rule = t04.reduce_width
clock = L._Clock()
res = []
for (m, n, k), variants in CASES.items():
    p = problem(m, n, k)
    d = tuning.pick(db, "db", p)
    forms = {}
    for name, (cfg, red) in variants.items():
        cfg = dict(d.config) if cfg is None else cfg
        t04.reduce_width = rule if red is None else (lambda c, s, r=red: r)
        forms[name] = dict(cfg=cfg, red=t04.reduce_width(cfg, int(cfg["SPLIT"])), resources=resources(p, cfg), runs=[])
    t04.reduce_width = rule
    print(m, n, k, {nm: (f["red"], f["resources"]) for nm, f in forms.items()}, flush=True)
    names = list(forms)
    for rnd in range(3):
        order = names[rnd % len(names):] + names[:rnd % len(names)]
        for name in order:
            red = forms[name]["red"]
            t04.reduce_width = lambda c, s, r=red: r
            force(p, forms[name]["cfg"])
            forms[name]["runs"].append(L.measure_shape(clock, "tf32", m, n, k, ("eager", "device"), 0.3))
    t04.reduce_width = rule
    force(p, None)
    line = f"tf32 {m}x{n}x{k}"
    for name, f in forms.items():
        for mode in ("eager", "device"):
            rs = [r[mode] for r in f["runs"] if mode in r]
            f[f"{mode}_us"] = statistics.median(r["ours_ms"] for r in rs) * 1e3 if rs else None
            f[f"{mode}_ratio"] = statistics.median(r["ref_ms"] / r["ours_ms"] for r in rs) if rs else None
        f["checks"] = sorted({r.get("check") for r in f["runs"]})
        line += f"\n  {name:18s} eager {f['eager_us']:.2f} us {f['eager_ratio']:.3f}  device {f['device_us']:.2f} us {f['device_ratio']:.3f} {f['checks']}"
    print(line, flush=True)
    res.append(dict(m=m, n=n, k=k, db=dict(rung=d.rung, config=d.config), forms=forms))
    json.dump(dict(gpu=torch.cuda.get_device_name(), when=time.strftime("%Y-%m-%dT%H:%M:%S"), records=res),
              open(f"{OUT}/red_probe2.json", "w"), indent=1, default=str)
