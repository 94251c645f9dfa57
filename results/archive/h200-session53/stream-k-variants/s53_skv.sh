. scripts/device/env.sh || exit 1
for v in A_full B_store_only C_ticket_epilogue D_epilogue_only E_store_ticket_noloads; do
  cp .dev/skv/$v.py src/tilegemm/kernels/tensorcore/t05_warp_specialized.py
  timeout 100 python3 .dev/skv/time_one.py $v 2>&1 | grep -v "Warning\|warn(" | tail -2
done
