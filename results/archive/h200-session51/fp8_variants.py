"""Session 51: FP8 decode entries 1x4096x4096 and 16x4096x4096 (nt) forced to other t03 swapped tiles;
writes .dev/s51/db-<name>.json from the shipped database."""
import copy, json
DB = "src/tilegemm/data/tuning/nvidia-h200.json"
base = json.load(open(DB))
keys = ["fp8|float8_e4m3fn|bfloat16|nt|nobeta|1x4096x4096", "fp8|float8_e4m3fn|bfloat16|nt|nobeta|16x4096x4096"]
def t03(bn, bk, st):
    return dict(BK=bk, BM=16, BN=bn, C_TMA=True, GROUP_M=8, REG_A=False, SWAP=True, num_stages=st, num_warps=4)
V = {"v512s3": t03(64, 512, 3), "v128k256s4": t03(128, 256, 4), "v128k512s3": t03(128, 512, 3),
     "v256k256s3": t03(256, 256, 3), "v64k512s4": t03(64, 512, 4), "v64k512s5": t03(64, 512, 5), "v64k256s6": t03(64, 256, 6)}
for name, cfg in V.items():
    d = copy.deepcopy(base)
    for key in keys:
        d["entries"][key].update(rung="tc_tma_persistent", config=cfg)
    json.dump(d, open(f".dev/s51/db-{name}.json", "w"), indent=1)
print(list(V))
