import inspect, os, subprocess, tempfile, sys
sys.path.insert(0, os.path.dirname(__file__))
import triton
from triton.compiler import ASTSource
from triton.backends.compiler import GPUTarget
import t04var as t04
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
for dt, odt, bm, bn, bk, swap, rega, prec, st in (("fp32", "fp32", 64, 64, 32, True, True, "tf32", 4), ("bf16", "bf16", 32, 64, 128, True, False, "ieee", 4)):
    base = dict(BM=bm, BN=bn, BK=bk, GROUP_M=8, PRECISION=prec, SWAP=swap, REG_A=rega, WIDE=False, TMA=True, A_T=False, B_T=False)
    ptrs = dict(a_ptr=f"tensordesc<{dt}[{bm}, {bk}]>", b_ptr=f"tensordesc<{dt}[{bk}, {bn}]>", w_ptr="*fp32", cnt_ptr="*i32",
                c_ptr=f"*{odt}", i_ptr=f"*{odt}", sa_ptr="*fp32", sb_ptr="*fp32")
    print(dt, bm, bn, "partial", regs(t04.splitk_partial_kernel, ptrs, base, 4, st))
    for slabs in (0, 1, 2, 4, 8):
        if slabs and bm // slabs < 1:
            continue
        print(dt, bm, bn, "fused SLABS", slabs, regs(t04.splitk_fused_kernel, ptrs, dict(base, HAS_BETA=False, HAS_SCALE=False, RED=1, SLABS=slabs), 4, st), flush=True)
