"""One-off: set the H200 database's TF32 128x1024x8192 entry to a named form (in place, on the device's copy)."""
import json
import sys

path = "src/tilegemm/data/tuning/nvidia-h200.json"
key = "tf32|float32|float32|nn|nobeta|128x1024x8192"
forms = {
    "fused": lambda c: dict(c, FUSED=True),
    "alt": lambda c: dict(BK=64, BM=32, BN=64, FUSED=True, GROUP_M=8, SPLIT=12, num_stages=4, num_warps=4),
}
d = json.load(open(path))
d["entries"][key]["config"] = forms[sys.argv[1]](d["entries"][key]["config"])
json.dump(d, open(path, "w"), indent=1)
print(sys.argv[1], d["entries"][key]["config"])
