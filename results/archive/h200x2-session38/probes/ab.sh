export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
. scripts/device/env.sh || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv
for rep in 1 2; do
  for v in base trial; do
    if [ $v = trial ]; then PP=/tmp/site:$PWD/trial_src; else PP=/tmp/site:$PWD/src; fi
    s=$(date +%s)
    PYTHONPATH=$PP python3 -m tilegemm.cli dist-bench --sizes ${SIZES:-8192,16384} --modes one-gpu,1d,summa --runs 3 --beyond off --json $OUT/$v-$rep.json > $OUT/$v-$rep.txt 2>&1
    echo "$v $rep rc=$? $(( $(date +%s) - s ))s"
    tail -n 25 $OUT/$v-$rep.txt
  done
done
