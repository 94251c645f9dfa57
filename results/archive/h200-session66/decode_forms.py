"""Decode products (B = Wᵀ) at M = 8 and 16 on the 8B's k/v and q/o shapes, now that a fused sum of
4 or more groups is pipelined (t04.sum_stages): t04 16×64 tiles in more slices than the
database's, forced through the user's cache, against the database's pick; the library's
measure_shape (eager + device, cuBLAS in the same runs), 3 rounds, the order rotating.
Writes $OUT/decode_forms.json."""
import json, os, statistics, time
import torch
from tilegemm import shipped, tuning
from tilegemm.kernels.tensorcore import _problem as P
from tilegemm.tuning import cache
from tilegemm.tuning.cache import Decision
from tilegemm.bench import library as L

OUT = os.environ.get("OUT", "/tmp")
T04 = "tc_splitk"
db = shipped.databases()[shipped.slug(torch.cuda.get_device_name())]

def problem(m, n, k):
    a, b, _, _ = L.operands("bf16", m, n, k)
    b = b.t().contiguous().t()
    return P.Problem(a, b, torch.empty(m, n, dtype=a.dtype, device="cuda"), "bf16")

def force(p, rung, cfg):
    key = cache.decision_key(p, P.gpu_name(p.a.device))
    path = cache.cache_path()
    data = json.load(open(path)) if os.path.exists(path) else {}
    data.pop(key, None)
    if cfg is not None:
        data[key] = cache.record(p, Decision(rung, cfg, "probe", None))
    json.dump(data, open(path, "w"))
    cache.reset()

T = dict(BM=16, BN=64, GROUP_M=8, num_warps=4, num_stages=4, SWAP=True, REG_A=False, FUSED=True)
CASES = {
    (8, 1024, 4096): [dict(T, BK=128, SPLIT=12), dict(T, BK=128, SPLIT=16), dict(T, BK=64, SPLIT=16)],
    (16, 1024, 4096): [dict(T, BK=128, SPLIT=16), dict(T, BK=64, SPLIT=16)],
    (16, 1024, 8192): [dict(T, BK=128, SPLIT=12), dict(T, BK=128, SPLIT=16)],
    (8, 4096, 4096): [dict(T, BK=128, SPLIT=2), dict(T, BK=128, SPLIT=4), dict(T, BK=256, SPLIT=2)],
}
clock = L._Clock()
res = []
for (m, n, k), cands in CASES.items():
    p = problem(m, n, k)
    d = tuning.pick(db, "db", p)
    forms = {"db": dict(rung=d.rung, cfg=d.config, runs=[])}
    for c in cands:
        forms[f"BK{c['BK']} S{c['SPLIT']}"] = dict(rung=T04, cfg=c, runs=[])
    names = list(forms)
    for rnd in range(3):
        for name in names[rnd % len(names):] + names[:rnd % len(names)]:
            f = forms[name]
            force(p, f["rung"], f["cfg"])
            f["runs"].append(L.measure_shape(clock, "bf16", m, n, k, ("eager", "device"), 0.3, w_t=True))
    force(p, None, None)
    line = f"bf16 {m}x{n}x{k} nt (db {d.rung})"
    for name, f in forms.items():
        for mode in ("eager", "device"):
            rs = [r[mode] for r in f["runs"] if mode in r]
            f[f"{mode}_us"] = statistics.median(r["ours_ms"] for r in rs) * 1e3
            f[f"{mode}_ratio"] = statistics.median(r["ref_ms"] / r["ours_ms"] for r in rs)
        line += (f"\n  {name:10s} eager {f['eager_us']:.2f} us {f['eager_ratio']:.3f}  device {f['device_us']:.2f} us"
                 f" {f['device_ratio']:.3f} {sorted({r.get('check') for r in f['runs']})}")
    print(line, flush=True)
    res.append(dict(m=m, n=n, k=k, forms=forms))
    json.dump(dict(gpu=torch.cuda.get_device_name(), when=time.strftime("%Y-%m-%dT%H:%M:%S"), records=res),
              open(f"{OUT}/decode_forms.json", "w"), indent=1, default=str)
