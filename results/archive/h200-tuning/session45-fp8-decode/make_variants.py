"""The databases fp8_ab.sh and fp8_ab2.sh time (run from the repository root; they were kept in
.dev/s45/, an ignored folder carried to the device): the shipped database of the commit before
session 45 with its FP8 entries at 1× and 16×28672×8192 forced to t04 split-K forms (s2, s3, s4,
s2k512) or t02 tiles (p64, p128, p128k128, p128k512, p256), and `tuned`: the 16 entries of
tune-fp8-db.json merged in."""
import copy, json, subprocess

base = json.loads(subprocess.check_output(["git", "show", "bab6f85:src/tilegemm/data/tuning/nvidia-h200.json"]))
here = "results/archive/h200-tuning/session45-fp8-decode/"


def t04(bn, bk, st, split):
    return dict(BM=16, BN=bn, BK=bk, GROUP_M=8, num_warps=4, num_stages=st, REG_A=False, FUSED=True, SPLIT=split,
                SWAP=True, TMA=True)


def t02(bm, bn, bk, st, w=4):
    return dict(BM=bm, BN=bn, BK=bk, GROUP_M=8, num_warps=w, num_stages=st)


V = {"s4": ("tc_splitk", t04(64, 256, 4, 4)), "s2": ("tc_splitk", t04(64, 256, 4, 2)),
     "s2k512": ("tc_splitk", t04(64, 512, 3, 2)), "s3": ("tc_splitk", t04(64, 256, 4, 3)),
     "p128": ("tc_persistent", t02(16, 128, 256, 4)), "p64": ("tc_persistent", t02(16, 64, 256, 6)),
     "p128k512": ("tc_persistent", t02(16, 128, 512, 3)), "p256": ("tc_persistent", t02(16, 256, 256, 3)),
     "p128k128": ("tc_persistent", t02(16, 128, 128, 6))}
for name, (rung, cfg) in V.items():
    d = copy.deepcopy(base)
    for m in (1, 16):
        d["entries"][f"fp8|float8_e4m3fn|bfloat16|nt|nobeta|{m}x28672x8192"].update(rung=rung, config=cfg)
    json.dump(d, open(f".dev/s45/db-fp8-{name}.json", "w"), indent=1)
d = copy.deepcopy(base)
d["entries"].update(json.load(open(here + "tune-fp8-db.json"))["entries"])
json.dump(d, open(".dev/s45/db-fp8-tuned.json", "w"), indent=1)
