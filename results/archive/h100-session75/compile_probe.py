"""The compiled-model patch test's steps, printing each patch's counts and torch.COUNTS (GPU image's torch)."""
import torch, torch._dynamo, tilegemm
from tilegemm import torchop
print("torch", torch.__version__)
class _Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(8, 16); self.down = torch.nn.Linear(16, 4, bias=False)
        self.register_buffer("proj", torch.randn(4, 2))
    def forward(self, x):
        return self.down(torch.relu(self.up(x))) @ self.proj
torch.manual_seed(0)
m, x = _Tiny(), torch.randn(3, 8)
want = m(x)
compiled = torch.compile(m, backend="aot_eager")
with torch.no_grad():
    for i in range(3):
        with tilegemm.patch(m) as p:
            print(i, "patched", type(m.up).__name__, type(m.up) is torch.nn.Linear, "tag", p._tag)
            print(i, "ok", torch.allclose(compiled(x), want, rtol=1e-5, atol=1e-6), "counts", p.counts, "COUNTS", dict(torchop.COUNTS))
        print(i, "unpatched ok", torch.allclose(compiled(x), want, rtol=1e-5, atol=1e-6), "COUNTS", dict(torchop.COUNTS))
print("frame counters", dict(torch._dynamo.utils.counters["stats"]))
