import inspect, os, subprocess, tempfile, sys
import triton
from triton.compiler import ASTSource
from triton.backends.compiler import GPUTarget
from tilegemm.kernels.tensorcore import t04_splitk as t04
tgt = GPUTarget("cuda", 90, 32)
cuobj = os.path.join(os.path.dirname(triton.__file__), "backends/nvidia/bin/cuobjdump")
def sig_of(fn, ptrs, consts):
    params = [p.name for p in inspect.signature(fn.fn).parameters.values()]
    return {p: ("constexpr" if p in consts else ptrs.get(p) or ("fp32" if p in ("alpha", "beta") else "i32")) for p in params}
def regs(fn, ptrs, consts, warps, stages):
    k = triton.compile(ASTSource(fn=fn, signature=sig_of(fn, ptrs, consts), constexprs=consts), target=tgt,
                       options=dict(num_warps=warps, num_stages=stages))
    with tempfile.NamedTemporaryFile("wb", suffix=".cubin", delete=False) as f:
        f.write(k.asm["cubin"])
    out = subprocess.run([cuobj, "--dump-resource-usage", f.name], capture_output=True, text=True).stdout
    line = [l.strip() for l in out.splitlines() if "REG:" in l][-1]
    return int(line.split("REG:")[1].split()[0]), int(line.split("STACK:")[1].split()[0])
# (label, in dtype, out dtype, BM, BN, BK, warps, stages, SWAP, REG_A, B_T, precision)
CASES = [("bf16 nt 128x1024x4096", "bf16", "bf16", 32, 64, 128, 4, 4, True, False, True, "ieee"),
         ("fp8 nt 128x1024x8192", "fp8e4nv", "bf16", 32, 64, 256, 4, 4, True, False, True, "ieee"),
         ("bf16 nt 64x8192x28672", "bf16", "bf16", 64, 128, 128, 4, 4, False, False, True, "ieee"),
         ("tf32 nn 256x1024x4096", "fp32", "fp32", 64, 64, 64, 4, 3, True, True, False, "tf32"),
         ("tf32 nn 512x1024x4096", "fp32", "fp32", 128, 64, 32, 4, 4, True, True, False, "tf32"),
         ("tf32 nn 64x64x32 S12 (probe)", "fp32", "fp32", 64, 64, 32, 4, 4, True, True, False, "tf32")]
for label, dt, odt, bm, bn, bk, w, st, swap, rega, b_t, prec in CASES:
    base = dict(BM=bm, BN=bn, BK=bk, GROUP_M=8, PRECISION=prec, SWAP=swap, REG_A=rega, WIDE=False, TMA=True, A_T=False, B_T=b_t)
    a_d = f"tensordesc<{dt}[{bm}, {bk}]>"
    b_d = f"tensordesc<{dt}[{bn}, {bk}]>" if b_t else f"tensordesc<{dt}[{bk}, {bn}]>"
    ptrs = dict(a_ptr=a_d, b_ptr=b_d, w_ptr="*fp32", cnt_ptr="*i32", c_ptr=f"*{odt}", i_ptr=f"*{odt}", sa_ptr="*fp32", sb_ptr="*fp32")
    pt = bm * bn // (32 * w)
    rule = max(1, min(4, 32 // pt))
    try:
        row = [label, "partial", regs(t04.splitk_partial_kernel, ptrs, base, w, st)]
        for red in sorted({1, rule}):
            row += [f"fused RED{red}", regs(t04.splitk_fused_kernel, ptrs, dict(base, HAS_BETA=False, HAS_SCALE=dt.startswith("fp8"), RED=red), w, st)]
        print(*row, "rule", rule, flush=True)
    except Exception as e:
        print(label, "ERR", type(e).__name__, str(e)[:300], flush=True)
