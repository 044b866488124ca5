"""Nested scopes and module scopes: attribution that nests and sums, no hooks left,
nothing traced by torch.compile."""

import functools
import itertools
import shutil

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn
from torch.nn.modules import module as nn_module

from graph_harness.capture import CompiledStepError, capture_and_count, module_scopes, scope
from graph_harness.capture.attribution.records import first_seen
from graph_harness.capture.attribution.rollup import per_scope, scope_tree, tree_parts
from graph_harness.capture.graph.compiled import (
    find_compiled,
    is_dispatch_mode_refusal,
    refuse_uncountable,
)
from graph_harness.capture.scopes.recorder import Recorder, ScopeKey, ScopeMark, recording


class Block(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.attention = nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, dim), nn.ReLU())

    def forward(self, x):
        x = x + self.attention(x)
        return x + self.mlp(x)


class Tiny(nn.Module):
    def __init__(self, dim: int = 8, layers: int = 3) -> None:
        super().__init__()
        self.layers = nn.ModuleList(Block(dim) for _ in range(layers))
        self.norm = nn.LayerNorm(dim)

    def forward(self, x):
        x = x * 2.0  # the root's own op: outside every module scope
        for layer in self.layers:
            x = layer(x)
        return self.norm(x)


def tiny_step():
    model = Tiny().eval()
    x = torch.randn(2, 8)

    @torch.no_grad()
    def step():
        return model(x)

    return model, step


def global_hook_counts():
    return (
        len(nn_module._global_forward_pre_hooks),
        len(nn_module._global_forward_hooks),
    )


def test_module_scopes_nest_and_sum_to_the_unscoped_total():
    model, step = tiny_step()
    plain = capture_and_count(step, device="cpu")
    hooks_before = global_hook_counts()
    with module_scopes(model):
        scoped = capture_and_count(step, device="cpu")
    assert global_hook_counts() == hooks_before, "module_scopes left a global hook behind"
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules()), (
        "the model carries a hook"
    )
    # the same work, however attributed: kernel by kernel, in order
    assert scoped.frame()["kernel"].tolist() == plain.frame()["kernel"].tolist()
    df = scoped.frame()
    paths = df["scope_path"].map(tuple)
    assert df["scope"].tolist() == [p[-1] if p else "unscoped" for p in paths]
    # the ModuleList is iterated, never called, and still a level: `layers` opens around
    # each layer (as Inductor's module stack has it), its children nest inside
    for p in set(paths):
        for outer, inner in itertools.pairwise(p):
            assert inner.startswith(outer + "."), p
    counts = paths.value_counts()
    for i in range(3):
        layer = f"layers.{i}"
        assert counts[("layers", layer)] == 2  # the block's own two residual adds
        assert counts[("layers", layer, f"{layer}.attention")] == 1  # addmm (t() is a view)
        assert counts[("layers", layer, f"{layer}.mlp", f"{layer}.mlp.0")] == 1
        assert counts[("layers", layer, f"{layer}.mlp", f"{layer}.mlp.1")] == 1
        assert ("layers", layer, f"{layer}.mlp") not in counts  # Sequential runs nothing itself
    assert ("layers",) not in counts  # the container itself runs nothing
    assert counts[()] == 1 and df[paths == ()].kernel.tolist() == ["aten.mul.Tensor"]
    # rolled up by prefix, every depth sums to the total; layers is a level of its own
    tree = scope_tree(df)
    for d in range(1, 5):
        assert per_scope(df, d).sum() == plain.total
    by = dict(zip(tree.scope, tree.nodes))
    assert by["layers"] == 3 * 5 and by["layers.1"] == 5 and by["layers.1.mlp"] == 2
    assert by["(all)"] == plain.total  # the root of the tree holds everything
    assert tree[tree.depth == 2].nodes.sum() + by["norm"] == plain.total - 1
    assert counts.sum() == plain.total == scoped.total


def test_depth_limits_the_scopes():
    model, step = tiny_step()
    with module_scopes(model, depth=2):
        df = capture_and_count(step, device="cpu").frame()
    assert max(len(p) for p in df["scope_path"]) == 2  # layers > layers.i, no children
    assert set(df["scope"]) == {"unscoped", "layers.0", "layers.1", "layers.2", "norm"}
    with module_scopes(model, depth=1):
        assert set(capture_and_count(step, device="cpu").frame()["scope"]) == {
            "unscoped",
            "layers",
            "norm",
        }  # layers is a ModuleList, never called, and still a level: the blocks are in it
    with pytest.raises(ValueError, match="depth must be an int >= 1"):
        module_scopes(model, depth=0)
    with pytest.raises(TypeError, match="needs the model"):
        module_scopes(step)


