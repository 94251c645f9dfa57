"""Registers and local memory of t04's partial and fused kernels as Triton 3.6 compiles them for
sm_90 (compiled on CPU, read by cuobjdump): TF32 64x64x32 swapped, TMA, 4 warps, 4 stages; BF16 16x64x128."""
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

def regs(fn, ptrs, consts, warps, stages):
    k = triton.compile(ASTSource(fn=fn, signature=sig_of(fn, ptrs, consts), constexprs=consts), target=tgt,
                       options=dict(num_warps=warps, num_stages=stages))
    with tempfile.NamedTemporaryFile("wb", suffix=".cubin", delete=False) as f:
        f.write(k.asm["cubin"])
    out = subprocess.run([cuobj, "--dump-resource-usage", f.name], capture_output=True, text=True).stdout
    line = [l.strip() for l in out.splitlines() if "REG:" in l][-1]
    return line.split("TEXTURE")[0], k.metadata.shared

for label, dt, tma, cfg in (
        ("tf32 64x64x32 swap TMA S12", "fp32", True, dict(BM=64, BN=64, BK=32, PRECISION="tf32", SWAP=True, REG_A=True)),
        ("tf32 32x64x64 (shipped 128x1024x4096)", "fp32", False, dict(BM=32, BN=64, BK=64, PRECISION="tf32", SWAP=False, REG_A=False)),
        ("bf16 16x64x128 swap (decode)", "bf16", False, dict(BM=16, BN=64, BK=128, PRECISION="ieee", SWAP=True, REG_A=False))):
    base = dict(cfg, GROUP_M=8, WIDE=False, TMA=tma, A_T=False, B_T=False)
    ab = "tensordesc<%s[%d, %d]>" if tma else None
    a_t = (ab % (dt, cfg["BM"], cfg["BK"])) if tma else f"*{dt}"
    b_t = (ab % (dt, cfg["BK"], cfg["BN"])) if tma else f"*{dt}"
    ptrs = dict(a_ptr=a_t, b_ptr=b_t, w_ptr="*fp32", cnt_ptr="*i32", c_ptr=f"*{dt}", i_ptr=f"*{dt}", sa_ptr="*fp32", sb_ptr="*fp32")
    try:
        print(label, "partial", *regs(t04.splitk_partial_kernel, ptrs, base, 4, 4))
        for red in (1, 2, 4):
            print(label, f"fused RED{red}", *regs(t04.splitk_fused_kernel, ptrs, dict(base, HAS_BETA=False, HAS_SCALE=False, RED=red), 4, 4))
    except Exception as e:
        print(label, "ERR", type(e).__name__, str(e)[:400])
