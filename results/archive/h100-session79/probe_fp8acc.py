import torch, tilegemm
from tilegemm import validate
g = torch.Generator(device="cuda").manual_seed(1)
for k in (512, 8192):
    a = (torch.rand(64, k, device="cuda", generator=g) * 224 + 224).to(torch.float8_e4m3fn)
    b = (torch.rand(128, k, device="cuda", generator=g) * 224 + 224).to(torch.float8_e4m3fn).t()
    ref = a.double() @ b.double()
    for kern in ("tc_tiled", "tc_splitk"):
        c = tilegemm.gemm(a, b, precision="fp8", kernel=kern, scale_a=1.0, scale_b=1.0, out_dtype="float32")
        print("K", k, kern, "scales 1: rel err", ((c.double() - ref).norm() / ref.norm()).item())
    c = torch._scaled_mm(a, b, torch.ones((), device="cuda"), torch.ones((), device="cuda"), out_dtype=torch.float32)
    print("K", k, "torch._scaled_mm (fast accum off): rel err", ((c.double() - ref).norm() / ref.norm()).item())
    c = torch._scaled_mm(a, b, torch.ones((), device="cuda"), torch.ones((), device="cuda"), out_dtype=torch.float32, use_fast_accum=True)
    print("K", k, "torch._scaled_mm fast accum: rel err", ((c.double() - ref).norm() / ref.norm()).item())
