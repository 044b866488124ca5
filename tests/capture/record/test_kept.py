"""Node records kept for good by a recording (capture/record/kept.py, records.py's
`frozen`): the same records as the list form, out of the garbage collector's lists, read
back and joined as lists, and no collection run where the program stopped collections."""

from __future__ import annotations

import gc
from unittest import mock

import pytest

from graph_harness.capture.attribution.node import plain
from graph_harness.capture.attribution.records import nodes_from_graph
from graph_harness.capture.export.nodes import NodeExport, joined_nodes
from graph_harness.capture.graph.reader import RawNode
from graph_harness.capture.record import kept
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


def settled() -> list:
    raw, marks = graph()
    nodes = nodes_from_graph(raw, marks, frozen=True)
    nodes[1]["fused_modules"] = ["layers.0.attn", "layers.0.mlp"]  # as attribution sets it
    return kept.settle(nodes)


def test_frozen_records_are_the_list_records():
    raw, marks = graph()
    listed = nodes_from_graph(raw, marks)
    frozen = nodes_from_graph(raw, marks, frozen=True)
    assert [plain(n) for n in frozen] == listed
    assert listed[2]["scope_path"] == ["layers", "stage0/attn"], "the scopes are not vacuous"
    assert listed[4]["programmatic_deps"] == [2] and listed[3]["parent"] == 2
    for n in frozen:
        assert not any(type(v) is list for v in n.values()), n


@pytest.mark.skipif(not kept.YOUNG_PASS, reason="a free-threaded build: no young pass is run")
def test_settled_records_leave_the_collectors_lists():
    raw, marks = graph()
    nodes = nodes_from_graph(raw, marks, frozen=True)
    nodes[1]["fused_modules"] = ["layers.0.attn", "layers.0.mlp"]
    want, same = [plain(n) for n in nodes], nodes
    assert gc.isenabled() and any(gc.is_tracked(n) for n in nodes), "vacuous: none tracked"
    kept.settle(nodes)
    assert nodes is same and [plain(n) for n in nodes] == want
    assert nodes[1]["fused_modules"] == ("layers.0.attn", "layers.0.mlp")
    for n in nodes:
        assert not any(gc.is_tracked(v) for v in n.values()), n
        assert gc.is_tracked(n) is not kept.DICTS_UNTRACKED, n  # Python 3.14 tracks dicts


@pytest.fixture
def passes():
    """The collector's passes while the test runs (gc.callbacks)."""
    seen: list[int] = []
    watch = lambda phase, info: seen.append(info["generation"]) if phase == "start" else None
    gc.callbacks.append(watch)
    yield seen
    gc.callbacks.remove(watch)


def test_a_program_that_turned_the_collector_off_gets_no_pass(passes):
    gc.disable()
    try:
        nodes = settled()
        assert passes == [] and not gc.isenabled()
    finally:
        gc.enable()
    assert nodes[1]["fused_modules"] == ("layers.0.attn", "layers.0.mlp"), "still final"


def test_a_program_that_patched_gc_collect_out_gets_no_pass(passes):
    # vLLM's and SGLang's capture: `with patch("gc.collect", lambda: None)`
    with mock.patch("gc.collect", lambda: None):
        nodes = settled()
    assert passes == []
    assert nodes[1]["fused_modules"] == ("layers.0.attn", "layers.0.mlp")
    assert kept.collecting(), "the real one is back: collections as usual"


def test_settled_records_read_back_and_join_as_lists():
    nodes = settled()
    e = NodeExport(source="cuda-graph", workload="w", variant=None, params=None, nodes=nodes)
    back = NodeExport.from_dict(e.to_dict())
    assert back.nodes == [plain(n) for n in nodes] and back.structure() == e.structure()
    assert back.frame()["scope_path"].map(tuple).tolist() == e.frame()["scope_path"].tolist()
    joined = joined_nodes([(0, nodes), (1, nodes)])
    assert joined[5 + 4]["deps"] == [6, 7] and joined[5 + 4]["programmatic_deps"] == [7]
    for n in joined:
        assert not any(type(v) is tuple for v in n.values()), n
