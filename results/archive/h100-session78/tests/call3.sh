. scripts/device/env.sh || exit 1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv | tee $OUT/nvidia-smi.txt
export TILEGEMM_CACHE_DIR=/tmp/tgcache; mkdir -p $TILEGEMM_CACHE_DIR
step() { local t=$1; shift; echo "== $* (limit ${t}s) $(date +%T)"; timeout "$t" "$@"; echo "== exit $? $(date +%T)"; }
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  ( TILEGEMM_CACHE_DIR=/tmp/tgcache2 step 150 python3 -m tilegemm.cli library --dtypes "" --no-first --no-decode --json $OUT/library-host.json > $OUT/library-host.txt 2>&1 )
  tail -20 $OUT/library-host.txt
fi
( step 300 python3 -m pytest -q -p no:cacheprovider -rfE -m "gpu or not gpu" tests/test_matmul_semantics.py tests/test_multigpu.py > $OUT/tests-semantics.txt 2>&1 ) &
( step 300 python3 -m pytest -q -p no:cacheprovider -rfE -m "gpu or not gpu" tests/test_api.py tests/test_bad_inputs.py tests/test_validate.py > $OUT/tests-api.txt 2>&1 ) &
( step 300 python3 -m pytest -q -p no:cacheprovider -rfE -m "gpu or not gpu" tests/test_properties.py > $OUT/tests-properties.txt 2>&1 ) &
( step 300 python3 -m pytest -q -p no:cacheprovider -rfE -m "gpu or not gpu" tests/test_tensorcore.py -k "fp8 or scale" > $OUT/tests-tc-fp8.txt 2>&1 ) &
wait
for f in $OUT/tests-*.txt; do echo "## $f"; grep -E "^(FAILED|ERROR)|passed|failed|^== |^E  " $f | tail -14; done
