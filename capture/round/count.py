"""The built-in round captured and counted: `count_round` builds a variant's round,
captures it (CUDA) or counts its dispatched operations (CPU), and exports its nodes."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from graph_harness.capture.attribution.records import nodes_from_graph
from graph_harness.capture.count import count_dispatch, default_device
from graph_harness.capture.environment import environment, now
from graph_harness.capture.export.nodes import NodeExport
from graph_harness.capture.export.workload import ROUND_WORKLOAD
from graph_harness.capture.graph.capture import Captured, capture_graph
from graph_harness.capture.graph.reader import read_graph
from graph_harness.capture.round.decode import DecodeRound
from graph_harness.capture.round.params import RoundParams


@dataclass
class CountedRound:
    round: DecodeRound
    export: NodeExport
    captured: Captured | None  # the kept graph on CUDA; None on the CPU source


def count_round(
    params: RoundParams,
    variant: str,
    device: torch.device | str | None = None,
    *,
    graph_pool=None,
    pdl: bool = False,
    group=None,
) -> CountedRound:
    """Build the round for `variant`, capture it (CUDA) or run it counting (CPU), export.
    `pdl=True` launches the harness's Triton kernels with programmatic dependent launch."""
    device = torch.device(device) if device is not None else default_device()
    rnd = DecodeRound(params, variant, device, pdl=pdl, group=group)
    if device.type == "cuda":
        # A collective in the round: let NCCL's watchdog thread query its events meanwhile.
        mode = "global" if group is None else "thread_local"
        captured = capture_graph(rnd.run, graph_pool=graph_pool, capture_error_mode=mode)
        nodes = nodes_from_graph(read_graph(captured.graph.raw_cuda_graph()), captured.marks)
        source = "cuda-graph"
    else:
        captured = None
        nodes = count_dispatch(rnd.run)
        source = "cpu-dispatch"
    export = NodeExport(
        source=source,
        workload=ROUND_WORKLOAD,
        variant=variant,
        params=params.as_dict(),
        nodes=nodes,
        env=environment(device),
        created=now(),
        rank=params.rank,
        options={"pdl": pdl, "distributed": group is not None},
    )
    return CountedRound(rnd, export, captured)
