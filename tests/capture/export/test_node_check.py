"""A node read on the plain test (capture/export/node_check.py's `_plain`, taken for every
node graph-harness writes) is the node the field-by-field check makes: the same dict,
keys in the same order, lists fresh; a node the plain test refuses gets the field-by-field
check's answer, its message included. Nodes mutated field by field into odd values."""

import copy

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graph_harness.capture.export.documents import ExportError, Fields
from graph_harness.capture.export.node_check import _checked, _plain, check_node
from tests.capture.export.valid_documents import export_doc_v3

# values a node's field may hold in a document someone else wrote (a bool is no int)
ODD = [None, True, False, 0, 1, 2, 3, -1, 2**32, 2**32 - 1, 0.0, 1.5, "", "x", "unscoped"]
ODD += [[], [0], [1], [2], [3], [0, 1], [1, 1, 1], [1, 1, 1, 1], [True], ["x"], [None], {}]
KEYS = ["index", "type", "kernel", "grid", "block", "stage", "step", "scope", "scope_path"]
KEYS += ["deps", "parent", "programmatic_deps", "fused_modules", "graph", "launch_after"]


def _nodes():
    doc = export_doc_v3()
    nodes = doc["nodes"]
    nodes[2]["fused_modules"] = ["layers.0", "layers.1"]
    nodes[2]["graph"] = 1
    nodes[3]["launch_after"] = [2]
    nodes[3]["parent"] = 1
    nodes[0]["scope"], nodes[0]["scope_path"] = "unscoped", []
    return nodes


def _answer(fn, i, n, count):
    try:
        return fn(Fields("doc"), i, copy.deepcopy(n), count, 3)
    except ExportError as e:
        return str(e)


def test_every_field_kind_takes_the_plain_test():
    # not vacuous: each node, every optional key among them, passes the plain test
    nodes = _nodes()
    for i, n in enumerate(nodes):
        got = _plain(n, i, len(nodes))
        assert got is not None, n
        assert got == _checked(Fields("doc"), i, n, len(nodes), 3)
        assert list(got) == list(_checked(Fields("doc"), i, n, len(nodes), 3))
        assert all(got[k] is not n[k] for k in got if isinstance(n[k], list)), "lists shared"


def test_every_field_changed_alone_is_answered_as_field_by_field():
    # every node, every key, every odd value (and the key taken away): all of them
    nodes, seen = _nodes(), {"plain": 0, "refused": 0}
    for i, node in enumerate(nodes):
        for key in [*KEYS, "extra"]:
            for value in [*ODD, KeyError]:
                n = copy.deepcopy(node)
                if value is KeyError:
                    n.pop(key, None)
                else:
                    n[key] = copy.deepcopy(value)
                fast, slow = _answer(check_node, i, n, 4), _answer(_checked, i, n, 4)
                assert fast == slow, (i, key, value)
                assert not isinstance(slow, dict) or list(fast) == list(slow)
                seen["plain" if isinstance(slow, dict) else "refused"] += 1
    assert min(seen.values()) > 100, seen  # both answers, many times


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_check_node_answers_as_the_field_by_field_check(data):
    nodes = _nodes()
    i = data.draw(st.integers(0, len(nodes) - 1))
    n = copy.deepcopy(nodes[i])
    for _ in range(data.draw(st.integers(1, 3))):
        key = data.draw(st.sampled_from([*KEYS, "extra"]))
        if data.draw(st.booleans()) and key in n:
            del n[key]
        else:
            n[key] = copy.deepcopy(data.draw(st.sampled_from(ODD)))
    fast, slow = _answer(check_node, i, n, len(nodes)), _answer(_checked, i, n, len(nodes))
    assert fast == slow
    if isinstance(slow, dict):
        assert list(fast) == list(slow)


@pytest.mark.parametrize("version", [1, 2])
def test_an_older_node_is_checked_field_by_field(version):
    # a version-1 node's scope columns are made from its stage and step: never plain
    n = {k: v for k, v in _nodes()[1].items() if version > 1 or k not in ("scope", "scope_path")}
    assert check_node(Fields("doc"), 1, n, 4, version) == _checked(Fields("doc"), 1, n, 4, version)
