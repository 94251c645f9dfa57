"""Where the fused split-K's time beside the two-launch form goes, and whether pipelining the last
slice's sum helps: t04's fused kernel with the sum loop as tl.range(num_stages=TAIL_STAGES) (2,
3, 4), and with the sum left out (NOSUM: a wrong result, timed only), against the package's
form and the two-launch form. Per variant: registers, spills, shared, programs an SM; cold (L2
flushed, GPU held) and warm (queued back to back) device time; and for the variants that compute
C, the library's measure_shape (eager + device, cuBLAS in the same runs), 3 rounds, the order
rotating. Writes $OUT/tail_probe.json."""
import json, os, statistics, time
import torch
from tilegemm import hold, shipped, tuning
from tilegemm.kernels.tensorcore import _problem as P
from tilegemm.kernels.tensorcore import t04_splitk as t04
from tilegemm.tuning import cache, timer, tuner
from tilegemm.tuning.cache import Decision
from tilegemm.bench import library as L

OUT = os.environ.get("OUT", "/tmp")
T04 = "tc_splitk"
db = shipped.databases()[shipped.slug(torch.cuda.get_device_name())]
stream = torch.cuda.current_stream().cuda_stream
flush = timer._flush_buffer()

def cold(fn, n=15):
    return statistics.median(timer._held_samples(fn, n, flush)) * 1e3

def warm(fn, calls=30, reps=5):
    vals = []
    for _ in range(reps):
        hold.hold(8000, stream)
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(calls):
            fn()
        e.record(); e.synchronize()
        vals.append(s.elapsed_time(e) / calls * 1e3)
    return statistics.median(vals)

def problem(dtype, m, n, k, w_t):
    a, b, sa, sb = L.operands(dtype, m, n, k)
    if w_t and dtype != "fp8":
        b = b.t().contiguous().t()
    out = torch.bfloat16 if dtype == "fp8" else a.dtype
    c = torch.empty(m, n, dtype=out, device="cuda")
    prec = {"tf32": "tf32", "fp8": "fp8"}.get(dtype) or P.precision_of(a.dtype)
    return P.Problem(a, b, c, prec, scale_a=sa, scale_b=sb) if dtype == "fp8" else P.Problem(a, b, c, prec)

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
        smem, regs, warps = k.metadata.shared, k.n_regs, call.options["num_warps"]
        per_block = warps * ((regs * 32 + 255) // 256 * 256)
        occ = min(65536 // max(per_block, 1), (233472 // (smem + 1024)) if smem else 32, 64 // warps)
        out.append(dict(kernel=call.fn.fn.__name__, regs=regs, spills=k.n_spills, shared=smem, per_sm=occ))
    return out

P64 = dict(BM=64, BN=64, BK=32, GROUP_M=8, num_warps=4, num_stages=4, SWAP=True, REG_A=True, TMA=True)
TAILS = {"base": {}, "stages2": dict(TAIL_STAGES=2), "stages3": dict(TAIL_STAGES=3), "stages4": dict(TAIL_STAGES=4),
         "nosum": dict(NOSUM=1)}
CASES = [  # (dtype, m, n, k, w_t, config or None for the database's, add the two-launch form)
    ("tf32", 128, 1024, 4096, False, dict(P64, SPLIT=12, FUSED=True), True),
    ("tf32", 128, 1024, 4096, False, None, True),
    ("tf32", 256, 1024, 4096, False, None, False),
    ("tf32", 16, 1024, 4096, False, None, True),
    ("bf16", 16, 1024, 4096, True, None, True),
    ("bf16", 128, 1024, 8192, False, None, False),
    ("fp8", 128, 1024, 8192, True, None, False),
]
clock = L._Clock()
res = []
for dtype, m, n, k, w_t, cfg, two in CASES:
    p = problem(dtype, m, n, k, w_t)
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    d = tuning.pick(db, "db", p)
    if cfg is None and d.rung != T04:
        continue
    cfg = dict(d.config) if cfg is None else cfg
    forms = {name: dict(cfg=cfg, extra=ex) for name, ex in TAILS.items()}
    if two:
        forms["two launches"] = dict(cfg={k2: v for k2, v in cfg.items() if k2 != "FUSED"}, extra={})
    for f in forms.values():
        t04._EXTRA.clear(); t04._EXTRA.update(f["extra"])
        f["resources"] = resources(p, f["cfg"])
        f["runs"] = []
    ref = L._reference_call(dtype, p.a, p.b, p.scale_a, p.scale_b)
    ref(); torch.cuda.synchronize()
    rec = dict(dtype=dtype, m=m, n=n, k=k, w_t=w_t, db=dict(rung=d.rung, config=d.config), ref_cold=cold(ref),
               ref_warm=warm(ref), forms=forms)
    names = list(forms)
    for rnd in range(3):
        order = names[rnd % len(names):] + names[:rnd % len(names)]
        for name in order:
            f = forms[name]
            t04._EXTRA.clear(); t04._EXTRA.update(f["extra"])
            tp = tuner.trial_problem(p)
            fn = lambda: tuner.run(T04, tp, f["cfg"])
            fn(); torch.cuda.synchronize()
            f.setdefault("cold", []).append(cold(fn))
            f.setdefault("warm", []).append(warm(fn))
            if name != "nosum":
                force(p, f["cfg"])
                f["runs"].append(L.measure_shape(clock, dtype, m, n, k,
                                                 ("eager", "device"), 0.3, w_t=w_t))
    t04._EXTRA.clear()
    force(p, None)
    line = f"{dtype} {m}x{n}x{k} {'nt' if w_t else 'nn'} ref cold {rec['ref_cold']:.2f} warm {rec['ref_warm']:.2f}"
    for name, f in forms.items():
        f["cold_us"], f["warm_us"] = statistics.median(f["cold"]), statistics.median(f["warm"])
        line += f"\n  {name:13s} {f['resources'][0]['regs']:3d} regs {f['resources'][0]['per_sm']}/SM  cold {f['cold_us']:.2f} warm {f['warm_us']:.2f}"
        for mode in ("eager", "device"):
            rs = [r[mode] for r in f["runs"] if mode in r]
            if rs:
                f[f"{mode}_us"] = statistics.median(r["ours_ms"] for r in rs) * 1e3
                f[f"{mode}_ratio"] = statistics.median(r["ref_ms"] / r["ours_ms"] for r in rs)
                line += f" | {mode} {f[f'{mode}_us']:.2f} us {f[f'{mode}_ratio']:.3f}"
        if f["runs"]:
            line += f" {sorted({r.get('check') for r in f['runs']})}"
    print(line, flush=True)
    res.append(rec)
    json.dump(dict(gpu=torch.cuda.get_device_name(), when=time.strftime("%Y-%m-%dT%H:%M:%S"), records=res),
              open(f"{OUT}/tail_probe.json", "w"), indent=1, default=str)
torch.backends.cuda.matmul.allow_tf32 = False
