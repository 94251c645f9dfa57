"""Probe: do lazily negated / conjugated torch CUDA tensors keep their sign through tilegemm?"""
import json, os, sys
import torch, tilegemm

dev = "cuda"
res = []
def check(name, fn, ref):
    try:
        for call in range(2):  # the second call takes the fast path where there is a plan
            got = fn()
            err = (got.double() - ref.double()).abs().max().item()
            scale = ref.double().abs().max().item()
            res.append((name, call, "ok" if err <= 1e-2 * scale + 1e-6 else f"WRONG rel err {err/scale:.3g}"))
    except Exception as e:  # noqa
        res.append((name, 0, f"raised {type(e).__name__}: {str(e)[:120]}"))

torch.manual_seed(0)
for dt in (torch.float32, torch.float16, torch.bfloat16):
    a = torch.randn(256, 128, device=dev, dtype=dt); b = torch.randn(128, 192, device=dev, dtype=dt)
    na = torch._neg_view(a); nb = torch._neg_view(b)
    assert na.is_neg()
    ref = torch.matmul(-a.float(), b.float())
    check(f"matmul neg(a) {dt}", lambda: tilegemm.matmul(na, b), ref)
    check(f"matmul neg(b) {dt}", lambda: tilegemm.matmul(a, nb), -torch.matmul(a.float(), -b.float()) * -1)
    check(f"matmul neg(a)neg(b) {dt}", lambda: tilegemm.matmul(na, nb), torch.matmul(a.float(), b.float()))
    a3 = torch.randn(3, 64, 128, device=dev, dtype=dt)
    check(f"matmul 3-D neg(a) {dt}", lambda: tilegemm.matmul(torch._neg_view(a3), b), torch.matmul(-a3.float(), b.float()))
    if dt != torch.float32:
        check(f"gemm neg(a) {dt}", lambda: tilegemm.gemm(na, b), ref)
    else:
        check(f"matmul kernel=register_blocked neg(a)", lambda: tilegemm.matmul(na, b, kernel="register_blocked"), ref)
        check(f"gemm tf32 neg(a)", lambda: tilegemm.gemm(na, b, precision="tf32"), ref)
z = torch.randn(256, 128, device=dev, dtype=torch.complex64)
im = z.conj().imag  # a lazily negated real view
print("conj().imag is_neg:", im.is_neg())
b = torch.randn(128, 64, device=dev)
check("matmul z.conj().imag", lambda: tilegemm.matmul(im, b), torch.matmul(-z.imag, b))
out = torch._neg_view(torch.empty(256, 192, device=dev))
try:
    tilegemm.matmul(torch.randn(256, 128, device=dev), torch.randn(128, 192, device=dev), out=out)
    res.append(("out= neg view", 0, f"accepted; out holds neg? {out.is_neg()}"))
except Exception as e:  # noqa
    res.append(("out= neg view", 0, f"raised {type(e).__name__}: {str(e)[:120]}"))
for r in res:
    print(*r, sep=" | ")
os.makedirs(os.environ.get("OUT", "/tmp/out"), exist_ok=True)
json.dump(res, open(os.path.join(os.environ.get("OUT", "/tmp/out"), "neg_probe.json"), "w"), indent=1)
