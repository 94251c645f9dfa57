"""The databases gu_ab.sh times (run from the repository root; kept in .dev/s45/): the shipped
database of commit d26a3ba with its BF16 B = Wᵀ entry at 128×14336×4096 (the 8B's gate/up at a
batch of 128) forced to other tiles, g1 (the one taken: 128×128×64, 5 stages) to g7."""
import copy, json, subprocess

base = json.loads(subprocess.check_output(["git", "show", "d26a3ba:src/tilegemm/data/tuning/nvidia-h200.json"]))
key = "bf16|bfloat16|bfloat16|nt|nobeta|128x14336x4096"


def t03(bm, bn, bk, st, w=4):
    return "tc_tma_persistent", dict(BM=bm, BN=bn, BK=bk, GROUP_M=8, num_warps=w, num_stages=st, C_TMA=True)


def t02(bm, bn, bk, st, w=4):
    return "tc_persistent", dict(BM=bm, BN=bn, BK=bk, GROUP_M=8, num_warps=w, num_stages=st)


V = {"g1": t03(128, 128, 64, 5), "g2": t03(64, 128, 128, 4), "g3": t03(128, 256, 64, 4, 8), "g4": t03(128, 128, 128, 3),
     "g5": t03(64, 256, 64, 4, 8), "g6": t02(128, 128, 64, 4), "g7": t03(128, 128, 64, 4, 8)}
for name, (rung, cfg) in V.items():
    d = copy.deepcopy(base)
    d["entries"][key].update(rung=rung, config=cfg)
    json.dump(d, open(f".dev/s45/db-gu-{name}.json", "w"), indent=1)
