. scripts/device/env.sh || exit 1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv | tee $OUT/nvidia-smi.txt
export TILEGEMM_CACHE_DIR=/tmp/tgcache; mkdir -p $TILEGEMM_CACHE_DIR
step() { local t=$1; shift; echo "== $* (limit ${t}s) $(date +%T)"; timeout "$t" "$@"; echo "== exit $? $(date +%T)"; }
T="python3 -m pytest -q -p no:cacheprovider -rfE -m"
( step 200 $T "gpu or not gpu" tests/test_tensorcore.py -k "fp8 or scale or accum" > $OUT/tests-tc.txt 2>&1 ) &
( step 200 $T "gpu or not gpu" tests/test_dispatch.py tests/test_matmul_semantics.py -k "gemm or fast_accum or promotes or key" > $OUT/tests-disp.txt 2>&1 ) &
wait
for f in $OUT/tests-*.txt; do echo "## $f"; grep -E "^(FAILED|ERROR)|passed|failed|^== |^E  " $f | tail -12; done
step 170 python3 -m tilegemm.cli library --dtypes fp8 --runs 3 --no-decode --no-host --no-first --json $OUT/library-fp8.json > $OUT/library-fp8.txt 2>&1
tail -4 $OUT/library-fp8.txt
