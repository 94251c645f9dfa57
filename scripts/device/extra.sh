#!/usr/bin/env bash
# Issue 3 and 4 on the H200: repeatability (three rungs timed twice in one run), the host overhead
# per matmul() call after the dispatch work, then the tensor-core benchmark.
. scripts/device/env.sh || exit 1
export TILEGEMM_CACHE_DIR=$OUT/cache
mkdir -p "$TILEGEMM_CACHE_DIR"
cp results/h200/autotune-cache.json "$TILEGEMM_CACHE_DIR/autotune.json"
K=smem_tiled_32,register_blocked,autotuned,smem_tiled_32,register_blocked,autotuned
timeout 120 python3 -m tilegemm.cli bench --kernels "$K" --sizes 1024,4096 --no-e2e --quiet \
    --json "$OUT/repeat.json" --table "$OUT/repeat_table.txt" > /tmp/repeat.log 2>&1; echo "repeat exit $?"
timeout 60 python3 - <<'PY' > "$OUT/overhead.json"; echo "overhead exit $?"
import json
from tilegemm.bench.overhead import measure_overhead
print(json.dumps(measure_overhead(), indent=1, default=str))
PY
