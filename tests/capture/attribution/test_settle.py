"""Node records made final for a recording that keeps them for good
(capture/attribution/node.py `settle`, records.py's `frozen`): the same records as the
list form, out of the garbage collector's lists, and no collection run where the program
turned the collector off."""

from __future__ import annotations

import gc

import pytest

from graph_harness.capture.attribution.node import plain, settle
from graph_harness.capture.attribution.records import nodes_from_graph
from graph_harness.capture.graph.reader import RawNode
from graph_harness.capture.scopes.names import ScopeKey
from graph_harness.capture.scopes.recorder import ScopeMark


def graph() -> tuple[list[RawNode], list[ScopeMark]]:
    """Five nodes under two nested scopes and none, a child graph's node, a PDL edge."""
    outer, inner = ScopeKey(None, "layers"), ScopeKey(0, "attn")
    raw = [
        RawNode(11, "kernel", "a", grid=(2, 1, 1), block=(64, 1, 1)),
        RawNode(12, "kernel", "b", grid=(1, 1, 1), block=(32, 1, 1), deps=[11]),
        RawNode(13, "graph", deps=[12, 11]),
        RawNode(14, "kernel", "c", parent=13, grid=(1, 1, 1), block=(1, 1, 1)),
        RawNode(15, "kernel", "d", deps=[13, 12], programmatic_deps=[13]),
    ]
    marks = [ScopeMark((outer,), [11]), ScopeMark((outer, inner), [13]), ScopeMark((), [15])]
    return raw, marks


def test_frozen_records_are_the_list_records():
    raw, marks = graph()
    listed = nodes_from_graph(raw, marks)
    frozen = nodes_from_graph(raw, marks, frozen=True)
    assert [plain(n) for n in frozen] == listed
    assert listed[2]["scope_path"] == ["layers", "stage0/attn"], "the scopes are not vacuous"
    assert listed[4]["programmatic_deps"] == [2] and listed[3]["parent"] == 2
    for n in frozen:
        assert not any(type(v) is list for v in n.values()), n


def test_settled_records_leave_the_collectors_lists():
    raw, marks = graph()
    nodes = nodes_from_graph(raw, marks, frozen=True)
    nodes[1]["fused_modules"] = ["layers.0.attn", "layers.0.mlp"]  # as attribution sets it
    want = [plain(n) for n in nodes]
    same = nodes
    assert gc.isenabled()
    assert any(gc.is_tracked(n) for n in nodes), "the test is vacuous: nothing was tracked"
    settle(nodes)
    assert nodes is same and [plain(n) for n in nodes] == want
    assert nodes[1]["fused_modules"] == ("layers.0.attn", "layers.0.mlp")
    for n in nodes:
        assert not gc.is_tracked(n), n
        assert not any(gc.is_tracked(v) for v in n.values()), n


@pytest.fixture
def collector_off():
    gc.disable()
    passes: list[int] = []
    watch = lambda phase, info: passes.append(info["generation"])
    gc.callbacks.append(watch)
    yield passes
    gc.callbacks.remove(watch)
    gc.enable()


def test_a_program_that_turned_the_collector_off_gets_no_pass(collector_off):
    raw, marks = graph()
    nodes = nodes_from_graph(raw, marks, frozen=True)
    nodes[0]["deps"] = [7]
    settle(nodes)
    assert collector_off == [] and not gc.isenabled()
    assert nodes[0]["deps"] == (7,), "still made final, where it stays tracked"
