. scripts/device/env.sh || exit 1
step() { local t=$1; shift; echo "== $* (limit ${t}s) $(date +%T)"; timeout "$t" "$@"; echo "== exit $? $(date +%T)"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for i in 1 2 3; do python3 -c "import time; t=time.thread_time(); import tilegemm; print('import', round(time.thread_time()-t, 3))"; done
L=${L:-400}
run() { local name=$1; shift; ( export TILEGEMM_CACHE_DIR=/tmp/tgcache-$name; mkdir -p $TILEGEMM_CACHE_DIR; step $L python3 -m pytest -q -p no:cacheprovider -rfE "$@" ) > $OUT/tests-$name.txt 2>&1; }
run torchop -m "gpu or not gpu" tests/test_torchop.py tests/test_dispatch.py &
run api -m "gpu or not gpu" tests/test_api.py tests/test_matmul_semantics.py tests/test_bad_inputs.py &
run cli -m "gpu or not gpu" tests/test_cli.py tests/test_report.py tests/test_validate.py &
wait
for f in $OUT/tests-*.txt; do echo "## $f"; grep -E "^(FAILED|ERROR)|passed|failed|^== |^E  " $f | tail -12; done
