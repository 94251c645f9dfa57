. scripts/device/env.sh || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv
S=1536x1536x1536,3000x3000x3000,3072x3072x3072
python3 -m tilegemm.cli library --dtypes bf16,fp16,fp8 --shapes $S --runs 3 --no-host --no-first --no-decode --json $OUT/before.json 2>&1 | tail -22
python3 -m tilegemm.cli tune --sizes 3000x3000x3000,1536x1536x1536 --dtypes bf16,fp16 --budget-s 20 --ship --log $OUT/tune-16.json --quiet 2>&1 | tail -20
python3 -m tilegemm.cli tune --sizes 1536x1536x1536 --dtypes fp8 --budget-s 20 --ship --log $OUT/tune-fp8.json --quiet 2>&1 | tail -20
cp src/tilegemm/data/tuning/nvidia-h200.json $OUT/
python3 -m tilegemm.cli library --dtypes bf16,fp16,fp8 --shapes $S --runs 3 --no-host --no-first --no-decode --json $OUT/after.json 2>&1 | tail -22
