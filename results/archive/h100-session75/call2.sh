. scripts/device/env.sh || exit 1
step() { local t=$1; shift; echo "== $* (limit ${t}s) $(date +%T)"; timeout "$t" "$@"; echo "== exit $? $(date +%T)"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $OUT/nvidia-smi.txt
cat $OUT/nvidia-smi.txt
export TILEGEMM_CACHE_DIR=/tmp/tgcache-host; mkdir -p $TILEGEMM_CACHE_DIR
for i in 1 2 3 4 5 6; do
  PYTHONPATH=/tmp/site:$PWD/.dev/oldsrc/src timeout 60 python3 .dev/hostcost2.py old >> $OUT/hostcost.txt 2>&1
  PYTHONPATH=/tmp/site:$PWD/src timeout 60 python3 .dev/hostcost2.py new >> $OUT/hostcost.txt 2>&1
done
cat $OUT/hostcost.txt
L=${L:-330}
run() { local name=$1; shift; ( export TILEGEMM_CACHE_DIR=/tmp/tgcache-$name; mkdir -p $TILEGEMM_CACHE_DIR; step $L python3 -m pytest -q -p no:cacheprovider --durations=8 "$@" ) > $OUT/tests-$name.txt 2>&1; }
run tc0 -m gpu tests/test_tensorcore.py --shard 0/3 &
run tc1 -m gpu tests/test_tensorcore.py --shard 1/3 &
run tc2 -m gpu tests/test_tensorcore.py --shard 2/3 &
run simt -m gpu tests/test_simt_ladder.py &
( run fix -m "gpu or not gpu" tests/test_api.py tests/test_torchop.py tests/test_matmul_semantics.py -k "explain_says_how or another_thread_imports or compiles_nothing_again or version_counter or require_grad or requires_grad or numpy_product_into_out" -rA
  run lead -m "gpu or not gpu" tests/test_dispatch.py tests/test_multigpu.py ) &
wait
for f in $OUT/tests-*.txt; do echo "## $f"; grep -E "^(FAILED|ERROR)|passed|failed|^== " $f | tail -8; done
