#!/usr/bin/env bash
# The committed H200 run for issues 2 and 5, in one call (eight files come back from $OUT):
#   lab.json, table.txt   `tilegemm bench` over the course sizes, every lab kernel, cuBLAS beside them
#   race.txt              `tilegemm race --racecheck`
#   ladder.json, ladder_table.txt   every SIMT rung at the ladder's shapes, cuBLAS FP32 (TF32 off)
#   resources.json        registers, spills, shared memory, SASS census per rung (GPU compiler)
#   pytest.txt            the gpu-marked tests of the lab and the SIMT ladder
#   cache/autotune.json   k11's search winner on this GPU
. scripts/device/env.sh || exit 1
export TILEGEMM_CACHE_DIR=$OUT/cache TILEGEMM_AUTOTUNE_BUDGET_S=${TILEGEMM_AUTOTUNE_BUDGET_S:-45}
mkdir -p "$TILEGEMM_CACHE_DIR"
LAB=cpu_naive,cpu_blas,naive,smem_tiled_16,smem_tiled_32,smem32_conflicted,smem32_padded,register_blocked,broken_nosync
step() { local t=$1; shift; echo "== $* (limit ${t}s)"; timeout "$t" "$@"; echo "== exit $?"; }
step 200 python3 -m tilegemm.cli bench --kernels "$LAB" --quiet --json "$OUT/lab.json" --table "$OUT/table.txt" > /tmp/lab.log 2>&1
step 100 python3 -m tilegemm.cli race --racecheck --racecheck-size 32 > "$OUT/race.txt" 2>&1
step 200 python3 -m tilegemm.cli bench --kernels simt --sizes "${LADDER_SIZES:-4096,8192,4096x14336x4096,4095x4097x1023}" \
    --no-e2e --quiet --budget 0.7 --json "$OUT/ladder.json" --table "$OUT/ladder_table.txt" > /tmp/ladder.log 2>&1
step 90 python3 -m tilegemm.cli resources --json "$OUT/resources.json" > /tmp/resources.log 2>&1
step "${PYTEST_S:-150}" python3 -m pytest -q -m gpu tests/test_gpu.py tests/test_simt_ladder.py -p no:cacheprovider \
    --maxfail=20 > "$OUT/pytest.txt" 2>&1
tail -3 "$OUT/pytest.txt"; tail -30 /tmp/lab.log | cut -c1-200; tail -25 /tmp/ladder.log | cut -c1-260; tail -20 /tmp/resources.log
