"""One meaning of depth on the layouts users bring (HF's `model.layers.N`, gpt-fast's
`layers.N`): containers are a level of every eager path, the default shows one row per
layer, every level sums to its parent, and exports say how they were scoped."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from graph_harness.capture import capture_and_count, module_scopes
from graph_harness.capture.attribution.rollup import per_scope, scope_tree, tree_parts
from graph_harness.capture.export.delta import node_delta
from graph_harness.capture.graph.dispatch import DispatchCounter
from graph_harness.capture.scopes.modules import block_depth, repeated_blocks
from graph_harness.reports.cli.args import BLOCKS, shown_depth
from tests.nested_models import make_step

REPO = Path(__file__).resolve().parents[3]
LAYOUTS = {  # layout: (the blocks' container, the path of layer i)
    "hf": ("model.layers", "model.layers.{}"),
    "gpt-fast": ("layers", "layers.{}"),
}
N_LAYER = 3


def launching_ops(fn) -> int:
    """Another route to a count: ops dispatched by `fn` less views and allocations, by
    their types as DispatchCounter records them (no scopes, no export)."""
    with DispatchCounter() as c:
        fn()
    return sum(1 for r in c.records if r.type not in ("view", "alloc"))


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_the_default_depth_is_one_row_per_layer_and_every_level_sums(layout):
    container, layer = LAYOUTS[layout]
    step = make_step(layout, N_LAYER)
    model = step.module
    assert repeated_blocks(model) == container
    with module_scopes(model) as ms:
        e = capture_and_count(step, device="cpu")
    assert ms.blocks == container and e.options["blocks"] == container
    depth = block_depth(container)
    assert e.options["block_depth"] == depth == container.count(".") + 2
    assert e.options["module_depth"] == "every level"
    # the default the tables take (--module-scopes without DEPTH): a row per layer
    assert shown_depth(BLOCKS, [e]) == depth and shown_depth(None, [e]) is None
    tree = scope_tree(e.frame(), depth)
    rows = sorted(tree[tree.depth == depth].scope)
    want = sorted([layer.format(i) for i in range(N_LAYER)] + _leaves_at(model, depth))
    assert rows == want
    # each layer's count, by another route: one layer run alone under the counter
    x = torch.randn(1, 4, 32)
    alone = launching_ops(torch.no_grad()(lambda: model.get_submodule(layer.format(1))(x)))
    by = dict(zip(tree.scope, tree.nodes))
    assert [by[layer.format(i)] for i in range(N_LAYER)] == [alone] * N_LAYER
    assert by[container] == N_LAYER * alone
    # every level of the whole tree sums to its parent, and the root to a plain count
    full = scope_tree(e.frame())
    assert full.nodes[0] == e.total == launching_ops(step)
    parts = {r.scope: tuple(r.scope.split(".")) for r in full.itertuples() if r.depth}
    for r in full.itertuples():
        mine = () if r.depth == 0 else parts[r.scope]
        kids = [
            k.nodes
            for k in full.itertuples()
            if k.depth == r.depth + 1 and parts[k.scope][: r.depth] == mine
        ]
        assert r.nodes == r.own + sum(kids), r
    for d in range(1, 7):
        assert per_scope(e.frame(), d).sum() == e.total


def _leaves_at(model, depth: int) -> list[str]:
    """Modules at `depth` that are not under the blocks' container (norms, embeddings)."""
    out = []
    for name, _ in model.named_modules():
        if name and name.count(".") + 1 == depth and ".layers." not in f".{name}.":
            out.append(name)
    return out


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_eager_paths_carry_the_container(layout):
    container, layer = LAYOUTS[layout]
    step = make_step(layout, N_LAYER)
    with module_scopes(step.module):
        df = capture_and_count(step, device="cpu").frame()
    prefix = container.split(".")
    chain = [".".join(prefix[: i + 1]) for i in range(len(prefix))]  # model, model.layers
    for i in range(N_LAYER):
        mine = df[df.scope.str.startswith(layer.format(i))]
        assert len(mine) > 0
        for p in mine.scope_path:
            # every enclosing module, the ModuleList included, is a label of the path
            assert p[: len(chain) + 1] == [*chain, layer.format(i)], p
            assert tree_parts(p) == tuple(p[-1].split(".")), p


