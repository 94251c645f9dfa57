"""Session 83 probe: gemm(a, b, precision="fp8") on BF16 operands (quantised by gemm each call),
eager clock (back-to-back calls, CUDA events, L2 not flushed: the quantiser's own reads are most
of the traffic), with quantise.fp8 (two kernels an operand) against the torch rule it replaced
(quantise.dense forced False), alternating, median of 7 batches each; the two results compared
bit for bit. JSON to $OUT/quant-probe.json."""
import json, os, statistics, sys, time
import torch
import tilegemm
from tilegemm.kernels.tensorcore import _quantise as quantise

out = os.environ.get("OUT", "/tmp/out")
real_dense = quantise.dense
rows = []
for m, n, k in ((64, 64, 64), (1024, 1024, 1024), (4096, 4096, 4096), (16, 8192, 8192), (8192, 8192, 8192)):
    a = torch.randn(m, k, device="cuda").bfloat16()
    b = torch.randn(n, k, device="cuda").bfloat16().t()  # column-major, as t05's FP8 form takes B
    calls = max(3, min(200, int(2e10 / (2 * m * n * k + 1e7))))
    def run(dense):
        quantise.dense = dense
        for _ in range(2):
            tilegemm.gemm(a, b, precision="fp8")
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(calls):
            tilegemm.gemm(a, b, precision="fp8")
        e.record(); e.synchronize()
        return s.elapsed_time(e) / calls * 1e3
    new, old = [], []
    for _ in range(7):
        new.append(run(real_dense)); old.append(run(lambda t: False))
    quantise.dense = real_dense
    same = torch.equal(tilegemm.gemm(a, b, precision="fp8"), (quantise.__setattr__("dense", lambda t: False),
                       tilegemm.gemm(a, b, precision="fp8"))[1])
    quantise.dense = real_dense
    r = dict(m=m, n=n, k=k, calls=calls, quantiser_us=statistics.median(new), torch_rule_us=statistics.median(old),
             speedup=statistics.median(old) / statistics.median(new), same_result=same)
    rows.append(r); print(r, flush=True)
json.dump(dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, date=time.strftime("%Y-%m-%dT%H:%M:%S"),
               rows=rows), open(f"{out}/quant-probe.json", "w"), indent=1)
