# Session 57 (docs/perf-notes.md, 113), run on the H200 from the repository root as `bash results/archive/h200-session57/run_f.sh` (as run, from .dev/).
# /tmp/db-5188f9f.json: `git show 5188f9f:src/tilegemm/data/tuning/nvidia-h200.json`, made before the run (the device has no .git).
. scripts/device/env.sh || exit 1
DB=src/tilegemm/data/tuning/nvidia-h200.json
sv() {  # db shapes tag [wt]
  cp $1 $DB; rm -rf ~/.cache/tilegemm
  timeout 100 python3 results/archive/h200-session57/survey.py survey $2 $3 $4 2>&1 | grep -v Warn | tail -13
}
sv /tmp/db-5188f9f.json results/archive/h200-session57/shapes-hn.json hn-before
sv results/archive/h200-session57/db-run-f-after.json results/archive/h200-session57/shapes-hn.json hn-after
sv /tmp/db-5188f9f.json results/archive/h200-session57/shapes-ht.json ht-before wt
sv results/archive/h200-session57/db-run-f-after.json results/archive/h200-session57/shapes-ht.json ht-after wt
sv /tmp/db-5188f9f.json results/archive/h200-session57/shapes-g1.json g1-before
sv results/archive/h200-session57/db-run-f-after.json results/archive/h200-session57/shapes-g1.json g1-after
sv results/archive/h200-session57/db-without-grid212.json results/archive/h200-session57/shapes-g2.json g2-before
sv results/archive/h200-session57/db-run-f-after.json results/archive/h200-session57/shapes-g2.json g2-after
for db in /tmp/db-5188f9f.json results/archive/h200-session57/db-run-f-after.json; do cp $db $DB; rm -rf ~/.cache/tilegemm
timeout 40 python3 -c "
from tilegemm.bench import library as L
r = L.measure_shape(L._Clock(), 'fp16', 777, 1234, 4321, ('device', 'eager'), 0.5)
print('$db fp16 777x1234x4321', r.get('check'), {m: (round(r[m]['ours_ms']*1e3, 2), round(r[m]['ref_ms']*1e3, 2)) for m in ('device', 'eager')})
" 2>&1 | grep -v Warn | tail -2; done
