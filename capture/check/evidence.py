"""What one check saw, as its rules read it (capture/check/rules.py): the step, its
capture and warm-ups, the trajectories and their judgement. Plain data, built once by
check_captured (capture/check/step.py)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from graph_harness.capture.check.findings import Finding
    from graph_harness.capture.check.judge import Judgement
    from graph_harness.capture.check.trajectory import Trajectories
    from graph_harness.capture.export.nodes import NodeExport
    from graph_harness.capture.graph.capture import Captured
    from graph_harness.capture.state.steps import Repeatability


@dataclass(frozen=True, kw_only=True)
class Evidence:
    step: Callable[[], object]
    export: NodeExport
    captured: Captured | None  # None: the CPU, no graph
    rep: Repeatability  # what the warm-ups showed
    accept: Mapping[str, str] | None  # host values the step accepts (library_hosts.py)
    copies: list[Finding]  # the graph's copies from or to host memory (host_copies.py)
    t: Trajectories
    calls: int  # the trajectory's length
    judgement: Judgement  # judge.py's verdict on `t`
