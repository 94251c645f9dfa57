import warnings, torch
from tilegemm.distributed import _core
dev = torch.device("cuda", 0)
fork = torch.cuda.Stream(dev)
def body():
    _core._copy_stream(dev).wait_stream(torch.cuda.current_stream(dev))
    fork.wait_stream(torch.cuda.current_stream(dev))
    with torch.cuda.stream(fork):
        torch.ones(8, device=dev).mul_(2)
    raise RuntimeError("a body that fails mid-capture")
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    print("captured:", _core._Graphs()._capture("key", body, dev))
print([str(w.message)[:300] for w in seen])
with torch.cuda.stream(fork):
    print("fork capturing:", torch.cuda.is_current_stream_capturing())
x = torch.ones(4, device=dev); print(float(x.sum()))
r0 = torch.cuda.memory_reserved(dev); s2 = torch.cuda.Stream(dev)
for _ in range(20):
    y = torch.empty(16 << 20, device=dev); y.record_stream(s2); del y
torch.cuda.synchronize(); print("grown MiB", (torch.cuda.memory_reserved(dev) - r0) >> 20)
with torch.cuda.stream(_core._capture_stream(dev)):
    print("capture stream capturing:", torch.cuda.is_current_stream_capturing())
