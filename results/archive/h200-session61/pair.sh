. scripts/device/env.sh || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > $OUT/gpu.txt
S=100x12345x678,777x1234x4321,4095x4097x1023
F=src/tilegemm/kernels/tensorcore/t03_tma_persistent.py
cp $F /tmp/t03_new.py
for side in before after; do
  if [ $side = before ]; then cp .dev/t03_old.py $F; else cp /tmp/t03_new.py $F; fi
  python3 -m tilegemm.cli library --dtypes bf16,fp16 --shapes $S --runs 3 --no-host --no-first --no-decode --json $OUT/pair-$side.json > $OUT/pair-$side.txt 2>&1
  tail -7 $OUT/pair-$side.txt
done
timeout ${T:-200} python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_dispatch.py tests/test_leaks.py -k "realign or pad or unaligned or leak or memory" > $OUT/pytest.txt 2>&1; tail -3 $OUT/pytest.txt
