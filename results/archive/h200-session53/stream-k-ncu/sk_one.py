import sys, json, torch
from tilegemm.tuning import command, tuner
dtype, m, n, k, cfg = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), json.loads(sys.argv[5])
p = command.problem(dtype, m, n, k)
for _ in range(3):
    tuner.run("tc_warp_specialized", p, cfg)
torch.cuda.synchronize()
