. scripts/device/env.sh || exit 1
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/nvidia-smi.txt
export TILEGEMM_CACHE_DIR=/tmp/tgcache; mkdir -p $TILEGEMM_CACHE_DIR
step() { local t=$1; shift; echo "== $* (limit ${t}s) $(date +%T)"; timeout "$t" "$@"; echo "== exit $? $(date +%T)"; }
( step 200 python3 -m pytest -q -p no:cacheprovider -rfE -m "gpu or not gpu" tests/test_matmul_semantics.py -k "traced or refused_with_it or grad" > $OUT/tests-trace-head.txt 2>&1 ) &
( TILEGEMM_PROPERTY_EXAMPLES=1000 step 230 python3 -m pytest -q -p no:cacheprovider -rfE -m "gpu or not gpu" tests/test_properties.py -k "gemm or auto" > $OUT/tests-properties.txt 2>&1 ) &
wait
for f in $OUT/tests-*.txt; do echo "## $f"; grep -E "^(FAILED|ERROR)|passed|failed|^== |property cases|^E  .*Error" $f | tail -8; done
