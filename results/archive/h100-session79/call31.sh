. scripts/device/env.sh || exit 1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv | tee $OUT/nvidia-smi.txt
export TILEGEMM_CACHE_DIR=/tmp/tgcache; mkdir -p $TILEGEMM_CACHE_DIR
step() { local t=$1; shift; echo "== $* (limit ${t}s) $(date +%T)"; timeout "$t" "$@"; echo "== exit $? $(date +%T)"; }
T="python3 -m pytest -q -p no:cacheprovider -rfE -m"
( step 200 $T "gpu or not gpu" tests/test_matmul_semantics.py tests/test_multigpu.py tests/test_dispatch.py > $OUT/tests-semantics.txt 2>&1 ) &
( step 200 $T "gpu or not gpu" tests/test_api.py tests/test_bad_inputs.py tests/test_validate.py > $OUT/tests-api.txt 2>&1 ) &
( step 200 $T "gpu or not gpu" tests/test_simt_ladder.py -k "explain or k11 or autotun or k10 or k14" > $OUT/tests-simt.txt 2>&1 ) &
( step 200 $T "gpu or not gpu" tests/test_tensorcore.py -k "fp8 or scale or kernels or bias_row" > $OUT/tests-tc.txt 2>&1 ) &
wait
for f in $OUT/tests-*.txt; do echo "## $f"; grep -E "^(FAILED|ERROR)|passed|failed|^== |^E  " $f | tail -14; done
