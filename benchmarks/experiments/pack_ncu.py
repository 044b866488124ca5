# What the pack's time is made of at 8 x 2048 (issue 16): one call each of the fused
# pack and Inductor's compiled shipped pack, on the same inputs and output, inside an NVTX
# range that Nsight Compute filters on (warm-up and Inductor's autotuning stay outside):
#   ncu --nvtx --nvtx-include "measure/" --section SpeedOfLight --section LaunchStats \
#       --section MemoryWorkloadAnalysis --section Occupancy --csv \
#       python3 benchmarks/experiments/pack_ncu.py
import sys

sys.path.insert(0, ".")
import torch

from graph_harness.capture.round.decode import compiled_shipped_pack
from graph_harness.kernels import pack_scores_ids

rows, k, width = 8, 2048, 2048
idx = torch.randint(0, width, (rows, k), device="cuda")
idx[torch.rand(rows, k, device="cuda") < 0.1] = -1
scores = torch.randn(rows, k, device="cuda")
rank = torch.tensor(3, dtype=torch.int32, device="cuda")
out = torch.empty(rows, k, 2, device="cuda")
compiled = compiled_shipped_pack()
for _ in range(5):
    pack_scores_ids(idx, scores, rank, width, out)
    compiled(idx, scores, rank, width, out)
torch.cuda.synchronize()
with torch.cuda.nvtx.range("measure"):
    pack_scores_ids(idx, scores, rank, width, out)
    compiled(idx, scores, rank, width, out)
torch.cuda.synchronize()
print("done")
