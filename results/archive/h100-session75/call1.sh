. scripts/device/env.sh || exit 1
step() { local t=$1; shift; echo "== $* (limit ${t}s) $(date +%T)"; timeout "$t" "$@"; echo "== exit $? $(date +%T)"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $OUT/nvidia-smi.txt
cat $OUT/nvidia-smi.txt
L=${L:-400}
run() { local name=$1; shift; ( export TILEGEMM_CACHE_DIR=/tmp/tgcache-$name; mkdir -p $TILEGEMM_CACHE_DIR; step $L python3 -m pytest -q -p no:cacheprovider --durations=8 "$@" ) > $OUT/tests-$name.txt 2>&1; }
run tc0 -m gpu tests/test_tensorcore.py --shard 0/2 &
run tc1 -m gpu tests/test_tensorcore.py --shard 1/2 &
run gpu0 -m gpu tests/test_gpu.py --shard 0/2 &
run gpu1 -m gpu tests/test_gpu.py --shard 1/2 &
run api -m "gpu or not gpu" tests/test_api.py tests/test_bad_inputs.py tests/test_torchop.py tests/test_dispatch.py &
run sem -m "gpu or not gpu" tests/test_matmul_semantics.py &
wait
for f in $OUT/tests-*.txt; do echo "## $f"; grep -E "^(FAILED|ERROR)|passed|failed|^== " $f | tail -8; done
