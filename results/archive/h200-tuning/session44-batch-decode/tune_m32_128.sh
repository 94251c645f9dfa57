# tune B = W^T at M = 32 and 128 over the 8B/70B weights and lm_heads into $OUT/new.json (a copy of the shipped DB)
cp src/tilegemm/data/tuning/nvidia-h200.json $OUT/new.json
S=""; for m in 32 128; do for w in 4096x4096 1024x4096 14336x4096 4096x14336 128256x4096 8192x8192 1024x8192 28672x8192 8192x28672 128256x8192; do S="$S,${m}x$w"; done; done
t0=$(date +%s)
python3 -m tilegemm.cli tune --sizes ${S#,} --dtypes bf16 --layouts t --budget-s ${BUD:-3} --db $OUT/new.json --log $OUT/tune-t-log.json --quiet 2>&1 | grep -v Warn | tail -2
echo "tune took $(( $(date +%s) - t0 )) s"
