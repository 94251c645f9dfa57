import inspect, os, subprocess, tempfile
import triton
from triton.compiler import ASTSource
from triton.backends.compiler import GPUTarget
from tilegemm.kernels.tensorcore import t04_splitk as t04
tgt = GPUTarget("cuda", 90, 32)
cuobj = os.path.join(os.path.dirname(triton.__file__), "backends/nvidia/bin/cuobjdump")
def sig_of(fn, ptrs, consts):
    params = [p.name for p in inspect.signature(fn.fn).parameters.values()]
    return {p: ("constexpr" if p in consts else ptrs.get(p) or ("fp32" if p in ("alpha", "beta") else "i32")) for p in params}
def regs(fn, ptrs, consts, **opts):
    k = triton.compile(ASTSource(fn=fn, signature=sig_of(fn, ptrs, consts), constexprs=consts), target=tgt, options=opts)
    with tempfile.NamedTemporaryFile("wb", suffix=".cubin", delete=False) as f:
        f.write(k.asm["cubin"])
    out = subprocess.run([cuobj, "--dump-resource-usage", f.name], capture_output=True, text=True).stdout
    line = [l.strip() for l in out.splitlines() if "REG:" in l][-1]
    return int(line.split("REG:")[1].split()[0]), int(line.split("STACK:")[1].split()[0])
dt, bm, bn, bk = "fp32", 64, 64, 32
base = dict(BM=bm, BN=bn, BK=bk, GROUP_M=8, PRECISION="tf32", SWAP=True, REG_A=True, WIDE=False, TMA=True, A_T=False, B_T=False)
ptrs = dict(a_ptr=f"tensordesc<{dt}[{bm}, {bk}]>", b_ptr=f"tensordesc<{dt}[{bk}, {bn}]>", w_ptr="*fp32", cnt_ptr="*i32",
            c_ptr="*fp32", i_ptr="*fp32", sa_ptr="*fp32", sb_ptr="*fp32")
for cap in (None, 168, 128, 96):
    opts = dict(num_warps=4, num_stages=4, **({"maxnreg": cap} if cap else {}))
    print("tf32 64x64x32 fused RED1 maxnreg", cap, regs(t04.splitk_fused_kernel, ptrs, dict(base, HAS_BETA=False, HAS_SCALE=False, RED=1), **opts), flush=True)
