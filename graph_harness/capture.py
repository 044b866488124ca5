"""All measurement: decode rounds, or any step, captured into CUDA graphs, every node
counted and attributed to its scopes (`scope`, nested; `module_scopes` for a model's
modules), exported, replayed, profiled, advised on and held to budgets.

The sub-packages, in pipeline order (each may import only those before it):

    scopes/       labels put on the work as it runs: scope, module_scopes, provenance
    graph/        capture into a CUDA graph and read it back; the CPU's dispatch count
    attribution/  nodes attributed to scopes; the scope tree and its labels
    export/       the node export, checked documents, deltas, DOT
    record/       the graphs a program captures itself, recorded in every process
    state/        steps with state: reset, repeatability, fingerprints
    count.py      capture_and_count, capture_and_keep: graph + attribution + export
    step.py       capture_step: a user's step captured as every command does, with its notes
    replay/       guarded replays of any graph, timing, chain kinds, the replay document
    check/        does the graph compute what the step computes
    live/         record --check: a program's graphs checked against their eager forms
    sweep/        the capture-size ladder: a step at every batch size, padding, sizes to capture
    profile/      the in-round profile under CUPTI
    advise/       the fusion advisor
    budget/       node budgets and their file
    round/        the built-in decode round, at the top: parameters, count_round, its
                  chains, rounds timed, savings priced, run_replays, profile_rounds,
                  distributed; it registers what it adds to replay and advise, which
                  know nothing of it
    commands.py   each command that is not one stage's call, as one library call:
                  count_step, count_variants, round_report (above the round: uses it)

Shared by all, at the root: files.py (writing the paths a user names), paths.py (what a
path is, reading one), stats.py (fits and intervals), environment.py (what a measurement
ran on), errors.py (the error classes the command line sorts by exit code), text.py (names
as text: a lone surrogate or a control character kept as its escape where it comes in),
results.py (where stdout went while a command keeps descriptor 1 on stderr),
descriptors.py (the descriptors graph-harness holds while a user's code runs),
settings.py (the settings classes' one check of their fields).

Uses `pools` and `kernels`; knows nothing of `reports`. Importing this package loads
nothing: each name below is imported on first use, so `from graph_harness.capture import
scope` in model code brings torch and no Triton or pandas.
"""

from __future__ import annotations

from graph_harness import _folder

# this module is the package graph_harness.capture; its modules are in its folder
__path__ = _folder(__spec__, "capture")


import importlib
from typing import TYPE_CHECKING

# Each public name and the module (under capture) that defines it.
_LAZY = {
    "STEPS": "round.params",
    "VARIANTS": "round.params",
    "RoundParams": "round.params",
    "StepSettings": "graph.settings",
    "CaptureError": "graph.capture",
    "capture_graph": "graph.capture",
    "CompiledStepError": "graph.compiled",
    "scope": "scopes.recorder",
    "module_scopes": "scopes.modules",
    "ExportError": "export.nodes",
    "NodeExport": "export.nodes",
    "summarize": "export.nodes",
    "StateWatch": "state.steps",
    "StepStateError": "state.steps",
    "capture_and_count": "count",
    "count_step": "commands",
    "count_variants": "commands",
    "round_report": "commands",
    "CountedStep": "commands",
    "capture_and_keep": "count",
    "default_device": "count",
    "CountedRound": "round.count",
    "count_round": "round.count",
    "DecodeRound": "round.decode",
    "ReplayFailed": "replay.guard",
    "CheckFailed": "check.findings",
    "CheckResult": "check.findings",
    "Finding": "check.findings",
    "check_captured": "check.step",
    "capture_step": "step",
    "CapturedStep": "step",
    "profile_step": "profile.step",
    "check_step": "check.step",
    "Counted": "count",
    "EmptyStepError": "count",
    "SweepResult": "sweep.document",
    "SweepSettings": "sweep.settings",
    "sweep_step": "sweep.run",
    "check_updated": "sweep.updated",
    "UpdatedResult": "check.updated_verdict",
    "record_graphs": "record.program",
    "run_program": "record.program",
    "Recording": "record.recording",
    "RecordOptions": "record.process",
    "GraphRecord": "record.graphs",
    "EagerForm": "live.forms",
    "RecordedStep": "record.steps",
}
__all__ = [
    "STEPS",
    "VARIANTS",
    "CaptureError",
    "CapturedStep",
    "CheckFailed",
    "CheckResult",
    "CompiledStepError",
    "Counted",
    "CountedRound",
    "CountedStep",
    "DecodeRound",
    "EagerForm",
    "EmptyStepError",
    "ExportError",
    "Finding",
    "GraphRecord",
    "NodeExport",
    "RecordOptions",
    "RecordedStep",
    "Recording",
    "ReplayFailed",
    "RoundParams",
    "StateWatch",
    "StepSettings",
    "StepStateError",
    "SweepResult",
    "SweepSettings",
    "UpdatedResult",
    "capture_and_count",
    "capture_and_keep",
    "capture_graph",
    "capture_step",
    "check_captured",
    "check_step",
    "check_updated",
    "count_round",
    "count_step",
    "count_variants",
    "default_device",
    "module_scopes",
    "profile_step",
    "record_graphs",
    "round_report",
    "run_program",
    "scope",
    "summarize",
    "sweep_step",
]

if TYPE_CHECKING:  # what a reader (and a type checker) sees; at run time, __getattr__
    from graph_harness.capture.check.findings import CheckFailed, CheckResult, Finding
    from graph_harness.capture.check.step import check_captured, check_step
    from graph_harness.capture.check.updated_verdict import UpdatedResult
    from graph_harness.capture.commands import (
        CountedStep,
        count_step,
        count_variants,
        round_report,
    )
    from graph_harness.capture.count import (
        Counted,
        EmptyStepError,
        capture_and_count,
        capture_and_keep,
        default_device,
    )
    from graph_harness.capture.export.nodes import ExportError, NodeExport, summarize
    from graph_harness.capture.graph.capture import CaptureError, capture_graph
    from graph_harness.capture.graph.compiled import CompiledStepError
    from graph_harness.capture.graph.settings import StepSettings
    from graph_harness.capture.live.forms import EagerForm
    from graph_harness.capture.profile.step import profile_step
    from graph_harness.capture.record.graphs import GraphRecord
    from graph_harness.capture.record.process import RecordOptions
    from graph_harness.capture.record.program import record_graphs, run_program
    from graph_harness.capture.record.recording import Recording
    from graph_harness.capture.record.steps import RecordedStep
    from graph_harness.capture.replay.guard import ReplayFailed
    from graph_harness.capture.round.count import CountedRound, count_round
    from graph_harness.capture.round.decode import DecodeRound
    from graph_harness.capture.round.params import STEPS, VARIANTS, RoundParams
    from graph_harness.capture.scopes.modules import module_scopes
    from graph_harness.capture.scopes.recorder import scope
    from graph_harness.capture.state.steps import StateWatch, StepStateError
    from graph_harness.capture.step import CapturedStep, capture_step
    from graph_harness.capture.sweep.document import SweepResult
    from graph_harness.capture.sweep.run import sweep_step
    from graph_harness.capture.sweep.settings import SweepSettings
    from graph_harness.capture.sweep.updated import check_updated


def __getattr__(name: str) -> object:
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{where}"), name)
    globals()[name] = value  # once: later look-ups find it without coming here
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
