. scripts/device/env.sh || exit 1
T0=$(date +%s); left() { echo $(( 570 - ($(date +%s) - T0) )); }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv | tee $OUT/nvidia-smi.txt
for v in "" 128 64 32; do
  TILEGEMM_FP8_IMPRECISE=$v TRITON_CACHE_DIR=/tmp/tcache$v TILEGEMM_CACHE_DIR=/tmp/tgc$v timeout 80 python3 .dev/probe_fp8imp.py > $OUT/fp8imp-$v.txt 2>&1
  echo "== $v exit $? left $(left)"; grep -v Warn $OUT/fp8imp-$v.txt | tail -11
done
export TILEGEMM_CACHE_DIR=/tmp/tgcache; mkdir -p $TILEGEMM_CACHE_DIR
L="python3 -m tilegemm.cli library"
timeout 100 $L --dtypes "" --no-decode --json $OUT/library-host.json > $OUT/library-host.txt 2>&1; echo "== host exit $? left $(left)"
tail -14 $OUT/library-host.txt
timeout $(( $(left) - 5 )) $L --dtypes bf16,fp16 --runs 3 --no-decode --no-host --no-first --json $OUT/library-lp.json > $OUT/library-lp.txt 2>&1
echo "== lp exit $? left $(left)"; tail -8 $OUT/library-lp.txt
