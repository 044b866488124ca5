"""The distributed round on N GPUs of one host, NCCL, captured: counts, identity, times.

    torchrun --nproc-per-node 2 benchmarks/bench_distributed.py --out DIR [--stages 24 ...]

Per rank and variant: nodes of the captured round (the all-gather in step `gather`), the
check that the replayed round is bit-identical to the single-process emulation of that
rank, and `shipped` vs `fused` replay times (interleaved, lockstep across ranks).
Rank 0 prints the merged table and writes DIR/distributed.json.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from graph_harness.capture import VARIANTS, RoundParams
from graph_harness.capture.export.nodes import NodeExport
from graph_harness.capture.replay.settings import ReplaySettings
from graph_harness.capture.replay.timing import Quantiles, time_replays_us
from graph_harness.capture.round.distributed import (
    count_distributed,
    emulate_rank,
    init_from_env,
    merge,
    release_graphs,
)
from tests.exact import poison_


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--trials", type=int, default=ReplaySettings().trials)
    d = RoundParams()
    for name in ("stages", "rows", "k", "shard", "seed"):
        ap.add_argument(f"--{name}", type=int, default=getattr(d, name))
    args = ap.parse_args()
    setup = init_from_env()
    params = RoundParams(
        stages=args.stages,
        rows=args.rows,
        k=args.k,
        world=setup.world,
        rank=setup.rank,
        shard=args.shard,
        seed=args.seed,
    )
    graph_pool = torch.cuda.graph_pool_handle()
    rows, graphs, keep = [], {}, []
    for v in VARIANTS:
        counted = count_distributed(params, v, setup, graph_pool=graph_pool)
        outs = counted.round.outputs()
        for t in outs.values():
            poison_(t)
        counted.captured.graph.replay()
        torch.cuda.synchronize()
        want = emulate_rank(params, v, setup.rank, setup.device)
        identical = all(
            torch.equal(outs[k].view(torch.int32), want[k].view(torch.int32)) for k in want
        )
        rows.append(dict(variant=v, export=counted.export.to_dict(), identical=identical))
        graphs[v] = counted.captured.graph
        keep.append(counted)
    dist.barrier()
    times = time_replays_us(
        {v: graphs[v] for v in ("shipped", "fused")},
        trials=args.trials,
        replays=ReplaySettings().round_replays,
    )
    med = {v: Quantiles.of(ts).median for v, ts in times.items()}
    gathered = [None] * setup.world if setup.rank == 0 else None
    dist.gather_object(dict(rank=setup.rank, rows=rows, times=times, med=med), gathered, dst=0)
    if setup.rank == 0:
        print(
            f"world {setup.world} on {torch.cuda.get_device_name()} x{setup.world}, "
            f"torch {torch.__version__}; {params}"
        )
        for v in VARIANTS:
            exports = [
                NodeExport.from_dict(next(r for r in g["rows"] if r["variant"] == v)["export"])
                for g in gathered
            ]
            m = merge(exports)
            ident = [next(r for r in g["rows"] if r["variant"] == v)["identical"] for g in gathered]
            gather_nodes = exports[0].frame().query("step == 'gather'")
            kinds = gather_nodes.groupby(["type", "kernel"]).size().to_dict()
            print(
                f"{v:<18} nodes per rank {m.totals}  same structure: {m.same_structure}  "
                f"identical to emulation per rank: {ident}  gather nodes: {kinds}"
            )
        for g in gathered:
            print(
                f"rank {g['rank']}: shipped {g['med']['shipped']:.1f} us, fused "
                f"{g['med']['fused']:.1f} us per round replay (median)"
            )
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "distributed.json").write_text(json.dumps(gathered, default=str) + "\n")
    release_graphs(graphs.values())
    keep.clear()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
