# Hypothesis for the round's residual: in the round the pack's `out` (a gather slot) and
# the copies' destinations are cold in L2 (each stage has its own, and topk traffic
# passes in between); in a chain they are hot. Inductor's pack READS out before writing
# it (tmp20 = load(in_ptr3)), the fused pack only writes. Prediction: with a distinct,
# cold out per call, compiled's per-call cost rises by ~0.5-1 us, fused's much less.
import os
import sys

sys.path.insert(0, ".")
import pandas as pd
import torch

from graph_harness.capture.replay.timing import Quantiles, capture_unrolled, time_replays_us
from graph_harness.kernels import pack_scores_ids, pack_scores_ids_shipped, selected_local_records

OUT = os.environ.get("OUT", "/tmp/out")
N = 1024  # calls per graph; cold: N distinct buffers (N x 128 KiB = 128 MiB > 50 MiB L2)


def main():
    dev = "cuda"
    rows, k, width = 8, 2048, 8192
    idx = torch.randint(0, width, (rows, k), device=dev)
    idx[torch.rand(rows, k, device=dev) < 0.1] = -1
    sc = torch.randn(rows, k, device=dev)
    rank = torch.tensor(3, dtype=torch.int32, device=dev)
    outs = torch.empty(N, rows, k, 2, device=dev)
    compiled = torch.compile(pack_scores_ids_shipped, fullgraph=True, dynamic=False)
    ids = torch.randint(0, 8 * width, (rows, k), dtype=torch.int32, device=dev)
    physical, counts = selected_local_records(ids, rank, width)
    kept_p = torch.empty(N, *physical.shape, dtype=physical.dtype, device=dev)
    kept_c = torch.empty(N, *counts.shape, dtype=counts.dtype, device=dev)

    def chain(kind, cold):
        def run():
            for i in range(N):
                j = i if cold else 0
                if kind == "compiled":
                    compiled(idx, sc, rank, width, outs[j])
                elif kind == "fused":
                    pack_scores_ids(idx, sc, rank, width, outs[j])
                elif kind == "shipped":
                    pack_scores_ids_shipped(idx, sc, rank, width, outs[j])
                else:
                    kept_p[j].copy_(physical)
                    kept_c[j].copy_(counts)

        return run

    graphs = {}
    for kind in ("compiled", "fused", "shipped", "copies"):
        for cold in (False, True):
            graphs[f"{kind}|{'cold' if cold else 'hot'}"] = capture_unrolled(chain(kind, cold), 1)
    rows_out = []
    for rep in range(2):
        t = time_replays_us(graphs, replays=3, trials=21)
        for name, v in t.items():
            q = Quantiles.of([x / N for x in v])
            kind, temp = name.split("|")
            rows_out.append(
                dict(rep=rep, kind=kind, out=temp, per_call_us=q.median, p20=q.p20, p80=q.p80)
            )
    df = pd.DataFrame(rows_out)
    df.to_csv(f"{OUT}/cold_out.csv", index=False)
    piv = df.pivot_table(index=["rep", "kind"], columns="out", values="per_call_us")
    piv["cold-hot"] = piv["cold"] - piv["hot"]
    print(piv.round(4).to_string(), flush=True)


if __name__ == "__main__":
    main()
