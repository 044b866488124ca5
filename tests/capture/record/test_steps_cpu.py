"""A step that captures its own graphs (reduce-overhead), replayed by calling it, on the
CPU: its calls' work split by graph launch out of a Chrome trace, matched to its graphs'
nodes in launch order, and its calls checked to be steady. The GPU's side (Inductor's
graphs, CUPTI's trace) is test_record_gpu.py's; here the trace is written by hand as
Kineto writes it."""

from __future__ import annotations

import pytest

from graph_harness.capture.export.nodes import NodeExport
from graph_harness.capture.profile.activities import ProfileError, split_calls
from graph_harness.capture.profile.nodes import Window, profile_windows
from graph_harness.capture.record import hooks
from graph_harness.capture.record.graphs import GraphRecord
from graph_harness.capture.record.settings import settings
from graph_harness.capture.record.sites import CaptureSite
from graph_harness.capture.record.steps import (
    RecordedStep,
    RecordedStepError,
    StepCalls,
    chained,
    combined_export,
)


def node(i, kernel, deps=(), scope="layers.0"):
    return dict(
        index=i, type="kernel", kernel=kernel, grid=[1, 1, 1], block=[32, 1, 1], stage=None,
        step=scope, scope=scope, scope_path=[scope], deps=list(deps), parent=None,
    )  # fmt: skip


def record(index, nodes):
    export = NodeExport(source="cuda-graph", workload="w", variant=None, params=None, nodes=nodes)
    return GraphRecord(
        index=index,
        pid=1,
        rank=None,
        key=f"graph {index}",
        key_source="inductor",
        site=CaptureSite(user="step.py:1 in step", library=None, stack=("step.py:1",)),
        pool=(0, 1),
        export=export,
    )


# Two partitions of a step (a graph break between them): the first a fork of two kernels
# joined by a third; the second starts with a kernel named like one of the first's.
FIRST = [node(0, "embed"), node(1, "norm"), node(2, "attn", deps=[0, 1])]
SECOND = [node(0, "norm", scope="layers.1"), node(1, "mlp", deps=[0], scope="layers.1")]


def two_graphs(times=(1, 1)) -> RecordedStep:
    return RecordedStep(graphs=[record(0, FIRST), record(1, SECOND)], calls=2, replays=list(times))


class Trace:
    """A Chrome trace as Kineto writes one: runtime calls (`cuda_runtime`) and device
    activities, each carrying the correlation id of the call that launched it."""

    def __init__(self) -> None:
        self.events: list[dict] = []
        self.t = 0.0
        self.corr = 100

    def _launch(self, name: str) -> int:
        self.corr += 1
        self.events.append(
            {"ph": "X", "cat": "cuda_runtime", "name": name, "ts": self.t, "dur": 2,
             "args": {"correlation": self.corr}}
        )  # fmt: skip
        return self.corr

    def _kernel(self, name: str, corr: int, gap: float, dur: float) -> None:
        self.t += gap
        self.events.append(
            {"ph": "X", "cat": "kernel", "name": name, "ts": self.t, "dur": dur,
             "args": {"stream": 7, "correlation": corr}}
        )  # fmt: skip
        self.t += dur

    def eager(self, name: str) -> None:
        self._kernel(name, self._launch("cudaLaunchKernel"), gap=3.0, dur=1.0)

    def graph(self, names: list[str]) -> None:
        corr = self._launch("cudaGraphLaunch")
        for k in names:
            self._kernel(k, corr, gap=0.5, dur=2.0)

    def doc(self) -> dict:
        return {"traceEvents": list(self.events)}


def calls_trace(calls: int) -> Trace:
    """`calls` calls of the two-graph step: an input copied in eagerly, the first graph
    (its fork run the other way round: norm before embed), eager code between, the
    second graph."""
    tr = Trace()
    for _ in range(calls):
        tr.eager("copy_inputs")
        tr.graph(["norm", "embed", "attn"])
        tr.eager("between_partitions")
        tr.graph(["norm", "mlp"])
    return tr


def test_a_calls_work_is_split_by_its_graph_launches():
    got = split_calls(calls_trace(3).doc(), 3, 2)
    assert [[a.name for a in call] for call in got.replays] == [
        ["norm", "embed", "attn", "norm", "mlp"]
    ] * 3
    assert got.outside == [2, 2, 2]  # the input copy and the code between, each call
    with pytest.raises(ProfileError, match="6 graph launches .* 2 calls .* 2 graphs"):
        split_calls(calls_trace(3).doc(), 2, 2)
    no_runtime = {"traceEvents": [e for e in calls_trace(1).events if e["cat"] != "cuda_runtime"]}
    with pytest.raises(ProfileError, match="no runtime calls"):
        split_calls(no_runtime, 1, 2)


def test_work_after_a_calls_graphs_goes_to_the_next_call_and_the_last_calls_to_none():
    # one graph, then an eager kernel after it (a sample copied out), every call: each
    # sampled call gets one cycle's worth; the lead-in call none (nothing came before it)
    tr = Trace()
    for _ in range(4):
        tr.graph(["norm", "mlp"])
        tr.eager("sample")
    got = split_calls(tr.doc(), 4, 1)
    assert got.outside == [0, 1, 1, 1]
    # and with an input copied in before the graph as well: two per call, one for call 0
    tr = Trace()
    for _ in range(4):
        tr.eager("copy_inputs")
        tr.graph(["norm", "mlp"])
        tr.eager("sample")
    assert split_calls(tr.doc(), 4, 1).outside == [1, 2, 2, 2]


