"""CPU: which configuration a database gives a product (num_sms patched to the H200's 132)."""
import json, sys
import torch
from tilegemm import tuning
from tilegemm.kernels.tensorcore import _problem as P

P.num_sms = lambda dev=None: 132
DT = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp8": torch.float8_e4m3fn}
PREC = {"bf16": "bf16", "fp16": "fp16", "fp8": "fp8"}


def decide(db, dtype, m, n, k, layout="t"):
    dt = DT[dtype]
    a = torch.empty(m, k, dtype=dt, device="meta")
    b = torch.empty(n, k, dtype=dt, device="meta").t() if layout == "t" else torch.empty(k, n, dtype=dt, device="meta")
    c = torch.empty(m, n, dtype=torch.bfloat16 if dtype == "fp8" else dt, device="meta")
    kw = {}
    if dtype == "fp8":
        kw = dict(scale_a=torch.ones((), device="meta"), scale_b=torch.ones((), device="meta"))
    p = P.Problem(a, b, c, PREC[dtype], **kw)
    return tuning.pick(db, "db", p)


if __name__ == "__main__":
    db = json.load(open(sys.argv[1]))
    for spec in sys.argv[2:]:
        dtype, m, n, k, lay = spec.split(":")
        d = decide(db, dtype, int(m), int(n), int(k), lay)
        print(spec, d.rung, d.config, d.source if hasattr(d, "source") else "")
