# (session 51; ab.py is results/archive/h200-tuning/session45-fp8-decode/ab.py with its JSON written under /tmp)
# FP8 decode 4096^2 entries: the tensorcore bench's clocks (graph L2 warm, eager flushed) and the library's (device, eager)
DB=src/tilegemm/data/tuning/nvidia-h200.json
cp $DB /tmp/db-base.json
python3 .dev/s51/fp8_variants.py
for v in ${VARIANTS:-base v512s3 v128k256s4 v128k512s3 v256k256s3 v64k512s4}; do
  if [ $v = base ]; then cp /tmp/db-base.json $DB; else cp .dev/s51/db-$v.json $DB; fi
  echo "== $v"
  TILEGEMM_CACHE_DIR=/tmp/c-$v timeout 120 python3 scripts/device/tensorcore_bench.py --dtypes fp8 --shapes 1x4096x4096,16x4096x4096 --out /tmp/tc-$v.json 2>&1 | grep -v Warning | tail -4
  TILEGEMM_CACHE_DIR=/tmp/c-$v DTYPE=fp8 BUDGET=0.6 SHAPES=1x4096x4096xt,16x4096x4096xt NAME=lib-$v-${ROUND:-1} timeout 120 python3 .dev/s51/ab.py 2>&1 | grep -v Warning
done
cp /tmp/db-base.json $DB
python3 - <<PY
import json,glob,os
out={}
for f in glob.glob("/tmp/tc-*.json"):
    d=json.load(open(f)); out[os.path.basename(f)]=[{k:r.get(k) for k in ("m","n","k","ratio","ratio_graph","ratio_eager","ms","ref_ms","graph_ms","graph_ref_ms","config")} for r in d["records"]]
json.dump(out,open(os.environ["OUT"]+"/tc-all.json","w"),indent=1)
for f,rs in sorted(out.items()):
    print(f, [(r["m"], round(r["ratio_graph"] or 0,3), round(r["ratio_eager"] or 0,3), round((r["graph_ms"] or 0)*1e3,2), round((r["graph_ref_ms"] or 0)*1e3,2)) for r in rs])
PY
