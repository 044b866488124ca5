"""A second capture under module_scopes compiles nothing and reuses what the first
recorded (capture/scopes/provenance_cache.py), keyed by the Dynamo cache entry that runs it; and
a compiled model's provenance gives it the same module names as its eager nodes.

Compiles are counted by Dynamo's own counter (unique graphs) and by Inductor's post-grad
pass (what collecting() records), never timed. CPU Inductor: the same provenance
machinery as on CUDA (a compiled step itself can only be captured on a GPU)."""

import shutil

import pytest
import torch
from torch._dynamo.utils import counters

from graph_harness.capture import module_scopes
from graph_harness.capture.attribution.compiled import compiled_attribution
from graph_harness.capture.attribution.rollup import scope_tree
from graph_harness.capture.scopes import provenance_cache as cache
from tests.capture.scopes.provenance_inputs import Net, node
from tests.nested_models import make_step

pytestmark = pytest.mark.skipif(
    not any(shutil.which(c) for c in ("g++", "c++", "clang++")),
    reason="Inductor on CPU needs a C++ compiler",
)


def graphs_compiled() -> int:
    return counters["stats"]["unique_graphs"]


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()  # a compile of ours, not a reuse of an earlier test's
    cache.forget()
    yield
    torch._dynamo.reset()
    cache.forget()


def test_a_second_module_scopes_compiles_nothing_and_reuses_the_first():
    model = Net().eval()
    compiled = torch.compile(model, fullgraph=True)
    x = torch.randn(4, 16)
    before = graphs_compiled()
    with torch.no_grad(), module_scopes(model) as first:
        want = compiled(x)
        compiled(x)  # warmed up: the first call compiled
    assert graphs_compiled() == before + 1 and len(first.provenance.graphs) == 1
    (graph,) = first.provenance.graphs
    assert first.provenance.not_kept == []
    for _ in range(2):  # a second and a third capture, as node_budget tests do
        with torch.no_grad(), module_scopes(model) as again:
            assert torch.equal(compiled(x), want)
            offered, reused, unkept = again.provenance.graphs_for(again.codes)
        assert graphs_compiled() == before + 1, "module_scopes compiled the step again"
        assert again.provenance.graphs == [] and offered == [graph]
        assert (reused, unkept) == (1, [])
    # what a capture says of it, on nodes named as the graph's kernels and calls
    nodes = [node(i, e.name) for i, e in enumerate(graph.entries)]
    how = compiled_attribution(nodes, again, again.codes, compiled=True)
    assert how.startswith("inductor provenance of 1 compiled graphs (0 compiled under this ")
    assert "1 kept from an earlier one" in how
    mm = [n for n, e in zip(nodes, graph.entries) if e.name.startswith("extern_kernels.")]
    assert [n["scope_path"] for n in mm] == [["fc1"], ["block", "block.fc2"]]
    # another model's code is never offered this graph
    with module_scopes(torch.nn.Sequential(torch.nn.Linear(16, 16))) as other:
        assert other.provenance.graphs_for(other.codes)[0] == []


def test_a_reset_retires_kept_provenance_and_a_recurring_compile_id_cannot_revive_it():
    model = Net().eval()
    compiled = torch.compile(model, fullgraph=True)
    x = torch.randn(4, 16)
    kept = []
    for _ in range(2):  # the same compile twice, a reset between: ids restart alike
        torch._dynamo.reset()
        with torch.no_grad(), module_scopes(model) as ms:
            compiled(x)
        kept += ms.provenance.graphs
    old, new = kept
    assert old.compile_id is not None and old.compile_id == new.compile_id  # one id, two graphs
    with module_scopes(model) as again:
        offered, reused, unkept = again.provenance.graphs_for(again.codes)
    assert offered == [new] and reused == 1 and unkept == []  # only the one that runs
    torch._dynamo.reset()  # Dynamo's cache entry goes
    with torch.no_grad():
        compiled(x)  # compiled again outside module_scopes: nothing recorded
    with module_scopes(model) as again:
        offered, reused, unkept = again.provenance.graphs_for(again.codes)
        assert offered == [] and reused == 0 and unkept == []
        how = compiled_attribution([node(0, "x")], again, again.codes, compiled=True)
    assert how.startswith("enclosing scope (no provenance: the step's compiled code was")
    assert "before any module_scopes" in how


def test_provenance_that_cannot_be_kept_is_said_so():
    model = Net().eval()
    code = type(model).forward.__code__
    # a compile whose Dynamo cache entry never appeared (a compile that failed, say)
    p = cache.pending(graph=object(), frame=code, compile_id="99/0")
    assert cache.bind(p) == "Dynamo kept no cache entry for it"
    with module_scopes(model) as ms:
        how = compiled_attribution([node(0, "x")], ms, ms.codes, compiled=True)
    assert "could not be kept for reuse: Dynamo kept no cache entry for it" in how


def labels(frame, depth):
    return set(scope_tree(frame, depth).scope)


@pytest.mark.parametrize("layout", ["hf", "gpt-fast"])
def test_compiled_provenance_names_the_modules_the_eager_paths_name(layout):
    # eager: the CPU dispatch count by module; compiled: Inductor's provenance of the same
    # model, one node per kernel and extern call, placed as a capture would place them
    eager_step = make_step(layout, 2)
    with module_scopes(eager_step.module):
        from graph_harness.capture import capture_and_count

        eager = capture_and_count(eager_step, device="cpu").frame()
    step = make_step(layout, 2, compiled=True)
    with module_scopes(step.module) as ms:
        step()
        (graph,) = ms.provenance.graphs
        nodes = [node(i, e.name) for i, e in enumerate(graph.entries)]
        compiled_attribution(nodes, ms, ms.codes, compiled=True)
    from graph_harness.capture.export.nodes import NodeExport

    compiled = NodeExport(
        source="cuda-graph", workload="compiled", variant=None, params=None, nodes=nodes
    ).frame()
    eager_own = scope_tree(eager).set_index("scope").own
    for depth in (1, 2, 3, 4, 5, None):
        extra = labels(compiled, depth) - labels(eager, depth)
        assert not extra, (depth, extra)  # compiled names no module eager does not
    # nodes that sit in a module where eager has none of its own are kernels fused across
    # its children, and say so
    tree = scope_tree(compiled).set_index("scope")
    for label, row in tree.iterrows():
        if row.own and eager_own.get(label, 0) == 0 and label != "(all)":
            assert row.fused == row.own, (label, row)
    # every layer is in both, and the container is a level of every compiled path under it
    container = "model.layers" if layout == "hf" else "layers"
    for i in range(2):
        assert f"{container}.{i}" in labels(compiled, None)
    for p in compiled.scope_path:
        if any(label.startswith(container + ".") for label in p):
            assert container in p, p