def test_chained_orders_the_graphs_without_touching_their_edges_or_count():
    step = two_graphs()
    export = combined_export(step, workload="w", options={})
    ch = chained(export, step)
    assert [n["deps"] for n in ch.nodes] == [n["deps"] for n in export.nodes]
    assert ch.total == export.total == len(FIRST) + len(SECOND)
    # the second graph's root waits for the first's last node (attn, index 2)
    assert [n.get("launch_after") for n in ch.nodes] == [None, None, None, [2], None]
    back = NodeExport.from_dict(ch.to_dict())
    assert [n.get("launch_after") for n in back.nodes] == [None, None, None, [2], None]
    # a graph replayed twice per call is laid out twice, each copy after the one before
    twice = two_graphs(times=(2, 1))
    ch2 = chained(combined_export(twice, workload="w", options={}), twice)
    # (both of the first graph's roots wait for the copy before)
    assert [n.get("launch_after") for n in ch2.nodes if "launch_after" in n] == [[2], [2], [5]]
    with pytest.raises(ValueError, match="not combined_export's"):
        chained(export, twice)
    # an empty graph between two (Inductor's tree keeps one for its pool) orders nothing:
    # the third waits for the first
    empty = RecordedStep(
        graphs=[record(0, FIRST), record(1, []), record(2, SECOND)], replays=[1, 1, 1]
    )
    ch3 = chained(combined_export(empty, workload="w", options={}), empty)
    assert [n.get("launch_after") for n in ch3.nodes] == [None, None, None, [2], None]


def test_a_calls_profile_matches_every_node_and_its_gaps_hold_the_eager_code():
    step = two_graphs()
    ch = chained(combined_export(step, workload="w", options={}), step)
    windows = []
    for w in range(2):
        got = split_calls(calls_trace(4).doc(), 4, 2)
        windows.append(Window(0, w, got.replays, None, got.outside))
    p = profile_windows("step", ch, windows)
    assert p.matching["verified"] and p.matching["out_of_order"] == 0
    assert p.matching["outside_graphs_per_call"] == [2]
    # every node once per sampled call; the second graph's "norm" is node 3, not node 1
    assert sorted(p.samples.node.value_counts().to_dict().items()) == [(i, 6) for i in range(5)]
    gaps = p.samples.groupby("node").gap_us.median()
    # node 3 waited for attn's end: the eager kernel's gap, its 1 us, its own gap of 0.5
    assert gaps[3] == pytest.approx(3.0 + 1.0 + 0.5)
    # the call's first node waited for the call before: the input copy is in its gap
    assert gaps[1] == pytest.approx(3.0 + 1.0 + 0.5)
    assert gaps[2] == pytest.approx(0.5) and gaps[4] == pytest.approx(0.5)


def test_without_the_launch_order_the_second_graphs_gaps_would_be_wrong():
    # the other route: the plain export matches too (names settle it), but the second
    # graph's root waits for nothing in it, so its gap runs from the call before's end
    step = two_graphs()
    plain = combined_export(step, workload="w", options={})
    ch = chained(plain, step)
    got = split_calls(calls_trace(3).doc(), 3, 2)
    gap = {
        name: profile_windows("step", e, [Window(0, 0, got.replays)])
        .samples.groupby("node")
        .gap_us.median()[3]
        for name, e in (("plain", plain), ("chained", ch))
    }
    assert gap["chained"] == pytest.approx(4.5)
    assert gap["plain"] > gap["chained"] + 6  # the first graph's three kernels counted in


class FakeGraph:
    def __init__(self, rec: GraphRecord) -> None:
        self.rec = rec

    def replay(self) -> None:  # what the hooks count on a recorded graph
        self.rec.replays += 1


def test_steady_calls_pass_and_a_call_that_records_or_skips_a_graph_does_not():
    step = two_graphs()
    a, b = (FakeGraph(g) for g in step.graphs)
    drop = {"skip": False, "record": False}

    def call():
        a.replay()
        if not drop["skip"]:
            b.replay()
        if drop["record"]:
            hooks._tell(record(9, SECOND))  # as the wrappers tell of a new capture

    calls = StepCalls(call, step)
    assert calls.graph_launches == 2
    with calls.steady("the timing"):
        for _ in range(5):
            calls.replay()
    assert [g.replays for g in step.graphs] == [5, 5]
    drop["skip"] = True
    skipped = pytest.raises(RecordedStepError, match=r"replayed its graphs \[3, 0\] times")
    with skipped, calls.steady("the profile"):
        for _ in range(3):
            calls.replay()
    drop.update(skip=False, record=True)
    recorded = pytest.raises(RecordedStepError, match="in the sweep: over 1 calls it captured 1")
    with recorded, calls.steady("the sweep"):
        calls.replay()
    # a graph the step recorded on the way and that was not counted, replayed: caught
    drop["record"] = False
    thrown = record(5, SECOND)
    step.others.append(thrown)
    extra = FakeGraph(thrown)
    stray = StepCalls(lambda: (call(), extra.replay()), step)
    with (
        pytest.raises(RecordedStepError, match="on the way but not counted 2 times"),
        stray.steady("the timing"),
    ):
        stray.replay()
        stray.replay()
    # what the calls raise themselves goes through as it is, the listener removed

    def fails():
        raise KeyError("the step's own")

    with pytest.raises(KeyError, match="the step's own"), StepCalls(fails, step).steady("x") as c:
        c.replay()
    # the check's listener is gone, whatever the calls did
    assert not any(type(x).__name__ == "_Collect" for x in settings.listeners)