def test_a_depth_cut_keeps_the_layers_in_their_container():
    # HF's depth 2 ends at `model.layers`, a ModuleList that never runs: the layers'
    # nodes belong there, not to `model`'s own count (what the old meaning gave)
    step = make_step("hf", N_LAYER)
    with module_scopes(step.module, depth=2):
        e = capture_and_count(step, device="cpu")
    assert e.options["module_depth"] == 2
    by = scope_tree(e.frame()).set_index("scope")
    assert (
        by.loc["model", "own"] == 0
        and by.loc["model.layers", "own"] == by.loc["model.layers", "nodes"]
    )
    assert by.loc["model.layers", "nodes"] > 0.8 * e.total
    assert max(len(p) for p in e.frame().scope_path) == 2


def test_delta_warns_when_two_exports_were_scoped_differently():
    step = make_step("gpt-fast", N_LAYER)
    with module_scopes(step.module, depth=2):
        a = capture_and_count(step, device="cpu")
    with module_scopes(step.module):
        b = capture_and_count(step, device="cpu")
    d = node_delta(a, b)
    assert d.total_delta == 0 and d.scoped_differently is not None
    assert "to depth 2" in d.scoped_differently and "to every level" in d.scoped_differently
    assert node_delta(b, b).scoped_differently is None
    assert d.to_dict()["scoped_differently"] == d.scoped_differently
    # an older export says nothing of its scoping: nothing to compare, no warning
    old = type(a).from_dict({**a.to_dict(), "schema_version": 2, "options": {}})
    assert node_delta(old, b).scoped_differently is None
    # (the CLI prints it as one line on stderr: tests/reports/cli/test_cli.py)


def test_the_cli_default_shows_a_row_per_hf_layer(tmp_path):
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "graph_harness",
            "count",
            "--target",
            "tests.targets:hf_style",
            "--module-scopes",
            "--out",
            str(tmp_path / "o"),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    rows = [ln.split("│")[1].strip() for ln in r.stdout.splitlines() if ln.startswith("│")]
    assert [x for x in rows if x.startswith("model.layers.")] == [
        f"model.layers.{i}" for i in range(N_LAYER)
    ]
    assert "model.layers.0.self_attn" not in r.stdout
    doc = json.loads((tmp_path / "o" / "nodes-target.json").read_text())
    assert doc["workload"] == "tests.targets:hf_style" and doc["options"]["block_depth"] == 3
    deeper = sum(
        1 for n in doc["nodes"] if n["type"] not in ("view", "alloc") and len(n["scope_path"]) > 3
    )
    assert deeper > 0 and (
        f"{deeper} of {doc['total_nodes']} nodes sit deeper than depth 3" in r.stdout
    )


# --- on the GPU: the example decoder, eager against compiled ------------------------------


def tree_labels(frame, depth) -> set[str]:
    return set(scope_tree(frame, depth).scope)


