export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
. scripts/device/env.sh || exit 1
s=$(date +%s)
python3 -m pytest -q -m gpu tests/test_distributed.py -k "peer_transport" -p no:cacheprovider 2>&1 | tail -3
echo "gpu test $(( $(date +%s) - s ))s"
for rep in 1 2; do
  for v in base trial; do
    if [ $v = base ]; then PP=/tmp/site:$PWD/.dev/base_src/src; else PP=/tmp/site:$PWD/src; fi
    s=$(date +%s)
    PYTHONPATH=$PP python3 -m tilegemm.cli dist-bench --sizes 8192 --modes one-gpu,1d,summa,fused-ag-mm --runs 3 --beyond off --json $OUT/$v-$rep.json > $OUT/$v-$rep.txt 2>&1
    echo "$v $rep rc=$? $(( $(date +%s) - s ))s"
    grep -E "^run|speed|1d|fused" $OUT/$v-$rep.txt | grep -v "^run" | head -12
  done
done
