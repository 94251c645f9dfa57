. scripts/device/env.sh || exit 1
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/nvidia-smi.txt
export TILEGEMM_CACHE_DIR=/tmp/tgcache; mkdir -p $TILEGEMM_CACHE_DIR
step() { local t=$1; shift; echo "== $* (limit ${t}s) $(date +%T)"; timeout "$t" "$@"; echo "== exit $? $(date +%T)"; }
rm -rf /tmp/oldsrc && cp -r src /tmp/oldsrc && cp .dev/old_api.py /tmp/oldsrc/tilegemm/api.py
( step 200 python3 -m pytest -q -p no:cacheprovider -rfE -m "gpu or not gpu" tests/test_matmul_semantics.py -k "traced or refused_with_it" > $OUT/tests-trace-head.txt 2>&1 ) &
( PYTHONPATH=/tmp/site:/tmp/oldsrc step 200 python3 -m pytest -q -p no:cacheprovider -rfE -m "gpu or not gpu" tests/test_matmul_semantics.py -k "traced_call_refuses" > $OUT/tests-trace-oldapi.txt 2>&1 ) &
( step 300 python3 -m pytest -q -p no:cacheprovider -rfE -m "gpu or not gpu" tests/test_properties.py -k "gemm" > $OUT/tests-properties-gemm.txt 2>&1 ) &
wait
for f in $OUT/tests-*.txt; do echo "## $f"; grep -E "^(FAILED|ERROR)|passed|failed|^== |property cases" $f | tail -8; done
grep -n "tilegemm/api.py\|^E  .*Error" $OUT/tests-trace-oldapi.txt | head -5
