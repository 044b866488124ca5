"""A step that captures its own graphs (`torch.compile(mode="reduce-overhead")`: Inductor's
cudagraph trees) counted by recording them, since no graph can be captured around it.

After its warm-ups the step is called again, from its start, until a call captures no new
graph and replays at least one; its graphs are those that call replayed (each node carries
its `graph`), others captured on the way are kept apart (`others`). Still capturing after
MAX_SETTLE calls, or replaying nothing, is an error. Such a step is replayed as
`StepCalls`, one call per replay (docs/record.md, "How such a step is counted").
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from graph_harness.capture.errors import HarnessError
from graph_harness.capture.export.nodes import NodeExport, joined_nodes
from graph_harness.capture.record import hooks, settings
from graph_harness.capture.record.graphs import GraphRecord

MAX_SETTLE = 8  # calls after the warm-ups, at most, for the step to replay without capturing


class RecordedStepError(HarnessError, RuntimeError):
    """A step whose own graphs could not be counted (none replayed, or never settled)."""


@dataclass(kw_only=True)
class RecordedStep:
    """The graphs one steady call of the step replays (`graphs`, in capture order), the
    others captured on the way (`others`), and the calls it took (`calls`)."""

    graphs: list[GraphRecord]
    others: list[GraphRecord] = field(default_factory=list)
    calls: int = 0
    replays: list[int] = field(default_factory=list)  # per graph, in the steady call


class _Collect:
    def __init__(self) -> None:
        self.records: list[GraphRecord] = []

    def captured(self, record: GraphRecord) -> None:
        self.records.append(record)


def record_step(
    call: Callable[[], object],
    *,
    warm_up: Callable[[], object] | None = None,
    start: Callable[[], object] | None = None,
    attribute: Callable[[list, Any], str | None] | None = None,
    known: list[GraphRecord] | None = None,
) -> RecordedStep:
    """Run `warm_up` (the step's warm-up calls), then call `call` from `start` (the step's
    reset and first feed, if it has them) until it settles (see the module's notes),
    recording the graphs captured all along (Inductor records a tree node in a warm-up
    call already). `attribute(nodes, module_scopes)`: moves compiled nodes into their
    modules under an open module_scopes (count.py's). `known`: graphs recorded before,
    which a call may replay without recording anything (the step's steady graphs then)."""
    sink = _Collect()
    sink.records.extend(known or [])  # told apart from new ones by position
    first = len(sink.records)
    saved = settings.configure(attribute=attribute or _none)
    hooks.listen(sink)
    try:
        if warm_up is not None:
            warm_up()
        for n in range(1, MAX_SETTLE + 1):
            before = {id(r): r.replays for r in sink.records}
            seen = len(sink.records)
            if start is not None:
                start()
            call()
            new = sink.records[seen:]
            replayed = [r for r in sink.records if r.replays > before.get(id(r), 0)]
            if not new and replayed:
                steady = sorted(replayed, key=lambda r: (r.pid, r.index))
                counts = [r.replays - before[id(r)] for r in steady]
                others = [r for r in sink.records if all(r is not s for s in steady)]
                return RecordedStep(graphs=steady, others=others, calls=n, replays=counts)
    finally:
        hooks.unlisten(sink)
        settings.restore(saved)
    if len(sink.records) == first:
        raise RecordedStepError(
            f"the step is compiled with mode='reduce-overhead', but Inductor captured no CUDA "
            f"graph in {MAX_SETTLE} calls after its warm-ups: it ran the step without graphs "
            "(Inductor logs why with TORCH_LOGS=perf_hints); count it compiled without "
            "reduce-overhead, and graph-harness captures it"
        )
    raise RecordedStepError(
        f"the step compiled with mode='reduce-overhead' was still capturing new graphs after "
        f"{MAX_SETTLE} calls ({len(sink.records) - first} captured): each call re-records (inputs "
        "that move, or a shape that changes every call), so no call is the step's steady state"
    )


def _none(nodes: list, modules: Any) -> None:
    return None


def combined_export(step: RecordedStep, *, workload: str, options: dict[str, Any]) -> NodeExport:
    """One export of the step: every graph's nodes in capture order, as many times as the
    steady call replayed it (the nodes one call launches, as a capture of the call would
    hold them), indices and edges renumbered, each node's `graph` its graph's place in
    `step.graphs`."""
    times = step.replays or [1] * len(step.graphs)  # none given: each graph once
    copies = [(g, rec) for g, rec in enumerate(step.graphs) for _ in range(times[g])]
    assert all(rec.export is not None for _, rec in copies)
    nodes = joined_nodes([(g, rec.export.nodes) for g, rec in copies])
    env = next((rec.export.env for _, rec in copies if rec.export.env), {})
    first = step.graphs[0].export
    return NodeExport(
        source="cuda-graph",
        workload=workload,
        variant=None,
        params=None,
        nodes=nodes,
        env=env,
        created=first.created,
        rank=first.rank,
        options={**options, "cudagraphs": "inductor", "graphs": len(step.graphs)},
    )


@dataclass(eq=False)
class StepCalls:
    """A step that captures its own graphs, replayed as a graph is: each `replay()` is one
    call of the step, which replays its graphs (`recorded.graphs`, each `recorded.replays`
    times) with what runs eagerly around them; `graph_launches` is how many graph launches
    a call makes (what a profile splits a call's work by: capture/profile/activities.py).
    Only a call that captures nothing is the step's steady state: run the calls inside
    `steady()`, which says so where one was not."""

    step: Callable[[], object]
    recorded: RecordedStep
    calls: int = 0

    @property
    def graph_launches(self) -> int:
        return sum(self.recorded.replays or [1] * len(self.recorded.graphs))

    def replay(self) -> None:
        self.calls += 1
        self.step()

    @contextlib.contextmanager
    def steady(self, where: str) -> Iterator[StepCalls]:
        """Calls of the step in this block (`where` names them in the error), checked at its
        end, together: that they recorded no graph, replayed each counted graph as many
        times as that many steady calls do, and replayed none of the graphs the step
        recorded on the way (`recorded.others`). RecordedStepError where not (an input
        moved, a shape changed, a recompile), since then what was measured mixed recording
        with replay. (Replay counts are summed over the block: a call that replayed a graph
        twice and one that skipped it would pass; no hook sees calls one by one.) What the
        block raises itself goes through unchanged, the listener removed."""
        sink = _Collect()
        before = [g.replays for g in self.recorded.graphs]
        others = [g.replays for g in self.recorded.others]
        calls = self.calls
        hooks.listen(sink)
        try:
            yield self
        finally:
            hooks.unlisten(sink)
        n = self.calls - calls
        times = self.recorded.replays or [1] * len(self.recorded.graphs)
        got = [g.replays - b for g, b in zip(self.recorded.graphs, before)]
        stray = sum(g.replays - b for g, b in zip(self.recorded.others, others))
        if sink.records or stray or got != [n * t for t in times]:
            what = [f"captured {len(sink.records)} new graphs"] if sink.records else []
            if got != [n * t for t in times]:
                what.append(
                    f"replayed its graphs {got} times where {n} steady calls replay them "
                    f"{[n * t for t in times]}"
                )
            if stray:
                what.append(f"replayed graphs it recorded on the way but not counted {stray} times")
            raise RecordedStepError(
                f"the step compiled with mode='reduce-overhead' left its steady state in "
                f"{where}: over {n} calls it {' and '.join(what)}, so "
                "what was measured mixes recording with replay (each call must see its inputs "
                "at the same addresses and shapes as the call counted)"
            )


def chained(export: NodeExport, step: RecordedStep) -> NodeExport:
    """`export` (combined_export's, of `step`) with the order a call launches its graphs
    in: one after another on one stream, so nothing of one starts before the one before it
    ends. Each first node of a graph copy lists the last nodes of the copy before in
    `launch_after`, which a profile matches a call's activities by (capture/profile/
    matching.py); its edges and count are unchanged. (A graph a call replays twice is
    laid out twice in a row, as combined_export lays it: a call that interleaves it with
    another graph matches out of order, which the profile reports.)"""
    nodes = [dict(n) for n in export.nodes]
    times = step.replays or [1] * len(step.graphs)
    sizes = [len(rec.export.nodes) for g, rec in enumerate(step.graphs) for _ in range(times[g])]
    if sum(sizes) != len(nodes):
        raise ValueError("chained: `export` is not combined_export's of `step`")
    sinks_before: list[int] = []
    base = 0
    for size in sizes:  # combined_export lays the copies out one after another
        copy = [n for n in nodes[base : base + size] if n["parent"] is None]
        base += size
        waited = {d for n in copy for d in n["deps"]}
        for n in copy:
            if not n["deps"] and sinks_before:
                n["launch_after"] = list(sinks_before)
        if copy:  # an empty graph orders nothing: the next waits for the one before it
            sinks_before = [n["index"] for n in copy if n["index"] not in waited]
    return replace(export, nodes=nodes)


SCOPE_KEYS = ("stage", "step", "scope", "scope_path", "fused_modules")


@dataclass(frozen=True)
class Outside:
    """A step's calls outside module_scopes (outside_scopes): the calls, the export of the
    graphs they replay, whether those are the counted graphs node for node (`same`: then
    the export carries the counted scopes), and that in words (`note`)."""

    calls: StepCalls
    export: NodeExport
    same: bool
    note: str


def outside_scopes(
    step: Callable[[], object],
    scoped: NodeExport,
    counted: RecordedStep,
    *,
    start: Callable[[], object] | None = None,
) -> Outside:
    """The step's steady calls as the program runs them, outside any module_scopes, for
    what replays it (a profile, a sweep's timing), after a count under module_scopes
    (`scoped`, combined_export's of `counted`).

    Dynamo guards code compiled under module_scopes on its module hooks, so outside them
    the step compiles again and Inductor records graphs of its own for it: those are what
    its calls replay. They are recorded here (record_step, from `start`; where the step
    runs the counted graphs after all, those), and where they are the counted graphs node
    for node (type, kernel, edges), each node takes its counted node's scopes; else they
    stay unscoped, and the note says why."""
    got = record_step(step, start=start, known=[*counted.graphs, *counted.others])
    if [id(g) for g in got.graphs] == [id(g) for g in counted.graphs]:
        note = "outside module_scopes the step ran the counted graphs (nothing compiled again)"
        return Outside(StepCalls(step, got), scoped, True, note)
    export = combined_export(got, workload=scoped.workload, options=dict(scoped.options))
    export.env = scoped.env

    def shape(e: NodeExport) -> list[tuple]:
        return [(n["type"], n["kernel"], tuple(n["deps"]), n["parent"]) for n in e.nodes]

    same = shape(export) == shape(scoped)
    if same:
        for n, s in zip(export.nodes, scoped.nodes):
            n.update({k: s[k] for k in SCOPE_KEYS if k in s})
            n["scope_path"] = list(s["scope_path"])
        note = (
            f"outside module_scopes the step compiled again and Inductor recorded "
            f"{len(got.graphs)} graphs for it, node for node the counted ones: replayed "
            "as the program runs it, with the counted nodes' modules"
        )
    else:
        export.options["module_depth"] = None
        note = (
            f"outside module_scopes the step compiled again and Inductor recorded "
            f"{len(got.graphs)} graphs for it ({export.total} nodes) that are not the counted "
            f"ones ({scoped.total} nodes) node for node: replayed and counted as the program "
            "runs them, their nodes unscoped"
        )
    return Outside(StepCalls(step, got), export, same, note)
