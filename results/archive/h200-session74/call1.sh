. scripts/device/env.sh || exit 1
step() { local t=$1; shift; echo "== $* (limit ${t}s) $(date +%T)"; timeout "$t" "$@"; echo "== exit $? $(date +%T)"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $OUT/nvidia-smi.txt
cat $OUT/nvidia-smi.txt
run() { local name=$1; shift; ( export TILEGEMM_CACHE_DIR=/tmp/tgcache-$name; mkdir -p $TILEGEMM_CACHE_DIR; step 360 python3 -m pytest -q -p no:cacheprovider --durations=8 "$@" ) > $OUT/tests-$name.txt 2>&1; }
run torchop -m gpu tests/test_torchop.py &
run tensorcore -m gpu tests/test_tensorcore.py &
( run semantics -m gpu tests/test_matmul_semantics.py tests/test_dispatch.py tests/test_multigpu.py
  run new -m "gpu or not gpu" tests/test_dispatch.py tests/test_torchop.py tests/test_api.py tests/test_matmul_semantics.py -k "no_memory or nested_operand or bool_alpha or requires_grad_or_lies or capture or transform or storageless or dual or complex_gradients or empty_layer or torch_refuses or by_name or own_reduce or overlap or scale" 
  run bad -m "gpu or not gpu" tests/test_bad_inputs.py
  run gpu -m gpu tests/test_gpu.py ) &
wait
for f in $OUT/tests-*.txt; do echo "## $f"; grep -E "^(FAILED|ERROR)|passed|failed|^== " $f | tail -8; done
