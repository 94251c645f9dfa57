"""t04's fused and partial kernels (TF32 64x64x32 S4 swapped, TMA) compiled on CPU by Triton 3.6
for sm_90 twice: as session 65 did (integer arguments unspecialised) and with the launch's own
specialisation (pointers and the integers that are multiples of 16 marked divisible by 16, as
Triton's launcher marks them for 128x1024x4096 at SPLIT 12). (registers, stack bytes)."""
import inspect, os, subprocess, tempfile
import triton
from triton.compiler import ASTSource
from triton.backends.compiler import GPUTarget
from tilegemm.kernels.tensorcore import t04_splitk as t04
tgt = GPUTarget("cuda", 90, 32)
cuobj = os.path.join(os.path.dirname(triton.__file__), "backends/nvidia/bin/cuobjdump")
M, N, K, SPLIT = 128, 1024, 4096, 12
VALUES = dict(M=M, N=N, K=K, K_PER_SPLIT=t04.k_per_split(K, 32, SPLIT), SPLIT=SPLIT, sab=0, sam=K, sak=1, sbb=0,
              sbk=N, sbn=1, scb=0, scm=N, scn=1, sib=0, sim=N, sin_=1)
def compile_(fn, ptrs, consts, spec):
    params = [p.name for p in inspect.signature(fn.fn).parameters.values()]
    sig = {p: ("constexpr" if p in consts else ptrs.get(p) or ("fp32" if p in ("alpha", "beta") else "i32")) for p in params}
    attrs = {}
    if spec:
        for i, p in enumerate(params):
            if p in consts:
                continue
            if (sig[p].startswith("*")) or (p in VALUES and VALUES[p] % 16 == 0 and VALUES[p]):
                attrs[(i,)] = [["tt.divisibility", 16]]
    k = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=consts, attrs=attrs), target=tgt,
                       options=dict(num_warps=4, num_stages=4))
    with tempfile.NamedTemporaryFile("wb", suffix=".cubin", delete=False) as f:
        f.write(k.asm["cubin"])
    out = subprocess.run([cuobj, "--dump-resource-usage", f.name], capture_output=True, text=True).stdout
    line = [l.strip() for l in out.splitlines() if "REG:" in l][-1]
    return int(line.split("REG:")[1].split()[0]), int(line.split("STACK:")[1].split()[0])
base = dict(BM=64, BN=64, BK=32, GROUP_M=8, PRECISION="tf32", SWAP=True, REG_A=True, WIDE=False, TMA=True, A_T=False, B_T=False)
ptrs = dict(a_ptr="tensordesc<fp32[64, 32]>", b_ptr="tensordesc<fp32[32, 64]>", w_ptr="*fp32", cnt_ptr="*i32",
            c_ptr="*fp32", i_ptr="*fp32", sa_ptr="*fp32", sb_ptr="*fp32")
for spec in (False, True):
    print("specialised" if spec else "unspecialised",
          "partial", compile_(t04.splitk_partial_kernel, ptrs, base, spec),
          "fused RED1", compile_(t04.splitk_fused_kernel, ptrs, dict(base, HAS_BETA=False, HAS_SCALE=False, RED=1), spec),
          flush=True)