@pytest.mark.gpu
def test_example_eager_and_compiled_share_their_module_names_at_every_depth():
    """What is allowed to differ: compiled may lack a module whose every kernel Inductor
    fused into a kernel that sits in an ancestor (a norm fused with the residual add before
    it, say), and may hold own nodes in a module where eager has none (the `layers`
    container, the root) only where every such node is a kernel fused across its
    children, marked by `fused_modules`. It may name no module eager does not."""
    from tests.llama_example import load_example

    ex = load_example()
    exports = {}
    for compiled in (False, True):
        step = ex.make_step(compiled=compiled)
        with module_scopes(step.module):
            exports[compiled] = capture_and_count(step)
    eager, comp = exports[False].frame(), exports[True].frame()
    assert exports[True].options["compiled_attribution"].startswith("inductor provenance")
    for e in exports.values():
        assert (e.options["blocks"], e.options["block_depth"]) == ("layers", 2)
    for depth in (1, 2, 3, 4, None):
        extra = tree_labels(comp, depth) - tree_labels(eager, depth)
        assert not extra, (depth, sorted(extra))
    eager_own = scope_tree(eager).set_index("scope").own
    for label, row in scope_tree(comp).set_index("scope").iterrows():
        if label != "(all)" and row.own and eager_own.get(label, 0) == 0:
            assert row.fused == row.own, (label, row.own, row.fused)
    n_layer = ex.PRESETS["small"].n_layer
    layers = {f"layers.{i}" for i in range(n_layer)}
    assert layers <= tree_labels(comp, 2) and layers <= tree_labels(eager, 2)
    # the container is a level of every path under it, compiled and eager alike
    for frame in (eager, comp):
        for p in frame.scope_path:
            if any(label.startswith("layers.") for label in p):
                assert p[0] == "layers", p
    # their delta lines up per module: its rows are eager's tree, every depth, and sum
    d = node_delta(exports[False], exports[True])
    assert d.scoped_differently is None
    assert set(d.by_scope.scope) == tree_labels(eager, None)
    root = d.by_scope[d.by_scope.depth == 0]
    assert root.delta.tolist() == [d.total_delta] and d.total_delta < 0


@pytest.mark.gpu
def test_a_second_compiled_capture_under_module_scopes_compiles_nothing():
    from torch._dynamo.utils import counters

    from tests.llama_example import load_example

    torch._dynamo.reset()  # a compile of its own, not a reuse of an earlier test's
    step = load_example().make_step(compiled=True)
    before = counters["stats"]["unique_graphs"]
    with module_scopes(step.module) as first_ms:
        first = capture_and_count(step)
    compiled = counters["stats"]["unique_graphs"] - before
    assert compiled >= 1 and len(first_ms.provenance.graphs) == compiled
    for _ in range(2):  # a second and a third capture, each its own module_scopes
        with module_scopes(step.module) as ms:
            again = capture_and_count(step)
        assert counters["stats"]["unique_graphs"] - before == compiled, "compiled again"
        assert ms.provenance.graphs == []  # Inductor's post-grad pass never ran
        how = again.options["compiled_attribution"]
        assert f"0 compiled under this module_scopes, {compiled} kept" in how, how
        # the same nodes in the same modules as the first capture placed them

        def placed(e):
            return sorted(
                (
                    n["type"],
                    n["kernel"] or "",
                    tuple(n["scope_path"]),
                    tuple(n.get("fused_modules", ())),
                )
                for n in e.nodes
            )

        assert placed(again) == placed(first)


@pytest.mark.parametrize("depth", [None, 2])
def test_module_argument_scopes_as_module_scopes_around_the_call(depth):
    """capture_and_count(step, module=m, depth=d), the one place that opens module scopes
    for a capture (count --target, node_budget, check_step), records what
    `with module_scopes(m, depth=d): capture_and_count(step)` records, and leaves no
    module scopes open behind it."""
    from graph_harness.capture.scopes.modules import active_module_scopes

    step = make_step("hf", N_LAYER)
    given = capture_and_count(step, module=step.module, depth=depth, warmup=1)
    assert active_module_scopes() is None
    with module_scopes(step.module, depth=depth):
        around = capture_and_count(step, warmup=1)
    strip = lambda e: [(n["type"], n["kernel"], n["scope_path"]) for n in e.nodes]
    assert strip(given) == strip(around) and given.options == around.options
    assert any(len(n["scope_path"]) > 1 for n in given.nodes)  # scoped by module, not bare
    assert given.options["module_depth"] == (depth if depth is not None else "every level")
