# A/B of the unaligned split-K rule: old (diff reverted) vs new, twice, then held-out on each
. scripts/device/env.sh || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $OUT/gpu.txt
export TILEGEMM_CACHE_DIR=/tmp/emptycache
L="--no-host --no-first --no-decode"
T=343x2535x1502,1314x362x3985,2438x306x1687,2016x323x3923,2443x291x517,1651x329x7730,1190x490x2335,1309x295x1894
t0=$(date +%s)
mkdir -p /tmp/r
for pass in 1 2; do
  git apply -R .dev/rule.diff || exit 3
  timeout 60 python3 -m tilegemm.cli library --shapes $T --dtypes tf32 --runs 3 $L --json /tmp/r/old$pass.json > /tmp/r/old$pass.txt 2>&1
  timeout 30 python3 -m tilegemm.cli library --shapes 343x2535x1502 --dtypes bf16,fp16 --runs 3 $L --json /tmp/r/old16-$pass.json > /tmp/r/old16-$pass.txt 2>&1
  git apply .dev/rule.diff || exit 4
  timeout 60 python3 -m tilegemm.cli library --shapes $T --dtypes tf32 --runs 3 $L --json /tmp/r/new$pass.json > /tmp/r/new$pass.txt 2>&1
  timeout 30 python3 -m tilegemm.cli library --shapes 343x2535x1502 --dtypes bf16,fp16 --runs 3 $L --json /tmp/r/new16-$pass.json > /tmp/r/new16-$pass.txt 2>&1
  echo "pass $pass $(( $(date +%s)-t0 ))"
done
timeout 150 python3 -m tilegemm.cli library --shapes held-out:20261205 --dtypes bf16,fp16,tf32,fp8 --runs 3 $L --json $OUT/held-out-new.json > /tmp/r/ho-new.txt 2>&1
echo "ho new rc=$? $(( $(date +%s)-t0 ))"
git apply -R .dev/rule.diff
timeout 150 python3 -m tilegemm.cli library --shapes held-out:20261205 --dtypes bf16,fp16,tf32,fp8 --runs 3 $L --json $OUT/held-out-old.json > /tmp/r/ho-old.txt 2>&1
echo "ho old rc=$? $(( $(date +%s)-t0 ))"
tar czf $OUT/rule-ab.tgz -C /tmp/r .
tail -3 /tmp/r/ho-new.txt /tmp/r/ho-old.txt
