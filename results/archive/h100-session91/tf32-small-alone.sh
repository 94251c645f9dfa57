. scripts/device/env.sh || exit 1
export TILEGEMM_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name --format=csv,noheader
S=256,384,512,128x1024x8192,1024x1024x1024
echo "== alone"; timeout 120 python3 -m tilegemm.cli library --shapes $S --dtypes tf32 --runs 3 --no-host --no-first --no-decode --json $OUT/alone.json 2>&1 | grep -E "^tf32|run 3/3"
echo "== alone, gc off"; timeout 120 python3 -c "
import gc, sys; gc.disable()
from tilegemm.cli import main
sys.exit(main(['library','--shapes','$S','--dtypes','tf32','--runs','3','--no-host','--no-first','--no-decode','--json','$OUT/alone-nogc.json']))" 2>&1 | grep -E "^tf32|run 3/3"
python3 - <<'P'
import gc, time, torch, tilegemm
a = torch.rand(256, 256, device="cuda"); b = torch.rand(256, 256, device="cuda")
tilegemm.gemm(a, b, precision="tf32")
n0 = gc.get_count(); t = time.perf_counter()
for _ in range(1000): tilegemm.gemm(a, b, precision="tf32")
print("gc counts before/after 1000 tf32 calls", n0, gc.get_count(), gc.get_stats()[0])
import sys
before = sys.getallocatedblocks()
for _ in range(1000): tilegemm.gemm(a, b, precision="tf32")
print("allocated blocks delta after 1000 more", sys.getallocatedblocks() - before)
P
