#!/usr/bin/env bash
# Issue 5 on the H200: every SIMT rung against cuBLAS FP32 (TF32 off) in one results document.
# All rungs at 4096³ and an awkward shape; the slow rungs (1-3) are left out at the two large
# shapes. k11 uses the committed search winner when TILEGEMM_CACHE_DIR holds it.
. scripts/device/env.sh || exit 1
export TILEGEMM_CACHE_DIR=${TILEGEMM_CACHE_DIR:-$OUT/cache}
mkdir -p "$TILEGEMM_CACHE_DIR"
[ -f results/h200/autotune-cache.json ] && [ ! -f "$TILEGEMM_CACHE_DIR/autotune.json" ] && cp results/h200/autotune-cache.json "$TILEGEMM_CACHE_DIR/autotune.json"
ALL=naive,smem_tiled_16,smem_tiled_32,smem32_conflicted,smem32_padded,register_blocked,interior_fastpath,block_tiling_2d,smem_transposed,vectorized,double_buffer,warptile,autotuned,unrolled,budget
FAST=register_blocked,interior_fastpath,block_tiling_2d,smem_transposed,vectorized,double_buffer,warptile,autotuned,unrolled,budget
timeout 200 python3 -m tilegemm.cli bench --kernels "$ALL" --sizes 4096,4095x4097x1023 --no-e2e --quiet --budget 0.5 \
    --json /tmp/ladder_a.json --table "$OUT/ladder_table_a.txt" > /tmp/ladder_a.log 2>&1; echo "ladder a exit $?"
timeout 200 python3 -m tilegemm.cli bench --kernels "$FAST" --sizes 8192,4096x14336x4096 --no-e2e --quiet --budget 0.5 \
    --json /tmp/ladder_b.json --table "$OUT/ladder_table_b.txt" > /tmp/ladder_b.log 2>&1; echo "ladder b exit $?"
python3 - <<'PY'
import os
from tilegemm.bench import results
docs = [results.load(p) for p in ("/tmp/ladder_a.json", "/tmp/ladder_b.json") if os.path.exists(p)]
if docs:
    doc = docs[0]
    for d in docs[1:]:
        doc["records"] += d["records"]
    doc["harness"]["parts"] = "all rungs at 4096³ and 4095×4097×1023; rungs ≥ 4 at 8192³ and 4096×14336×4096"
    results.save(doc, os.path.join(os.environ["OUT"], "ladder.json"))
PY
