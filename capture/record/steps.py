"""A step that captures its own graphs (`torch.compile(mode="reduce-overhead")`: Inductor's
cudagraph trees) counted by recording them, since no graph can be captured around it.

The step is called as any step is before capture (`warmup` calls, each from its reset),
then again, from its start, until a call captures no new graph and replays at least one:
then the step runs as it will from there on, and its graphs are those that call replayed
(a tree node per partition or per piece; eager code between them launches no graph node
and is not counted). The step's count is their sum, a graph the call replayed twice
counted twice, each node carrying its graph
(`graph`: the place of its graph in `RecordedStep.graphs`). Graphs captured on the way
and not replayed by that call (a recording Inductor threw away, another shape's) are
kept apart (`others`). A step still capturing after MAX_SETTLE calls, or one that replays
nothing (Inductor ran it without graphs), is an error that says so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from graph_harness.capture.errors import HarnessError
from graph_harness.capture.export.nodes import NodeExport
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
) -> RecordedStep:
    """Run `warm_up` (the step's warm-up calls), then call `call` from `start` (the step's
    reset and first feed, if it has them) until it settles (see the module's notes),
    recording the graphs captured all along (Inductor records a tree node in a warm-up
    call already). `attribute(nodes, module_scopes)`: moves compiled nodes into their
    modules under an open module_scopes (count.py's)."""
    sink = _Collect()
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
    if not sink.records:
        raise RecordedStepError(
            f"the step is compiled with mode='reduce-overhead', but Inductor captured no CUDA "
            f"graph in {MAX_SETTLE} calls after its warm-ups: it ran the step without graphs "
            "(Inductor logs why with TORCH_LOGS=perf_hints); count it compiled without "
            "reduce-overhead, and graph-harness captures it"
        )
    raise RecordedStepError(
        f"the step compiled with mode='reduce-overhead' was still capturing new graphs after "
        f"{MAX_SETTLE} calls ({len(sink.records)} captured): each call re-records (inputs "
        "that move, or a shape that changes every call), so no call is the step's steady state"
    )


def _none(nodes: list, modules: Any) -> None:
    return None


def combined_export(step: RecordedStep, *, workload: str, options: dict[str, Any]) -> NodeExport:
    """One export of the step: every graph's nodes in capture order, as many times as the
    steady call replayed it (the nodes one call launches, as a capture of the call would
    hold them), indices and edges renumbered, each node's `graph` its graph's place in
    `step.graphs`."""
    nodes: list[dict] = []
    env: dict = {}
    times = step.replays or [1] * len(step.graphs)  # none given: each graph once
    copies = [(g, rec) for g, rec in enumerate(step.graphs) for _ in range(times[g])]
    for g, rec in copies:
        assert rec.export is not None
        base = len(nodes)
        env = env or rec.export.env
        for n in rec.export.nodes:
            m = dict(n)
            m["index"] = n["index"] + base
            m["deps"] = [d + base for d in n["deps"]]
            m["parent"] = None if n["parent"] is None else n["parent"] + base
            if "programmatic_deps" in n:
                m["programmatic_deps"] = [d + base for d in n["programmatic_deps"]]
            m["scope_path"] = list(n["scope_path"])
            m["graph"] = g
            nodes.append(m)
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
