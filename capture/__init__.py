"""Decode rounds, or any step, captured into CUDA graphs, every node counted and
attributed to its scopes (`scope`, nested; `module_scopes` for a model's modules).

Uses `pools` and `kernels`; knows nothing of `reports`.
"""

from graph_harness.capture.check import check_captured, check_step
from graph_harness.capture.compiled import CompiledStepError
from graph_harness.capture.count import (
    CountedRound,
    capture_and_count,
    capture_and_keep,
    count_round,
    default_device,
)
from graph_harness.capture.export import ExportError, NodeExport, summarize
from graph_harness.capture.findings import CheckFailed, CheckResult, Finding
from graph_harness.capture.graph_capture import CaptureError, capture_graph
from graph_harness.capture.module_scopes import module_scopes
from graph_harness.capture.params import STEPS, VARIANTS, RoundParams, StepSettings
from graph_harness.capture.replay_guard import ReplayFailed
from graph_harness.capture.round import DecodeRound
from graph_harness.capture.scopes import scope
from graph_harness.capture.state import StateWatch, StepStateError

__all__ = [
    "STEPS",
    "VARIANTS",
    "CaptureError",
    "CheckFailed",
    "CheckResult",
    "CompiledStepError",
    "CountedRound",
    "DecodeRound",
    "ExportError",
    "Finding",
    "NodeExport",
    "ReplayFailed",
    "RoundParams",
    "StateWatch",
    "StepSettings",
    "StepStateError",
    "capture_and_count",
    "capture_and_keep",
    "capture_graph",
    "check_captured",
    "check_step",
    "count_round",
    "default_device",
    "module_scopes",
    "scope",
    "summarize",
]
