"""On a CPU: gemm's call key as it is against a short key for the call with every default but the precision (the
variant tried in docs/perf-notes.md, 158), each key made and looked up in a dict, interleaved, median of 7 blocks;
and a planned call's Python layer (a stub plan) through tilegemm.gemm and tilegemm.matmul."""
import statistics
import timeit

import torch

import tilegemm
from tilegemm import dispatch as D

D._bind_torch()
ALIGNS = D.ALIGNS


def short_key(a, b, pa, pb, precision, out_dtype, alpha, beta, c, scale_a, scale_b, kernel, fast_accum=True):
    if c is None and scale_a is None and scale_b is None:
        if (out_dtype is None and fast_accum is True and kernel.__class__ is str and kernel == "auto"
                and alpha.__class__ is float and alpha == 1.0 and beta.__class__ is float and beta == 0.0):
            return (a.shape, b.shape, a.stride(), b.stride(), a.dtype, b.dtype, a.get_device(), b.get_device(),
                    pa & ALIGNS, pb & ALIGNS, precision)
    return D.gemm_key(a, b, pa, pb, precision, out_dtype, alpha, beta, c, scale_a, scale_b, kernel, fast_accum)


a, b = torch.rand(256, 256), torch.rand(256, 256)
pa, pb = a.data_ptr(), b.data_ptr()
args = (a, b, pa, pb, "tf32", None, 1.0, 0.0, None, None, None, "auto", True)
forms = {"gemm_key (kept)": D.gemm_key, "short key (tried)": short_key, "matmul_key": None}
tables = {name: {f(*args) if f else D.matmul_key(a, b, pa, pb): 1} for name, f in forms.items()}
n, out = 100000, {name: [] for name in forms}
for _ in range(7):
    for name, f in forms.items():
        t = tables[name]
        fn = (lambda t=t, f=f: t.get(f(*args))) if f else (lambda t=t: t.get(D.matmul_key(a, b, pa, pb)))
        out[name].append(min(timeit.repeat(fn, number=n, repeat=3)) / n * 1e9)
for name, v in out.items():
    print(f"{name:18s} made and looked up: median {statistics.median(v):.0f} ns (blocks {[round(x) for x in v]})")


class Stub:
    spans = (0, 0, 0)

    def run(self, *x):
        return 1


D._PLANS[D.gemm_key(*args)] = Stub()
D._PLANS[D.matmul_key(a, b, pa, pb)] = Stub()
calls = {"tilegemm.gemm(a, b, precision='tf32')": lambda: tilegemm.gemm(a, b, precision="tf32"),
         "tilegemm.matmul(a, b)": lambda: tilegemm.matmul(a, b)}
res = {k: [] for k in calls}
for _ in range(7):
    for k, f in calls.items():
        assert f() == 1
        res[k].append(min(timeit.repeat(f, number=n, repeat=3)) / n * 1e9)
for k, v in res.items():
    print(f"{k:38s} Python layer, stub plan: median {statistics.median(v):.0f} ns")