def test_user_scopes_nest_inside_module_scopes():
    model, _ = tiny_step()
    x = torch.randn(2, 8)

    @torch.no_grad()
    def step():
        with scope("decode"):
            y = model(x)
            with scope("sample"):
                y.argmax(-1)

    with module_scopes(model, depth=1):
        df = capture_and_count(step, device="cpu").frame()
    paths = set(df["scope_path"].map(tuple))
    assert paths == {("decode",), ("decode", "layers"), ("decode", "norm"), ("decode", "sample")}
    with module_scopes(model, depth=2):
        df = capture_and_count(step, device="cpu").frame()
    assert ("decode", "layers", "layers.1") in set(df["scope_path"].map(tuple))
    assert tree_parts(("decode", "layers.1")) == ("decode", "layers", "1")
    assert tree_parts(("layers.1", "layers.1.mlp", "sample")) == ("layers", "1", "mlp", "sample")
    assert tree_parts(("stage0/pack",)) == ("stage0/pack",)
    assert tree_parts(("layers.1", "layers.1", "layers.1.mlp")) == ("layers", "1", "mlp")


def test_a_failure_names_the_innermost_scope():
    rec = Recorder()
    with recording(rec), pytest.raises(ValueError), scope("outer"), scope("inner", stage=2):
        raise ValueError("boom")
    assert rec.failed_in == ScopeKey(2, "inner") and rec.stack == []


def test_first_seen_is_ancestors_of_end_minus_ancestors_of_begin():
    # a chain 1 -> 2 -> ... -> 6; boundaries after 1 (open a), after 3 (open b), after 4
    # (close b), after 5 (close a): a holds 2..5, b holds 4, 6 is after the last boundary.
    parents = {h: [h - 1] if h > 1 else [] for h in range(1, 7)}
    a, b = ScopeKey(None, "a"), ScopeKey(None, "a.b")
    marks = [
        ScopeMark((), [1]),
        ScopeMark((a,), [3]),
        ScopeMark((a, b), [4]),
        ScopeMark((a,), [5]),
    ]
    when = first_seen(marks, parents)
    assert {h: marks[i].stack for h, i in when.items()} == {
        1: (),
        2: (a,),
        3: (a,),
        4: (a, b),
        5: (a,),
    }


def naive_innermost(raw, scopes) -> dict[int, tuple]:
    """The definition, by brute force: a scope's nodes are the ancestors of its end
    frontier minus those of its begin frontier; a node's scope is the deepest holding it."""

    def anc(frontier):
        seen, stack = set(), list(frontier)
        while stack:
            h = stack.pop()
            if h not in seen:
                seen.add(h)
                stack.extend(raw[h - 1].deps)
        return seen

    best: dict[int, tuple] = {}
    for path, begin, end in scopes:
        for h in anc(end) - anc(begin):
            if len(path) > len(best.get(h, ())):
                best[h] = path
    return best


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["op", "op", "op", "open", "close"]), max_size=60), st.data())
def test_attribution_equals_the_set_difference_definition(events, data):
    # One capture stream: each op is a node depending on the one before and, now and
    # then, on an earlier one too (a DAG, as a join of a side stream makes); scopes open
    # and close at random, nested. The linear walk must agree with the definition.
    from graph_harness.capture.attribution.records import nodes_from_graph
    from graph_harness.capture.graph.reader import RawNode

    raw, rec_marks, open_, scopes, n_scopes = [], [], [], [], 0
    frontier = lambda: [len(raw)] if raw else []  # the stream's last node
    for ev in [*events, *["close"] * 60]:
        if ev == "op":
            deps = [len(raw)] if raw else []
            if len(raw) > 2 and data.draw(st.booleans()):
                deps.append(data.draw(st.integers(1, len(raw) - 1)))
            raw.append(RawNode(len(raw) + 1, "kernel", "k", deps=sorted(set(deps))))
        elif ev == "open":
            n_scopes += 1
            key = ScopeKey(None, f"s{n_scopes}")
            rec_marks.append(ScopeMark(tuple(k for k, _ in open_), frontier()))
            open_.append((key, frontier()))
        elif open_:
            rec_marks.append(ScopeMark(tuple(k for k, _ in open_), frontier()))
            key, begin = open_.pop()
            scopes.append(((*[k.label for k, _ in open_], key.label), begin, frontier()))
    nodes = nodes_from_graph(raw, rec_marks)
    want = naive_innermost(raw, scopes)
    for n in nodes:
        assert tuple(n["scope_path"]) == want.get(n["index"] + 1, ()), n


# --- torch.compile ---------------------------------------------------------------


HAS_CXX = any(shutil.which(c) for c in ("g++", "c++", "clang++"))
BACKENDS = [
    pytest.param("eager", id="dynamo-only"),
    pytest.param(
        "inductor", marks=pytest.mark.skipif(not HAS_CXX, reason="Inductor on CPU needs a C++")
    ),
]


@pytest.mark.parametrize("backend", BACKENDS)
def test_scope_inside_fullgraph_compile_compiles_and_runs(backend):
    def f(x):
        with scope("double"):
            x = x * 2
        with scope("shift", stage=1):
            return x + 1

    compiled = torch.compile(f, fullgraph=True, backend=backend)
    x = torch.ones(4)
    with recording(Recorder()) as rec:
        out = compiled(x)
    assert torch.equal(out, torch.full((4,), 3.0))
    assert rec.marks == [], "a scope was traced into the compiled region"


