"""The built-in round captured and counted: `count_round` builds a variant's round,
captures it (CUDA) or counts its dispatched operations (CPU), and exports its nodes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from graph_harness.capture.count import capture_nodes, default_device, source_of
from graph_harness.capture.environment import environment, now
from graph_harness.capture.export.nodes import NodeExport
from graph_harness.capture.export.workload import ROUND_WORKLOAD
from graph_harness.capture.graph.capture import Captured
from graph_harness.capture.graph.settings import StepSettings
from graph_harness.capture.round.decode import DecodeRound
from graph_harness.capture.round.params import RoundParams

if TYPE_CHECKING:
    from torch.distributed import ProcessGroup


@dataclass(frozen=True, kw_only=True)
class CountedRound:
    round: DecodeRound
    export: NodeExport
    captured: Captured | None  # the kept graph on CUDA; None on the CPU source


def count_round(
    params: RoundParams,
    variant: str,
    device: torch.device | str | None = None,
    *,
    graph_pool: tuple[int, int] | None = None,
    pdl: bool = False,
    group: ProcessGroup | None = None,
) -> CountedRound:
    """Build the round for `variant`, capture it (CUDA) or run it counting (CPU), export.
    `pdl=True` launches the harness's Triton kernels with programmatic dependent launch."""
    device = torch.device(device) if device is not None else default_device()
    rnd = DecodeRound(params, variant, device, pdl=pdl, group=group)
    nodes, captured = capture_nodes(
        rnd.run,
        device,
        # On the CPU the round's first call dispatches what every call does: no warm-up.
        warmup=StepSettings.warmup if device.type == "cuda" else 0,
        graph_pool=graph_pool,
        # A collective in the round: let NCCL's watchdog thread query its events meanwhile.
        capture_error_mode="global" if group is None else "thread_local",
    )
    export = NodeExport(
        source=source_of(device),
        workload=ROUND_WORKLOAD,
        variant=variant,
        params=params.as_dict(),
        nodes=nodes,
        env=environment(device),
        created=now(),
        rank=params.rank,
        options={"pdl": pdl, "distributed": group is not None},
    )
    return CountedRound(round=rnd, export=export, captured=captured)
