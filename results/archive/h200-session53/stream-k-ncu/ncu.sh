. scripts/device/env.sh || exit 1
cp results/archive/h200-session53/t05_stream_k_trial.py src/tilegemm/kernels/tensorcore/t05_warp_specialized.py
NCU=$(which ncu || find /usr/local/cuda* /opt/nvidia -name ncu -type f 2>/dev/null | head -1); echo "ncu: $NCU"
B='{"BM":128,"BN":256,"BK":64,"STAGES":3,"SPLIT":1,"CONSUMERS":1,"GROUP_M":8'
C='{"BM":192,"BN":128,"BK":64,"STAGES":4,"SPLIT":1,"CONSUMERS":3,"GROUP_M":8'
run() { name=$1; shift; timeout 150 $NCU --kernel-name ws_kernel --launch-skip 2 --launch-count 1 --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis --csv --page details python3 .dev/sk_one.py "$@" > $OUT/$name.csv 2> $OUT/$name.err; echo "$name rc=$? $(wc -l < $OUT/$name.csv) lines"; }
run b4096_sk0 bf16 4096 4096 4096 "$B}"
run b4096_sk2 bf16 4096 4096 4096 "$B,\"SK\":2}"
run b1536_sk0 bf16 1536 1536 1536 "$C}"
run b1536_sk2 bf16 1536 1536 1536 "$C,\"SK\":2}"
grep -h "Duration\|DRAM Throughput\|Memory Throughput\|Stall\|L2 Cache Throughput" $OUT/*.csv | cut -c1-220 | head -60
