# tune decode products into $OUT/new.json (a copy of the shipped DB): B = W^T at M = 4, 8, 16 over the
# 8B/70B weights and lm_heads; row-major B at M = 1, 16 over the library set's Llama weights
cp src/tilegemm/data/tuning/nvidia-h200.json $OUT/new.json
sz() { local s=""; for w in $2; do n=${w%x*}; k=${w#*x}; for m in ${1//,/ }; do s="$s,${m}x${n}x${k}"; done; done; echo ${s#,}; }
T="4096x4096 1024x4096 14336x4096 4096x14336 128256x4096 8192x8192 1024x8192 28672x8192 8192x28672 128256x8192"
N="4096x4096 1024x4096 14336x4096 4096x14336 8192x8192 1024x8192 28672x8192 8192x28672"
t0=$(date +%s)
python3 -m tilegemm.cli tune --sizes $(sz 4,8,16 "$T") --dtypes bf16 --layouts t --budget-s ${BUD:-3} --db $OUT/new.json --log $OUT/tune-t-log.json --quiet 2>&1 | grep -v Warn | tail -2
echo "tune t took $(( $(date +%s) - t0 )) s"
python3 -m tilegemm.cli tune --sizes $(sz 1,16 "$N") --dtypes bf16 --layouts n --budget-s ${BUD:-3} --db $OUT/new.json --log $OUT/tune-n-log.json --quiet 2>&1 | grep -v Warn | tail -2
echo "tune all took $(( $(date +%s) - t0 )) s"
