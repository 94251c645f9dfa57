import json, os, statistics, torch
from tilegemm.bench import library as L
from tilegemm.sampling import alternate
clock = L._Clock()
out = {}
for n in (256, 512):
    torch.backends.cuda.matmul.allow_tf32 = True
    a, b, sa, sb = L.operands("tf32", n, n, n)
    ours, ref = L._library_call("tf32", a, b, sa, sb), L._reference_call("tf32", a, b, sa, sb)
    for f in (ours, ref):
        for _ in range(20): f()
    for batch in (5, 1, 5, 1, 5, 1, 5, 1):
        s, why = alternate([lambda k_, f=ours: clock.eager(f, k_, 30), lambda k_, f=ref: clock.eager(f, k_, 30)],
                           budget_s=0.3, min_reps=10, max_reps=60, target_rse=0.01, batch=batch)
        o, r = statistics.median(s[0]) * 1e3, statistics.median(s[1]) * 1e3
        pr = statistics.median([y / x for x, y in zip(s[0], s[1])])
        out.setdefault(f"{n} batch {batch}", []).append(dict(ours=round(o, 2), ref=round(r, 2), ratio=round(r / o, 3),
                                                              paired=round(pr, 3), n=len(s[0]), why=why,
                                                              ours_s=[round(x*1e3,1) for x in s[0]], ref_s=[round(x*1e3,1) for x in s[1]]))
        print(n, "batch", batch, f"ours {o:.2f} ref {r:.2f} ratio {r/o:.3f} paired {pr:.3f} n={len(s[0])} {why}", flush=True)
json.dump(out, open(os.path.join(os.environ["OUT"], "abba_probe.json"), "w"))
