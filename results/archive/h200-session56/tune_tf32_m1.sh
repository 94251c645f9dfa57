# Session 56 (docs/perf-notes.md, 111), on the H200 after `. scripts/device/env.sh`: the TF32 M = 1 buckets
# tuned, each pass followed by the library's TF32 part (3 runs). Two passes on two trees: the first
# (down to the first library run) at 77e25a3, before the row-major t06 seeds (its lib-tf32.json is
# archived as lib-tf32-before-row-seeds.json, its log tune-tf32-m1.json); the second at 8a21e77 on the
# first's database (its lib-tf32.json is the TF32 part merged into results/h200/library.json).
python3 -m tilegemm.cli tune --sizes 1x1024x4096,1x1024x8192,1x8192x8192,1x4096x14336,1x28672x8192,1x8192x28672 --dtypes tf32 --budget-s 20 --ship --log $OUT/tune-tf32-m1.json --quiet 2>&1 | tail -8
cp src/tilegemm/data/tuning/nvidia-h200.json $OUT/
python3 -c "
import json
d=json.load(open('src/tilegemm/data/tuning/nvidia-h200.json'))
for k,v in d['entries'].items():
    if k.startswith('tf32') and v['shape'][0]==1: print(k, v['rung'], v['config'], round(v['ms']*1e3,2), v['when'])
"
timeout 330 python3 -m tilegemm.cli library --dtypes tf32 --runs 3 --no-host --no-first --no-decode --json $OUT/lib-tf32.json 2>&1 | tail -12
python3 -m tilegemm.cli tune --sizes 1x14336x4096,1x28672x8192,1x8192x8192,1x4096x14336,1x8192x28672 --dtypes tf32 --budget-s 20 --ship --log $OUT/tune-tf32-m1-rows.json --quiet 2>&1 | tail -4
cp src/tilegemm/data/tuning/nvidia-h200.json $OUT/
python3 -c "
import json
d=json.load(open('src/tilegemm/data/tuning/nvidia-h200.json'))
for k,v in d['entries'].items():
    if k.startswith('tf32') and v['shape'][0]==1: print(k, v['rung'], v['config'], round(v['ms']*1e3,2), v['when'])
"
timeout 330 python3 -m tilegemm.cli library --dtypes tf32 --runs 3 --no-host --no-first --no-decode --json $OUT/lib-tf32.json 2>&1 | tail -3
