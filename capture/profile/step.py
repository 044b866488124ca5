"""`profile_step`: a user's step (or several, each priced against the first) captured,
optionally checked, and profiled under CUPTI, as `graph-harness profile --target` does.

Each step is captured as every command captures it (capture/step.py), refused before any
replay if it cannot take many (it does not repeat and has no reset), and replayed through
a guarded Replayer carrying its reset (capture/replay/guard.py). A step compiled with
mode="reduce-overhead" captures its own graphs: it is profiled call by call
(capture/record/steps.py StepCalls), its graphs as the program runs them outside any
module scopes. Everything here syncs the device and needs CUDA.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

import torch

from graph_harness.capture.check.step import check_captured, gate
from graph_harness.capture.count import EmptyStepError
from graph_harness.capture.export.nodes import NodeExport
from graph_harness.capture.graph.settings import StepSettings
from graph_harness.capture.profile.document import ProfileResult
from graph_harness.capture.profile.run import Progress, profile_steps
from graph_harness.capture.profile.settings import ProfileSettings
from graph_harness.capture.record.steps import StepCalls, chained, outside_scopes
from graph_harness.capture.replay.guard import Replayer
from graph_harness.capture.state.steps import require_repeatable, reset_of, start_of
from graph_harness.capture.step import CapturedStep, capture_step

Step = Callable[[], object]
Note = Callable[[str], None] | None


def profile_step(
    steps: Step | Mapping[str, Step],
    settings: ProfileSettings | None = None,
    *,
    warmup: int = StepSettings.warmup,
    module: torch.nn.Module | Mapping[str, torch.nn.Module | None] | None = None,
    check: int | str | None = None,
    timed: bool = True,
    shown: Mapping[str, str] | None = None,
    progress: Progress = None,
    note: Note = None,
    before: Note = None,
) -> ProfileResult:
    """Capture each step (a callable, named "step", or name -> callable; `warmup` warm-ups;
    with `module`, one model or name -> model, by its modules) and profile them together, the
    second and later priced against the first (profile_steps). `check`: check each graph
    first over that many calls (or "to-end"), raising CheckFailed (or CheckUnverified), its
    `results` every check, before any profile if one does not pass. A step that does not
    repeat and has no reset: StepStateError once captured, before any replay. `shown`,
    `note`, `progress`, `before`: docs/profile.md, "`profile_step`'s arguments"."""
    steps = {"step": steps} if callable(steps) else dict(steps)
    models = module if isinstance(module, Mapping) else dict.fromkeys(steps, module)
    say, tell = progress or (lambda _: None), note or (lambda _: None)
    ready, keep, checks = {}, [], {}
    for name, step in steps.items():
        label = (shown or {}).get(name, name)
        if before:
            before(name)
        say(f"capturing {label}")
        model = models.get(name)
        got = _captured(step, label, warmup, model, check is None, tell)
        if reset_of(step) is not None:
            tell(
                f"{label} has a step.reset: it is reset before every run of replays, each at "
                f"most {(settings or ProfileSettings()).replays_per_reset} replays long, and "
                "once at the end"
            )
        if check is not None:
            say(f"checking {label}")
            checks[name] = check_captured(
                step, got.export, got.captured, got.watch.repeatability, name=label, steps=check
            )
        ready[name] = _replayable(got, label, model is not None, say, tell)
        keep.append(got)  # the step's buffers must outlive its graph
    gate(checks)
    result = profile_steps(ready, settings, timed=timed, progress=progress)
    return replace(result, checks=checks)


def _captured(
    step: Callable[[], object],
    label: str,
    warmup: int,
    model: torch.nn.Module | None,
    unchecked: bool,
    tell: Callable[[str], None],
) -> CapturedStep:
    """One step captured as profile_step takes it, its notes told: a step that issues no
    work named, one that cannot be replayed refused (StepStateError)."""
    try:
        got = capture_step(
            step,
            name=label,
            warmup=warmup,
            module=model,
            own_graphs=unchecked,  # a check replays graphs of ours only
            host_notes=unchecked,  # a check makes findings of them
        )
    except EmptyStepError as e:  # which of the steps issued no work
        raise EmptyStepError(f"{label!r}: {e}") from None
    for line in got.notes:
        tell(line)
    require_repeatable(got.watch.repeatability, label)
    return got


def _replayable(
    got: CapturedStep, label: str, scoped: bool, say: Callable[[str], None], tell: Callable
) -> tuple[NodeExport, Replayer]:
    """The export to profile and the guarded Replayer of the step's graph (its reset, then
    its feed of call 0, before each run of replays); a step that captures its own graphs
    replayed by calling it, its graphs as the program runs them outside module scopes."""
    start = start_of(got.step)
    export, graph = got.export, got.captured and got.captured.graph
    if got.recorded is not None:
        graph = StepCalls(got.step, got.recorded)
        if scoped:  # outside them, the graphs the program runs
            say(f"recording {label} outside module scopes")
            out = outside_scopes(got.step, export, got.recorded, start=start)
            graph, export = out.calls, out.export
            tell(f"{label}: {out.note}")
        export = chained(export, graph.recorded)
    return export, Replayer(graph, label, reset=start, repeatability=got.watch.repeatability)
