"""Split-K forms now that the fused sum of 4 or more groups is pipelined (t04.sum_stages): at the
library set's shapes whose H200 entry is t04 in two launches (TF32), or trails cuBLAS on the
device clock (TF32/BF16 128x1024xK), the entry's own tile fused, and fused tiles in more slices,
forced through the user's cache against the database's pick; the library's measure_shape (eager +
device, cuBLAS in the same runs), 3 rounds, the order rotating. Writes $OUT/fused_forms.json."""
import json, os, statistics, sys, time
import torch
from tilegemm import shipped, tuning
from tilegemm.kernels.tensorcore import _problem as P
from tilegemm.kernels.tensorcore import t04_splitk as t04
from tilegemm.tuning import cache
from tilegemm.tuning.cache import Decision
from tilegemm.bench import library as L

OUT = os.environ.get("OUT", "/tmp")
T04 = "tc_splitk"
db = shipped.databases()[shipped.slug(torch.cuda.get_device_name())]

def problem(dtype, m, n, k):
    a, b, sa, sb = L.operands(dtype, m, n, k)
    out = torch.bfloat16 if dtype == "fp8" else a.dtype
    c = torch.empty(m, n, dtype=out, device="cuda")
    prec = {"tf32": "tf32", "fp8": "fp8"}.get(dtype) or P.precision_of(a.dtype)
    return P.Problem(a, b, c, prec, scale_a=sa, scale_b=sb) if dtype == "fp8" else P.Problem(a, b, c, prec)

def force(p, rung, cfg):
    key = cache.decision_key(p, P.gpu_name(p.a.device))
    path = cache.cache_path()
    data = json.load(open(path)) if os.path.exists(path) else {}
    data.pop(key, None)
    if cfg is not None:
        data[key] = cache.record(p, Decision(rung, cfg, "probe", None))
    json.dump(data, open(path, "w"))
    cache.reset()

TF = dict(GROUP_M=8, SWAP=True, REG_A=True, TMA=True)
def tf(bm, bn, bk, s, st=4, w=4):
    return dict(TF, BM=bm, BN=bn, BK=bk, SPLIT=s, num_stages=st, num_warps=w, FUSED=True)
def bf(bm, bn, bk, s, st=4, w=4):
    return dict(GROUP_M=8, BM=bm, BN=bn, BK=bk, SPLIT=s, num_stages=st, num_warps=w, FUSED=True)
FUSE = "fuse"  # the database's own tile, fused
CASES = [
    ("tf32", 128, 1024, 4096, [tf(64, 64, 32, 12), tf(64, 64, 32, 8)]),
    ("tf32", 128, 4096, 4096, [FUSE]),
    ("tf32", 128, 1024, 8192, [FUSE, tf(64, 64, 32, 12), tf(64, 64, 32, 16)]),
    ("tf32", 16, 28672, 8192, [FUSE]),
    ("tf32", 128, 4096, 14336, [FUSE, tf(128, 64, 32, 8)]),
    ("tf32", 1024, 1024, 8192, [FUSE, tf(128, 64, 32, 4)]),
    ("bf16", 128, 1024, 4096, [bf(32, 64, 128, 8), bf(64, 64, 64, 8), bf(64, 64, 128, 8)]),
    ("bf16", 128, 1024, 8192, [bf(32, 64, 128, 8), bf(64, 64, 128, 8), bf(64, 64, 128, 16)]),
]
only = sys.argv[1:]
clock = L._Clock()
res = []
for dtype, m, n, k, cands in CASES:
    if only and f"{dtype}:{m}x{n}x{k}" not in only:
        continue
    p = problem(dtype, m, n, k)
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    d = tuning.pick(db, "db", p)
    forms = {"db": dict(rung=d.rung, cfg=dict(d.config), runs=[])}
    for c in cands:
        c = dict(d.config, FUSED=True) if c == FUSE else c
        name = f"{'F' if c.get('FUSED') else '2'} {c['BM']}x{c['BN']}x{c['BK']} S{c['SPLIT']} st{c['num_stages']} w{c['num_warps']}"
        forms[name] = dict(rung=T04, cfg=c, runs=[])
    for f in forms.values():
        c = f["cfg"]
        if f["rung"] == T04 and c.get("FUSED"):
            red = t04.reduce_width(c, c["SPLIT"])
            f["red"], f["sum_stages"] = red, t04.sum_stages(c, c["SPLIT"], red, p.a.element_size())
    names = list(forms)
    for rnd in range(3):
        for name in names[rnd % len(names):] + names[:rnd % len(names)]:
            f = forms[name]
            force(p, f["rung"], f["cfg"])
            try:
                f["runs"].append(L.measure_shape(clock, dtype, m, n, k, ("eager", "device"), 0.3))
            except Exception as e:  # noqa: BLE001
                f["error"] = f"{type(e).__name__}: {e}"[:300]
    force(p, None, None)
    line = f"{dtype} {m}x{n}x{k} (db {d.rung} {d.config.get('BM')}x{d.config.get('BN')}x{d.config.get('BK')} S{d.config.get('SPLIT')})"
    for name, f in forms.items():
        if f.get("error") or not f["runs"]:
            line += f"\n  {name:28s} ERROR {f.get('error')}"
            continue
        for mode in ("eager", "device"):
            rs = [r[mode] for r in f["runs"] if mode in r]
            f[f"{mode}_us"] = statistics.median(r["ours_ms"] for r in rs) * 1e3
            f[f"{mode}_ratio"] = statistics.median(r["ref_ms"] / r["ours_ms"] for r in rs)
        line += (f"\n  {name:28s} sum_st {f.get('sum_stages', '-')} eager {f['eager_us']:.2f} us {f['eager_ratio']:.3f}"
                 f"  device {f['device_us']:.2f} us {f['device_ratio']:.3f} {sorted({r.get('check') for r in f['runs']})}")
    print(line, flush=True)
    res.append(dict(dtype=dtype, m=m, n=n, k=k, forms=forms))
    json.dump(dict(gpu=torch.cuda.get_device_name(), when=time.strftime("%Y-%m-%dT%H:%M:%S"), records=res),
              open(f"{OUT}/fused_forms.json", "w"), indent=1, default=str)
torch.backends.cuda.matmul.allow_tf32 = False
