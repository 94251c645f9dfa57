export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
. scripts/device/env.sh || exit 1
for rep in 1 2; do for v in base trial; do
  if [ $v = trial ]; then PP=/tmp/site:$PWD/trial_src; else PP=/tmp/site:$PWD/src; fi
  echo "== $v $rep"; PYTHONPATH=$PP python3 -P trial_src/ab_host.py $OUT/host-$v-$rep.json 2>&1 | grep -v -i warn
done; done
