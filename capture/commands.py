"""The commands that are not one stage's call, as one library call each: what
`graph-harness count` does for a step (count_step: captured, counted, optionally checked,
its host launch timed where it may be replayed) and for the built-in round's variants
(count_variants), and what `graph-harness report` measures for the round (round_report).
The command line parses, calls one of these, and renders what it returns. The other
commands' calls live with their stage: check_step (check/step.py), profile_step
(profile/step.py), sweep_step (sweep/run.py), record (record/). At the top of capture: it
may use every stage and the round (docs/architecture.md)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from graph_harness.capture.check.findings import CheckResult
from graph_harness.capture.check.step import check_captured
from graph_harness.capture.export.kinds import COUNT, COUNT_SCHEMA_VERSION
from graph_harness.capture.export.nodes import NodeExport
from graph_harness.capture.graph.settings import StepSettings
from graph_harness.capture.profile.document import ProfileResult
from graph_harness.capture.replay.document import ReplayResult
from graph_harness.capture.replay.host import captured_launch_us
from graph_harness.capture.replay.settings import ReplaySettings
from graph_harness.capture.round.exactness import Cell
from graph_harness.capture.round.params import RoundParams
from graph_harness.capture.step import CapturedStep, capture_step, host_read_note

Progress = Callable[[str], None] | None


@dataclass(frozen=True, kw_only=True)
class HostLaunch:
    """A graph's host launch (capture/replay/host.py captured_launch_us): the median time
    of one launch from an idle device, in us, or None and why it was not measured."""

    us: float | None
    why: str | None = None

    def to_dict(self) -> dict[str, object]:
        return {"us": self.us, "why": self.why}


@dataclass(frozen=True, kw_only=True)
class CountedStep:
    """What count_step gives. `got` keeps the graph (and `got.step` its buffers)."""

    got: CapturedStep
    notes: tuple[str, ...]  # what a person should know, one line each
    check: CheckResult | None = None  # with `check`
    launch: HostLaunch | None = None  # on a GPU, with `host_launch`

    @property
    def export(self) -> NodeExport:
        return self.got.export


def count_document(
    exports: dict[str, NodeExport],
    *,
    checks: dict[str, CheckResult] | None = None,
    launches: dict[str, HostLaunch] | None = None,
) -> dict[str, Any]:
    """`count --json`'s document: each export by name, and where there were any, the
    checks made (`checks`) and each graph's host launch (`launches`), by name."""
    doc: dict[str, Any] = {
        "schema": COUNT,
        "schema_version": COUNT_SCHEMA_VERSION,
        "exports": {k: e.to_dict() for k, e in exports.items()},
    }
    if checks:
        doc["checks"] = {k: r.to_dict() for k, r in checks.items()}
    if launches:
        doc["host_launch"] = {k: h.to_dict() for k, h in launches.items()}
    return doc


def count_step(
    step: Callable[[], object],
    *,
    name: str = "the step",
    warmup: int = StepSettings.warmup,
    module: torch.nn.Module | None = None,
    check: int | str | None = None,
    soak: int = 0,
    soak_deadline: float | None = None,
    host_launch: bool = True,
    watch: bool | None = None,
    progress: Progress = None,
    note: Progress = None,
    shown: str | None = None,
) -> CountedStep:
    """Capture and count `step` (capture/step.py capture_step: `module` by its modules); with
    `check` (a number of calls, or "to-end"), check its graph over that trajectory and soak it
    `soak` replays (check/step.py check_captured); with `host_launch`, on a GPU, time its
    graph's host launch where it may be replayed, after the check and only where it passed.
    EmptyStepError where the step issued no work. Steps with their own graphs, `watch`,
    `progress`, `note`: docs/your-model.md, "From Python: `capture_and_keep` and `count_step`"."""
    if soak and check is None:
        raise ValueError(f"soak={soak} soaks a checked graph: give check= too")
    if progress:
        progress(f"capturing {shown or name}")
    got = capture_step(
        step,
        name=name,
        warmup=warmup,
        module=module,
        watch=(True if check is not None else None) if watch is None else watch,
        own_graphs=check is None,  # a check replays the step's graph: ours only
        host_notes=check is None,
    )
    notes = _notes(got, check is None, shown or name, note)
    checked = None
    if check is not None:
        if progress:
            progress(f"checking {shown or name}")
        checked = check_captured(
            step, got.export, got.captured, got.watch.repeatability, name=name, steps=check,
            soak=soak, soak_deadline=soak_deadline,
        )  # fmt: skip
    launch = None
    if host_launch and torch.cuda.is_available() and (checked is None or checked.passed):
        launch = _launch_of_step(got, name)
    return CountedStep(got=got, notes=tuple(notes), check=checked, launch=launch)