@pytest.mark.parametrize("backend", BACKENDS)
def test_module_scopes_around_a_fullgraph_compile(backend):
    model, _ = tiny_step()
    compiled = torch.compile(model, fullgraph=True, backend=backend)
    x = torch.randn(2, 8)
    with torch.no_grad(), module_scopes(model), recording(Recorder()) as rec:
        out = compiled(x)
    # Inductor may fuse and reorder float arithmetic: close, not equal, for it
    tol = {} if backend == "inductor" else {"rtol": 0, "atol": 0}
    torch.testing.assert_close(out, model(x), **tol)
    assert rec.marks == [], "module scopes were traced into the compiled region"


def test_a_compiled_step_is_refused_on_the_cpu_with_one_line():
    model, _ = tiny_step()
    compiled = torch.compile(model)
    x = torch.randn(2, 8)

    def step():
        return compiled(x)

    with pytest.raises(CompiledStepError) as info:
        capture_and_count(step, device="cpu", warmup=0)
    msg = str(info.value)
    assert "torch.compile" in msg and "count it on a GPU" in msg and "\n" not in msg
    assert "the step's `compiled` (through its closure)" in msg  # how the step reaches it
    assert info.value.exit_code == 2  # a usage error: count it on a GPU
    # compiled functions, in place (Module.compile), and through a global are found too
    fn = torch.compile(lambda t: t * 2)
    assert find_compiled(lambda: fn(x))
    in_place = Tiny()
    in_place.compile()
    assert find_compiled(lambda: in_place(x))[0].where.endswith("(Module.compile)")
    assert find_compiled(_calls_global_compiled)
    assert not find_compiled(tiny_step()[1]), "an eager step is not compiled"


_GLOBAL_COMPILED = torch.compile(lambda t: t + 1)


def _calls_global_compiled():
    return _GLOBAL_COMPILED(torch.ones(2))


def test_dispatch_mode_refusal_is_recognised_whatever_wraps_it():
    # torch.compile's own refusal, as torch 2.11 raises it, becomes the one line
    inner = RuntimeError(
        "Unsupported: non-infra torch dispatch mode present, this is not supported today "
        "in torch.compile"
    )
    outer = RuntimeError("wrapped")
    outer.__cause__ = inner
    assert is_dispatch_mode_refusal(outer) and not is_dispatch_mode_refusal(ValueError("x"))

    def step():
        raise outer

    with pytest.raises(CompiledStepError, match="count it on a GPU"):
        capture_and_count(step, device="cpu", warmup=0)


@pytest.mark.parametrize("how", ["mode", "options"])
def test_reduce_overhead_is_refused(how):
    model, _ = tiny_step()
    kwargs = (
        {"mode": "reduce-overhead"} if how == "mode" else {"options": {"triton.cudagraphs": True}}
    )
    compiled = torch.compile(model, **kwargs)
    step = functools.partial(compiled, torch.randn(2, 8))
    for device in ("cpu", "cuda"):  # refused before anything runs: no GPU needed
        with pytest.raises(CompiledStepError, match="max-autotune-no-cudagraphs"):
            refuse_uncountable(step, device)
    ok = torch.compile(model, mode="max-autotune-no-cudagraphs")
    assert not find_compiled(functools.partial(ok, 1))[0].cudagraphs


def test_delta_per_module_at_every_depth():
    from graph_harness.capture.export.delta import node_delta

    def counted(layers: int):
        model = Tiny(layers=layers).eval()
        x = torch.randn(2, 8)
        with module_scopes(model):
            return capture_and_count(torch.no_grad()(lambda: model(x)), device="cpu")

    a, b = counted(3), counted(2)
    d = node_delta(a, b)
    tree = d.by_scope.set_index("scope")
    assert tree.loc["layers", "delta"] == -5 and tree.loc["layers.2", "b"] == 0
    assert tree.loc["layers.2.mlp", "delta"] == -2 and tree.loc["layers.1", "delta"] == 0
    assert tree.loc["(all)", "delta"] == d.total_delta == b.total - a.total == -5
    # each depth's rows sum to the total difference (shallower leaves counted once)
    assert d.by_scope[d.by_scope.depth == 1].delta.sum() == d.total_delta
    assert d.headline().endswith("-5 nodes (layers -5)")
    assert d.label(a) != d.label(b)  # one workload: told apart as (A) and (B)
    assert not d.is_round and "by_scope" in d.to_dict()


def test_a_block_compiled_on_its_own_keeps_its_name():
    from graph_harness.capture.scopes.modules import module_names

    model = Tiny()
    model.layers[1] = torch.compile(model.layers[1])
    names = set(module_names(model).values())
    assert "layers.1" in names and "layers.1.mlp.0" in names
    assert not any("_orig_mod" in n for n in names)
