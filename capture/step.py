"""A user's step captured as every command captures it: its warm-ups watched (does it
repeat, which host values a call changes), its graph kept (or, for a step compiled with
mode="reduce-overhead", the graphs it captures itself recorded), and what a person should
know before it is replayed, said as notes. The command line's `--target` commands
(reports/cli/targets.py) and `profile_step` (capture/profile/step.py) share it; and, for a
count on the CPU, the line for ops a GPU's capture would refuse (host_read_note).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from graph_harness.capture.count import capture_and_keep
from graph_harness.capture.export.nodes import NodeExport
from graph_harness.capture.graph.capture import Captured
from graph_harness.capture.graph.diagnose.classes import HOST_READ_OPS
from graph_harness.capture.graph.settings import StepSettings
from graph_harness.capture.record.steps import RecordedStep
from graph_harness.capture.state.steps import StateWatch, host_note
from graph_harness.capture.text import printable


@dataclass(frozen=True, kw_only=True)
class CapturedStep:
    """What capture_step gives. Keep `step` alive while the graph is replayed: its buffers
    are the graph's."""

    step: Callable[[], object]
    export: NodeExport
    captured: Captured | None  # the kept graph; None on the CPU and for `recorded`
    watch: StateWatch  # of its warm-ups: `watch.repeatability`
    recorded: RecordedStep | None = None  # a step that captures its own graphs: them
    notes: tuple[str, ...] = ()  # what a person should know, one line each


def capture_step(
    step: Callable[[], object],
    *,
    name: str,
    warmup: int = StepSettings.warmup,
    module: torch.nn.Module | None = None,
    watch: bool | None = True,
    own_graphs: bool = False,
    host_notes: bool = True,
) -> CapturedStep:
    """Capture `step` and keep what was captured (capture_and_keep), naming it `name` in
    the export and the notes. `module`: by its modules, every level recorded (tables
    choose the depth they show). `watch`: tell from the warm-ups whether the step repeats
    (anything that replays it needs to know), and note what a person should know before
    it is replayed; None: only where the step has no reset (so a count can say that what
    replays it will refuse it). `own_graphs`: a step compiled with mode="reduce-overhead"
    is counted by recording its graphs (then `captured` is None). `host_notes`: say which
    host values a call changes (a graph freezes them); False where a check follows, which
    makes a finding of them. EmptyStepError where the step issued no work."""
    from graph_harness.capture.state.steps import reset_of

    if watch is None:  # two fingerprints, for a step nothing will take back to its start
        watch = reset_of(step) is None
    sw = StateWatch(step, watch=watch, hosts=host_notes)
    kept = capture_and_keep(
        step, name=name, warmup=warmup, watch=sw, module=module, own_graphs=own_graphs
    )
    notes: list[str] = []
    if watch:
        for line in sw.repeatability.notes(name):
            if host_notes or not line.startswith(f"{name}: a call changes host values"):
                notes.append(line)
        refusal = sw.repeatability.refusal(name)
        if refusal:  # counted all the same: a count replays nothing
            notes.append(f"profile, check and report (on a GPU) will refuse it: {refusal}")
    elif sw.host_moved:  # a step with a reset, its host values read around a warm-up
        notes.append(host_note(name, sw.host_moved))
    if "compiled_attribution" in kept.export.options:
        notes.append(f"compiled code's nodes: {kept.export.options['compiled_attribution']}")
    if kept.recorded is not None:
        notes.append(_recorded_note(name, kept.recorded))
    return CapturedStep(
        step=step,
        export=kept.export,
        captured=kept.captured,
        watch=sw,
        recorded=kept.recorded,
        notes=tuple(notes),
    )


def _recorded_note(name: str, r: RecordedStep) -> str:
    others = [g for g in r.others if g.nodes]  # not a tree's empty pool graph
    sizes = " + ".join(str(g.nodes) for g in r.graphs)
    return (
        f"{name} captures its own graphs (mode='reduce-overhead'): counted by recording "
        f"them, {len(r.graphs)} replayed per call ({sizes} nodes), settled after {r.calls} "
        "calls past the warm-ups"
        + (f"; {len(others)} more captured on the way, not replayed" if others else "")
    )


def host_read_note(export: NodeExport, name: str) -> str | None:
    """One line for the ops in a CPU count that read a value back to the host (or make a
    data-dependent shape), which a GPU's capture refuses; None when there are none. For
    count, sweep and report: check says it as a finding of its own."""

    reads = [
        n for n in export.nodes if str(n.get("kernel") or "").rsplit(".", 1)[0] in HOST_READ_OPS
    ]
    if not reads:
        return None
    first = reads[0]
    scope = first.get("scope")
    where = f", in {printable(str(scope))}" if scope not in (None, "unscoped") else ""
    more = f", and {len(reads) - 1} more" if len(reads) > 1 else ""
    return (
        f"{name} reads a value back to the host ({first['kernel']} at CPU dispatch "
        f"{first['index']}{where}{more}): a GPU cannot "
        "capture it there; keep the value on the GPU or move the read out of the step "
        "(check shows each)"
    )