def _notes(got: CapturedStep, unchecked: bool, shown: str, note: Progress) -> list[str]:
    """What the capture noted, with (where no check will find them) the ops that read a
    value back to the host; each told to `note` at once."""
    notes = list(got.notes)
    if unchecked and (line := host_read_note(got.export, shown)):
        notes.append(line)  # as a check would find it (with one, it does)
    for line in notes if note else ():
        note(line)
    return notes


def _launch_of_step(got: CapturedStep, name: str) -> HostLaunch:
    if got.captured is None:  # on a GPU: a step that captures its own graphs
        return HostLaunch(
            us=None, why="not measured: the step launches its own graphs (profile times its calls)"
        )
    us, why = captured_launch_us(
        got.captured.graph, name, step=got.step, repeatability=got.watch.repeatability
    )
    return HostLaunch(us=us, why=why)


@dataclass(frozen=True, kw_only=True)
class CountedVariant:
    """One variant of the round, as count_variants gives it."""

    export: NodeExport
    launch: HostLaunch | None = None  # on a GPU, with `host_launch`


def count_variants(
    params: RoundParams,
    variants: Sequence[str],
    *,
    pdl: bool = False,
    host_launch: bool = True,
    progress: Progress = None,
) -> dict[str, CountedVariant]:
    """Each variant of the built-in round captured (CUDA) or dispatched (CPU) and counted
    (round/count.py count_round), and on a GPU with `host_launch`, its graph's host launch
    timed (the round's own graph: its launches harm nothing). A variant named twice is
    counted once. Each graph is freed before the next variant is built."""
    from graph_harness.capture.round.count import count_round

    out = {}
    for v in dict.fromkeys(variants):  # each once, in the order first named
        if progress:
            progress(f"capturing {v}")
        counted = count_round(params, v, pdl=pdl)
        launch = None
        if host_launch and counted.captured is not None:
            launch = HostLaunch(us=captured_launch_us(counted.captured.graph, v)[0])
        out[v] = CountedVariant(export=counted.export, launch=launch)
        del counted
    return out


@dataclass(frozen=True, kw_only=True)
class RoundReport:
    """What `report` measures for the built-in round (round_report)."""

    exports: dict[str, NodeExport]
    exact: list[Cell]  # the variants' bit-exactness against the shipped one
    replay: ReplayResult | None = None  # chains, fits, rounds timed: on a GPU
    profile: ProfileResult | None = None  # the in-round profile: on a GPU
    skipped: str | None = None  # why there are no replays, where there are none


def round_report(
    params: RoundParams,
    variants: Sequence[str],
    settings: ReplaySettings | None = None,
    *,
    progress: Progress = None,
) -> RoundReport:
    """Every variant counted and compared bit for bit (round/exactness.py); on a GPU, then
    replayed (round/replays.py run_replays with `settings`; no host
    launch figures, which the report does not show) and profiled in one timed build
    (round/profile.py profile_rounds). The counted rounds are freed before anything is
    timed. Syncs."""
    from graph_harness.capture.profile.settings import ProfileSettings
    from graph_harness.capture.round.count import count_round
    from graph_harness.capture.round.exactness import exactness
    from graph_harness.capture.round.profile import profile_rounds
    from graph_harness.capture.round.replays import run_replays

    say = progress or (lambda _line: None)
    variants = list(variants)
    counted = {}
    for v in variants:
        say(f"counting {v}")
        counted[v] = count_round(params, v)
    say("comparing the variants' outputs bit for bit")
    exact = exactness(counted)
    exports = {v: c.export for v, c in counted.items()}
    del counted  # their graphs and buffers, before anything is timed
    if not torch.cuda.is_available():
        return RoundReport(exports=exports, exact=exact, skipped="no CUDA device on this machine")
    replay = run_replays(params, variants, settings=settings, host=False, progress=progress)
    say(f"profiling {len(variants)} rounds")
    # timed too: each graph's net figures then take the excess fitted to its own event
    # timing (capture/profile/fit.py), not the chains' alone
    profile = profile_rounds(params, variants, ProfileSettings(builds=1), progress=progress)
    return RoundReport(exports=exports, exact=exact, replay=replay, profile=profile)
