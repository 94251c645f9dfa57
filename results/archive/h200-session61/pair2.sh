. scripts/device/env.sh || exit 1
K='every_dtype_layout_shape and (127x129x65 or 5x23x7 or 1x1x1) and (tc_tma_persistent or tc_warp_specialized or auto)'
for i in 0 1 2; do timeout 150 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_tensorcore.py -k "$K" --shard $i/3 > $OUT/tc$i.txt 2>&1 & done
timeout 150 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_dispatch.py -k "realign or pad or unaligned" > $OUT/disp.txt 2>&1 &
wait
timeout 100 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_leaks.py > $OUT/leaks.txt 2>&1
tail -qn 1 $OUT/tc*.txt $OUT/disp.txt $OUT/leaks.txt; grep -h "^FAILED" $OUT/*.txt | head
python3 -m tilegemm.cli library --dtypes bf16,fp16 --shapes 100x12345x678,777x1234x4321 --runs 1 --no-host --no-first --no-decode --json $OUT/pair2.json 2>&1 | tail -5
