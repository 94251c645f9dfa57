. scripts/device/env.sh || exit 1
for v in "" 128 64 32; do
  TILEGEMM_FP8_IMPRECISE=$v TRITON_CACHE_DIR=/tmp/tcache$v TILEGEMM_CACHE_DIR=/tmp/tgc$v timeout 100 python3 .dev/probe_fp8imp.py > $OUT/fp8imp-$v.txt 2>&1
  echo "== $v exit $?"; grep -v Warn $OUT/fp8imp-$v.txt | tail -11
done
