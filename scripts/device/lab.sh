#!/usr/bin/env bash
# Issue 2 on the H200: info, the comparison table (every lab kernel, cuBLAS in the same run),
# the race demo with racecheck, and the gpu-marked tests. Results land in $OUT.
. scripts/device/env.sh || exit 1
LAB=cpu_naive,cpu_blas,naive,smem_tiled_16,smem_tiled_32,smem32_conflicted,smem32_padded,register_blocked,broken_nosync
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,temperature.gpu,power.draw --format=csv > "$OUT/nvidia-smi.txt" 2>&1
python3 -m tilegemm.cli info > "$OUT/info.txt" 2>&1
timeout 300 python3 -m tilegemm.cli bench --kernels "$LAB" --quiet --json "$OUT/bench.json" --table "$OUT/table.txt" > "$OUT/bench.log" 2>&1
echo "bench exit $?"
timeout 240 python3 -m tilegemm.cli race --racecheck --racecheck-size 32 > "$OUT/race.txt" 2>&1
echo "race exit $?"
