. scripts/device/env.sh || exit 1
step() { local t=$1; shift; echo "== $* (limit ${t}s) $(date +%T)"; timeout "$t" "$@"; echo "== exit $? $(date +%T)"; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/nvidia-smi.txt; cat $OUT/nvidia-smi.txt
export TILEGEMM_CACHE_DIR=/tmp/tgcache; mkdir -p $TILEGEMM_CACHE_DIR
step 90 python3 .dev/compile_probe.py > $OUT/compile_probe.txt 2>&1; grep -v "Warn\|warn(" $OUT/compile_probe.txt | tail -14
( step 200 python3 -m pytest -q -p no:cacheprovider -m "gpu or not gpu" tests/test_matmul_semantics.py tests/test_dispatch.py -k "version_counter or require_grad or requires_grad or imports_no_torch" -rA > $OUT/tests-fix.txt 2>&1 ) &
( step 230 python3 -m pytest -q -p no:cacheprovider -rA $(cat .dev/tc_rest.txt) > $OUT/tests-tcrest.txt 2>&1 ) &
wait
for f in $OUT/tests-*.txt; do echo "## $f"; grep -E "^(FAILED|ERROR|PASSED)|passed|failed|^== |^E  " $f | tail -14; done
