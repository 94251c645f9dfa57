. scripts/device/env.sh || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > $OUT/gpu.txt
S=100x12345x678
python3 -m tilegemm.cli library --dtypes bf16,fp16 --shapes $S --runs 3 --no-host --no-first --no-decode --json $OUT/before.json > $OUT/before.txt 2>&1
tail -8 $OUT/before.txt
python3 -m tilegemm.cli tune --sizes $S --dtypes bf16,fp16 --budget-s 20 --ship --log $OUT/tune.json --quiet > $OUT/tune.txt 2>&1
tail -20 $OUT/tune.txt
cp src/tilegemm/data/tuning/nvidia-h200.json $OUT/
python3 -m tilegemm.cli library --dtypes bf16,fp16 --shapes $S --runs 3 --no-host --no-first --no-decode --json $OUT/after.json > $OUT/after.txt 2>&1
tail -8 $OUT/after.txt
