. scripts/device/env.sh || exit 1
step() { local t=$1; shift; echo "== $* (limit ${t}s) $(date +%T)"; timeout "$t" "$@"; echo "== exit $? $(date +%T)"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $OUT/nvidia-smi.txt; cat $OUT/nvidia-smi.txt
export TILEGEMM_CACHE_DIR=/tmp/tgcache; mkdir -p $TILEGEMM_CACHE_DIR
L=${L:-420}
( step $L python3 -m pytest -q -p no:cacheprovider -rfE "tests/test_tensorcore.py::test_gpu_tf32_192_row_entry_on_other_forms" "tests/test_tensorcore.py::test_gpu_warp_specialized_every_config[tf32-t]" > $OUT/tests-tc.txt 2>&1 ) &
( step $L python3 -m pytest -q -p no:cacheprovider -rfE -m "gpu or not gpu" tests/test_matmul_semantics.py > $OUT/tests-semantics.txt 2>&1 ) &
( step $L python3 -m pytest -q -p no:cacheprovider -rfE -m "gpu or not gpu" tests/test_dispatch.py tests/test_torchop.py > $OUT/tests-dispatch-torchop.txt 2>&1 ) &
( step $L python3 -m pytest -q -p no:cacheprovider -rfE -m "gpu or not gpu" tests/test_api.py > $OUT/tests-api.txt 2>&1 ) &
wait
for f in $OUT/tests-*.txt; do echo "## $f"; grep -E "^(FAILED|ERROR)|passed|failed|^== |^E  " $f | tail -14; done
