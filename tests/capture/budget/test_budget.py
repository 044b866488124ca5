"""Node budgets: counts against budgets in total and per scope (a scope's budget covers
what is nested in it), the budget file, and the `node_budget` pytest plugin run through
pytester.

Every count is known by construction: the steps issue a fixed number of ops into static
buffers (one `torch.add(..., out=)` is one dispatched op, one kernel on a GPU), so a budget
of exactly that many passes and one less fails; nothing is checked against a number the
harness produced itself.
"""

import importlib.metadata
import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
import torch
from torch import nn

import graph_harness.pytest_plugin  # noqa: F401 - imported once, not per pytester run
from graph_harness.capture import NodeExport, capture_and_count, module_scopes, scope
from graph_harness.capture.budget import limits as budget
from graph_harness.capture.budget.file import (
    SCHEMA,
    BudgetFileError,
    lookup,
    read_budgets,
    record,
)
from graph_harness.capture.budget.limits import (
    BudgetError,
    NodeBudgetExceeded,
    check_budget,
    counts,
)
from graph_harness.reports.budget import budget_failure, budget_table, slack_note
from tests.plugin_args import PLUGIN

REPO = Path(__file__).resolve().parents[3]

# The step of every test here: ops by construction, in scopes, into static buffers.
ATTENTION, INNER, MLP, FREE = 3, 2, 1, 1
TOTAL = ATTENTION + INNER + MLP + FREE

STEPS_PY = """
import torch
from graph_harness.capture import scope

ATTENTION, INNER, MLP, FREE = {counts}


def make_step():
    a = torch.ones(4)
    out = torch.empty(4)  # [4] static output: every op writes here, none allocates

    def step():
        with scope("attention"):
            for _ in range(ATTENTION):
                torch.add(a, a, out=out)
            with scope("inner"):
                for _ in range(INNER):
                    torch.add(a, a, out=out)
        with scope("mlp"):
            for _ in range(MLP):
                torch.mul(a, a, out=out)
        for _ in range(FREE):
            torch.sub(a, a, out=out)

    return step
"""


def steps_source(attention=ATTENTION, inner=INNER, mlp=MLP, free=FREE) -> str:
    return STEPS_PY.replace("{counts}", f"{attention}, {inner}, {mlp}, {free}")


def load_step(**kw):
    ns: dict = {}
    exec(compile(steps_source(**kw), "<steps>", "exec"), ns)
    return ns["make_step"]()


def count(step, **kw) -> NodeExport:
    return capture_and_count(step, device="cpu", warmup=1, **kw)


# ------------------------------------------------------------------- counts and checks


def test_the_step_issues_what_it_says():
    # The other route to every count below: the ops themselves, one row each, in order.
    df = count(load_step()).frame()
    assert df["kernel"].tolist() == (
        ["aten.add.out"] * (ATTENTION + INNER) + ["aten.mul.out"] * MLP + ["aten.sub.out"] * FREE
    )
    assert df["scope"].tolist() == (
        ["attention"] * ATTENTION + ["inner"] * INNER + ["mlp"] * MLP + ["unscoped"] * FREE
    )


def test_a_scope_budget_covers_what_is_nested_in_it():
    export = count(load_step())
    exact = {
        "attention": ATTENTION + INNER,  # its own adds and inner's
        "attention.inner": INNER,
        "mlp": MLP,
        "unscoped": FREE,  # the nodes outside every scope
        "sum(*)": TOTAL,  # every top-level scope summed, unscoped included
    }
    check = check_budget(export, total=TOTAL, per_scope=exact)
    assert check.ok and not check.slack
    assert {ln.name: ln.nodes for ln in check.scopes} == exact
    assert check.total.nodes == TOTAL and check.source == "cpu-dispatch"
    assert counts(export) == {"attention": ATTENTION + INNER, "mlp": MLP, "unscoped": FREE}
    # one less than the count, for each budget alone: that line fails, no other
    for name, n in exact.items():
        check = check_budget(export, per_scope={**exact, name: n - 1})
        assert [ln.name for ln in check.exceeded] == [name]
        assert check.exceeded[0].diff == 1
    check = check_budget(export, total=TOTAL - 1)
    assert [ln.name for ln in check.exceeded] == ["(total)"]
    # one more: passes, with room to tighten
    check = check_budget(export, total=TOTAL + 2, per_scope={"mlp": MLP + 1})
    assert check.ok and [(ln.name, ln.diff) for ln in check.slack] == [
        ("mlp", -1),
        ("(total)", -2),
    ]
    # the kernels of a line, most frequent first
    (att,) = check_budget(export, per_scope={"attention": 0}).scopes
    assert att.kernels == (("aten.add.out", ATTENTION + INNER),)
    assert check_budget(export).total.kernels == (
        ("aten.add.out", ATTENTION + INNER),
        ("aten.mul.out", MLP),
        ("aten.sub.out", FREE),
    )


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.attention = nn.Linear(4, 4)  # one addmm (its weight's t() is a view)
        self.mlp = nn.Linear(4, 4)

    def forward(self, x):
        return self.mlp(self.attention(x))


def test_patterns_cover_every_scope_they_match():
    layers = 3
    model = nn.ModuleDict({"layers": nn.ModuleList(Block() for _ in range(layers))})
    x = torch.ones(2, 4)
    stages, pack_ops = 4, 2

    @torch.no_grad()
    def step():
        for block in model["layers"]:
            block(x)
        for s in range(stages):  # the built-in round's way: stage-numbered scopes
            with scope("pack", s):
                for _ in range(pack_ops):
                    torch.add(x, x, out=x)

    with module_scopes(model):
        export = count(step)
    check = check_budget(
        export,
        per_scope={
            "layers": 0,
            "layers.1": 0,
            "layers.*.attention": 0,
            "sum(layers.*.attention)": 0,
            "layers.?.mlp": 0,
            "stage*/pack": 0,
            "sum(stage*/pack)": 0,
            "stage2/pack": 0,
        },
    )
    by_key: dict[str, list] = {}
    for ln in check.scopes:
        by_key.setdefault(ln.key, []).append(ln)
    one = {key: lines for key, lines in by_key.items() if len(lines) == 1}
    assert one["layers"][0].nodes == 2 * layers and one["layers"][0].kind == budget.SCOPE
    assert one["layers.1"][0].nodes == 2
    assert one["stage2/pack"][0].nodes == pack_ops
    # a pattern: a line per scope it matches, each its own count, in natural order
    each = by_key["layers.*.attention"]
    assert [(ln.name, ln.nodes, ln.kind) for ln in each] == [
        (f"layers.{i}.attention", 1, budget.PER_MATCH) for i in range(layers)
    ]
    assert {ln.kernels for ln in each} == {(("aten.addmm.default", 1),)}
    assert [ln.name for ln in by_key["layers.?.mlp"]] == [f"layers.{i}.mlp" for i in range(layers)]
    assert [(ln.name, ln.nodes) for ln in by_key["stage*/pack"]] == [
        (f"stage{s}/pack", pack_ops) for s in range(stages)
    ]
    # sum(...): one line, every match's nodes together
    (att,) = by_key["sum(layers.*.attention)"]
    assert (att.nodes, att.scopes, att.kind) == (layers, layers, budget.SUM)
    assert att.kernels == (("aten.addmm.default", layers),)
    (pack,) = by_key["sum(stage*/pack)"]
    assert (pack.nodes, pack.scopes) == (stages * pack_ops, stages)
    # `*` stays within one part: it never reaches a nested scope's label
    with pytest.raises(BudgetError, match=r'"\*\.attention": did you mean "layers\.\*\.att'):
        check_budget(export, per_scope={"*.attention": 1})


def test_a_scope_named_like_a_pattern_is_counted_by_its_label(tmp_path):
    # A scope literally called `*` was recorded with the pattern's count (every top-level
    # scope): its own label names it alone; a pattern still matches where no label is it.
    x = torch.ones(3)

    def step():
        with scope("*"):
            torch.add(x, x, out=x)
        with scope("b"):
            torch.add(x, x, out=x)
            torch.mul(x, x, out=x)
        with scope("c?"):
            torch.sub(x, x, out=x)

    export = count(step)
    assert counts(export) == {"*": 1, "b": 2, "c?": 1}  # recorded by label, each its own
    path = tmp_path / "b.json"
    record(path, "k", export, None)
    entry = lookup(path, "k", export.source)
    assert check_budget(export, per_scope=entry.scopes).ok
    # no scope is labelled `?`: the pattern matches `*` (1) and `b` (2), each its own line
    lines = check_budget(export, per_scope={"?": 9, "sum(?)": 9}).scopes
    assert [(ln.key, ln.name, ln.nodes) for ln in lines] == [
        ("?", "*", 1),
        ("?", "b", 2),
        ("sum(?)", "sum(?)", 3),
    ]


LAYERS = (2, 3, 2)  # ops per layer: layers.1 the largest, so per match and sum differ

LAYERS_PY = """
import torch
from graph_harness.capture import scope

LAYERS = {layers}


def make_step():
    a = torch.ones(4)
    out = torch.empty(4)  # [4] static output: every op writes here, none allocates

    def step():
        for i, ops in enumerate(LAYERS):
            with scope(f"layers.{i}"):
                for _ in range(ops):
                    torch.add(a, a, out=out)
        torch.sub(a, a, out=out)  # unscoped

    return step
"""


def layers_source(layers=LAYERS) -> str:
    return LAYERS_PY.replace("{layers}", repr(tuple(layers)))


def load_layers(layers=LAYERS):
    ns: dict = {}
    exec(compile(layers_source(layers), "<layers>", "exec"), ns)
    return ns["make_step"]()


def test_a_pattern_budget_holds_each_scope_it_matches():
    # Issue 31: `"layers.*": 3` is "3 per layer". It was the sum over the layers (7 here),
    # so a budget every layer meets failed; now each matching scope is held to it.
    export = count(load_layers())
    assert export.frame()["scope"].tolist() == (  # the step is what it says
        ["layers.0"] * 2 + ["layers.1"] * 3 + ["layers.2"] * 2 + ["unscoped"]
    )
    largest, summed = max(LAYERS), sum(LAYERS)
    check = check_budget(export, per_scope={"layers.*": largest, "sum(layers.*)": summed})
    assert check.ok and not check.slack
    # one less than the largest: that layer alone is over, named with its pattern
    check = check_budget(export, per_scope={"layers.*": largest - 1})
    assert [(ln.name, ln.pattern, ln.diff) for ln in check.exceeded] == [
        ("layers.1", "layers.*", 1)
    ]
    # no (total) row: no total budget was asked for (issue 44, 13)
    assert budget_table(check) == [
        "scope                             budget  nodes  diff  kernels",
        "layers.1 (per match of layers.*)       2      3    +1  3 × aten.add.out",
    ]
    assert (
        budget_failure(check, export)
        .splitlines()[0]
        .startswith("node budget exceeded in 1 scope: callable:")
    )
    # every layer over: a row each; and the sum over them, a row of its own kind
    check = check_budget(export, total=7, per_scope={"layers.*": 1, "sum(layers.*)": 6})
    assert [ln.name for ln in check.exceeded] == [
        "layers.0",
        "layers.1",
        "layers.2",
        "sum(layers.*)",
        "(total)",
    ]
    assert budget_table(check)[4] == (
        "sum(layers.*) (sum of 3 scopes)        6      7    +1  7 × aten.add.out"
    )
    assert (
        budget_failure(check, export)
        .splitlines()[0]
        .startswith("node budget exceeded in 3 scopes, 1 sum and the total: callable:")
    )
    # room to tighten a per-match budget: down to its largest match, no further
    check = check_budget(export, per_scope={"layers.*": largest + 1, "sum(layers.*)": summed})
    assert [(ln.name, ln.diff) for ln in check.slack] == [("layers.1", -1)]
    assert slack_note("k", check) == (
        "k [cpu-dispatch]: under budget: layers.* (per match, largest layers.1) 3 of 4; "
        "lower the budget in the test"
    )
    # today's counts, as the budgets that hold them
    assert counts(export, ["layers.*", "sum(layers.*)", "layers.0"]) == {
        "layers.*": largest,
        "sum(layers.*)": summed,
        "layers.0": LAYERS[0],
    }


def test_the_file_holds_both_kinds_and_reads_them_back(tmp_path):
    path = tmp_path / "b.json"
    export = count(load_layers())
    record(path, "k", export, ["layers.*", "sum(layers.*)"])
    doc = json.loads(path.read_text())
    scopes = {"layers.*": max(LAYERS), "sum(layers.*)": sum(LAYERS)}
    assert doc["budgets"]["k"]["cpu-dispatch"]["scopes"] == scopes
    entry = lookup(path, "k", "cpu-dispatch")
    assert entry.scopes == scopes
    assert check_budget(export, total=entry.total, per_scope=entry.scopes).ok
    # read back, each is still its kind: a layer grown to the largest breaks only the sum,
    # one grown past it both
    same_largest = count(load_layers((3, 3, 2)))
    over = check_budget(same_largest, per_scope=entry.scopes).exceeded
    assert [(ln.name, ln.kind) for ln in over] == [("sum(layers.*)", budget.SUM)]
    past = count(load_layers((2, 4, 2)))
    over = check_budget(past, per_scope=entry.scopes).exceeded
    assert [(ln.name, ln.kind) for ln in over] == [
        ("layers.1", budget.PER_MATCH),
        ("sum(layers.*)", budget.SUM),
    ]


def test_a_version_1_file_keeps_its_sums(tmp_path):
    # Version 1 held a plain pattern's budget as the sum of its matches: read as its
    # sum(...), the budget means what it did (read per match, 7 would hold every layer of
    # 4 ops, 12 in all, unseen); recorded into, the file is written as version 2.
    path = _write(
        tmp_path / "b.json",
        {
            "schema": SCHEMA,
            "schema_version": 1,
            "budgets": {"old": {"cpu-dispatch": {"total": 8, "scopes": {"layers.*": 7}}}},
        },
    )
    entry = lookup(path, "old", "cpu-dispatch")
    assert entry.scopes == {"sum(layers.*)": sum(LAYERS)}
    assert check_budget(count(load_layers()), per_scope=entry.scopes).ok
    over = check_budget(count(load_layers((2, 3, 3))), per_scope=entry.scopes).exceeded
    assert [ln.name for ln in over] == ["sum(layers.*)"]
    record(path, "new", count(load_layers()), ["layers.*"])
    doc = json.loads(path.read_text())
    assert doc["schema_version"] == 2
    assert {k: v["cpu-dispatch"]["scopes"] for k, v in doc["budgets"].items()} == {
        "new": {"layers.*": max(LAYERS)},
        "old": {"sum(layers.*)": sum(LAYERS)},
    }


def test_a_name_that_never_occurs_is_refused_with_the_nearest():
    export = count(load_step())
    with pytest.raises(BudgetError) as e:
        check_budget(export, per_scope={"atention": 1, "inner": 1, "mlp": 1, "zzz": 1})
    msg = str(e.value)
    assert msg.startswith("scope names never occur in callable:")
    assert '"atention": did you mean "attention"' in msg
    assert '"inner": did you mean "attention.inner"' in msg  # a nested scope's full label
    assert '"zzz": no scope with a similar name' in msg
    assert '"mlp"' not in msg  # it occurs
    assert "Top-level scopes: attention, mlp, unscoped." in msg

    a, out = torch.ones(4), torch.empty(4)

    def round_like():  # the built-in round's scopes: stageN/step
        for s in range(14):
            with scope("pack", s):
                torch.add(a, a, out=out)

    with pytest.raises(BudgetError) as e:
        check_budget(count(round_like), per_scope={"pack": 14})
    msg = str(e.value)
    assert '"pack": did you mean "stage*/pack". Top-level scopes: stage0/pack, ' in msg
    assert "stage9/pack, stage10/pack, stage11/pack, ... 2 more." in msg  # the first 12
    with pytest.raises(BudgetError) as e:  # inside sum(...), the nearest summed
        check_budget(count(round_like), per_scope={"sum(pack)": 14})
    assert '"sum(pack)": did you mean "sum(stage*/pack)". Top-level scopes:' in str(e.value)


@pytest.mark.parametrize(
    ("total", "per_scope", "message"),
    [
        (-1, None, "total: a budget is an int >= 0 (nodes), got -1"),
        (True, None, "total: a budget is an int >= 0 (nodes), got true"),
        (7.0, None, "total: a budget is an int >= 0 (nodes), got 7.0"),
        (None, {"mlp": "1"}, 'per_scope["mlp"]: a budget is an int >= 0 (nodes), got "1"'),
        (None, {"": 1}, 'scope name "" is not a scope label'),
        (None, {"layers..1": 1}, 'scope name "layers..1" is not a scope label'),
        (None, {" mlp": 1}, 'scope name " mlp" is not a scope label'),
        (None, {1: 1}, "a scope name is a str, got 1"),
        (None, {"sum()": 1}, '"sum()" sums the scopes a name or pattern covers, and scope'),
        (None, {"sum( mlp)": 1}, '"sum( mlp)" sums the scopes a name or pattern covers, and'),
    ],
)
def test_bad_budgets_are_refused(total, per_scope, message):
    export = count(load_step())
    with pytest.raises(BudgetError) as e:
        check_budget(export, total=total, per_scope=per_scope)
    assert str(e.value).startswith(message), str(e.value)


def graph_export() -> NodeExport:
    """A cuda-graph export written by hand: mangled kernel names, a memset without one."""
    add = "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_15CUDAFunctor_addIfEEEEvi"
    mul = "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_13BinaryFunctorIfEEEEvi"

    def node(i, type_, kernel, path):
        return dict(
            index=i,
            type=type_,
            kernel=kernel,
            grid=None,
            block=None,
            stage=None,
            step=path[-1] if path else "unscoped",
            scope=path[-1] if path else "unscoped",
            scope_path=list(path),
            deps=[i - 1] if i else [],
            parent=None,
        )

    nodes = [node(i, "kernel", add, ["decode", "attention"]) for i in range(3)]
    nodes += [node(3, "kernel", mul, ["decode", "attention"]), node(4, "memset", None, ["decode"])]
    return NodeExport(
        source="cuda-graph",
        workload="callable:decode",
        variant=None,
        params=None,
        nodes=nodes,
        env={"device": "NVIDIA H200", "torch": "2.13.0"},
    )


def test_the_table_shows_each_scope_over_budget_and_the_total():
    export = graph_export()
    check = check_budget(export, total=5, per_scope={"decode.attention": 3, "decode": 6})
    add = "vectorized_elementwise_kernel<4, CUDAFunctor_add<float>>"
    mul = "vectorized_elementwise_kernel<4, BinaryFunctor<float>>"
    assert budget_table(check) == [
        "scope             budget  nodes  diff  kernels",
        f"decode.attention       3      4    +1  3 × {add}",
        f"                                       1 × {mul}",
        f"(total)                5      5    +0  3 × {add}",
        f"                                       1 × {mul}",
        "                                       1 × memset",
    ]
    msg = budget_failure(check, export)
    assert msg.splitlines()[0] == (
        "node budget exceeded in 1 scope: callable:decode, counting CUDA graph nodes on NVIDIA H200"
    )
    assert msg.splitlines()[1] == "budgets: inline"
    assert msg.splitlines()[-1] == "if the new count is intended, raise the budget in the test"
    # recorded by another torch: the message says so (op counts change between releases)
    check = check_budget(
        export, total=4, origin="b.json, entry 'k'", recorded={"torch": "2.4.0", "device": "x"}
    )
    msg = budget_failure(check, export).splitlines()
    assert msg[0].startswith("node budget exceeded in the total: callable:decode")
    assert msg[1] == (
        "budgets: b.json, entry 'k' (recorded with torch 2.4.0 on x; torch is 2.13.0 now, "
        "and op counts change between releases)"
    )
    assert msg[-1] == "if the new count is intended, re-record it: pytest --update-node-budgets"


def test_the_table_cuts_long_kernel_lists():
    a, out = torch.ones(4), torch.empty(4)
    ops = [torch.add, torch.sub, torch.mul, torch.div, torch.maximum]

    def step():
        for i, op in enumerate(ops):
            for _ in range(i + 1):
                op(a, a, out=out)

    check = check_budget(count(step), total=1)
    assert [ln.split("  ")[-1] for ln in budget_table(check)[1:]] == [
        "5 × aten.maximum.out",
        "4 × aten.div.out",
        "3 × aten.mul.out",
        "3 × 2 more kernels",  # sub ×2 and add ×1
    ]


# ---------------------------------------------------------------------------- the file


def test_record_writes_plain_sorted_json_and_keeps_other_entries(tmp_path):
    path = tmp_path / "budgets" / "decode.json"  # its folder is made
    export = count(load_step())
    record(path, "t::b", export, ["attention", "mlp"])
    record(path, "t::a", export, None)  # every top-level scope
    doc = json.loads(path.read_text())
    assert list(doc) == ["schema", "schema_version", "budgets"]
    assert doc["schema"] == SCHEMA and doc["schema_version"] == 2
    assert list(doc["budgets"]) == ["t::a", "t::b"]
    entry = {
        "total": TOTAL,
        "scopes": {"attention": ATTENTION + INNER, "mlp": MLP},
        "torch": torch.__version__,
        "device": "cpu",
    }
    assert doc["budgets"]["t::b"] == {"cpu-dispatch": entry}
    assert doc["budgets"]["t::a"]["cpu-dispatch"]["scopes"] == {
        "attention": ATTENTION + INNER,
        "mlp": MLP,
        "unscoped": FREE,
    }
    assert path.read_text().startswith('{\n  "schema": "graph-harness/node-budgets",\n')
    # another source's entry, by hand: recording this source again leaves it be
    doc["budgets"]["t::b"]["cuda-graph"] = {"total": 3, "scopes": {"attention": 1}}
    path.write_text(json.dumps(doc))
    smaller = count(load_step(mlp=0))
    record(path, "t::b", smaller, ["attention"])
    got = read_budgets(path)["t::b"]
    assert got["cuda-graph"].total == 3
    assert got["cpu-dispatch"].total == TOTAL - MLP
    assert got["cpu-dispatch"].scopes == {"attention": ATTENTION + INNER}
    assert sorted(p.name for p in path.parent.iterdir()) == ["decode.json"]  # no temporaries
    assert lookup(path, "t::b", "cpu-dispatch").total == TOTAL - MLP


def test_recording_touches_nothing_that_is_not_a_budget_file(tmp_path, monkeypatch):
    export = count(load_step())
    user = tmp_path / "user"
    user.mkdir()
    notes = user / "notes.txt"
    notes.write_text("mine")

    def everything():
        return {
            str(p.relative_to(tmp_path)): (p.is_symlink(), None if p.is_dir() else p.read_bytes())
            for p in sorted(tmp_path.rglob("*"))
            if not p.is_symlink() or p.exists()
        }

    # a link to a file that is not a budget file: refused, link and target as they were
    (tmp_path / "link.json").symlink_to(notes)
    # a folder where the file would go, the current folder, its parent: refused
    monkeypatch.chdir(user)
    before = everything()
    for path in (tmp_path / "link.json", user, Path("."), Path("..")):
        with pytest.raises(BudgetError):
            record(path, "t::x", export, None)
        assert everything() == before, path
    # a link to a budget file elsewhere: written through, and still a link
    elsewhere = tmp_path / "kept" / "b.json"
    record(elsewhere, "t::a", export, None)
    (tmp_path / "via.json").symlink_to(elsewhere)
    record(tmp_path / "via.json", "t::b", export, None)
    assert (tmp_path / "via.json").is_symlink()
    assert sorted(read_budgets(elsewhere)) == ["t::a", "t::b"]
    assert sorted(p.name for p in elsewhere.parent.iterdir()) == ["b.json"]  # no temporaries
    assert notes.read_text() == "mine" and sorted(p.name for p in user.iterdir()) == ["notes.txt"]


def test_workers_recording_into_one_file_lose_nothing(tmp_path):
    # pytest-xdist workers record into one file at once: each read-change-write holds the
    # folder's lock. (Without it, this loses entries every time here.)
    path = tmp_path / "b.json"
    export = count(load_step())
    workers = 16
    start = threading.Barrier(workers)

    def work(i):
        start.wait()
        record(path, f"test_{i:02d}", export, None)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(read_budgets(path)) == [f"test_{i:02d}" for i in range(workers)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.json"]


def test_lookup_says_how_to_record(tmp_path):
    path = tmp_path / "b.json"
    how = "run pytest with --update-node-budgets to record today's counts"
    with pytest.raises(BudgetError, match=f"^no node budget file {re.escape(str(path))}: {how}"):
        lookup(path, "k", "cpu-dispatch")
    record(path, "k", count(load_step()), None)
    with pytest.raises(BudgetError, match=f'has no node budget for "other": {how}'):
        lookup(path, "other", "cpu-dispatch")
    with pytest.raises(BudgetError) as e:
        lookup(path, "k", "cuda-graph")
    assert str(e.value) == (
        f'{path} has no cuda-graph node budget for "k", only cpu-dispatch: counts of another '
        f"source are not comparable (CUDA graph nodes now); {how} on this machine"
    )


def good_doc():
    return {
        "schema": SCHEMA,
        "schema_version": 1,
        "budgets": {"k": {"cpu-dispatch": {"total": 3, "scopes": {"mlp": 1}}}},
    }


def change(path, value):
    def edit(doc):
        *outer, last = path
        d = doc
        for k in outer:
            d = d[k]
        if value is KeyError:
            del d[last]
        else:
            d[last] = value
        return doc

    return edit


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: [d], "not a graph-harness node budget file (schema a list of 1, expected"),
        (change(["schema"], "graph-harness/nodes"), "a node export, not a node-budget"),
        (change(["schema_version"], 3), "schema_version: 3 is not one this graph-harness reads"),
        (change(["extra"], 1), 'unknown key "extra"'),
        (change(["budgets"], []), "budgets: expected an object, got a list of 0"),
        (change(["budgets", "k"], {}), 'budgets["k"]: expected an object with an entry per'),
        (change(["budgets", "k", "gpu"], {}), 'budgets["k"]: unknown source "gpu"'),
        (change(["budgets", "k", "cpu-dispatch", "total"], -1), ".total: expected an int >= 0"),
        (change(["budgets", "k", "cpu-dispatch", "total"], 1.0), ".total: expected an int >= 0"),
        (change(["budgets", "k", "cpu-dispatch", "total"], KeyError), "missing key 'total'"),
        (change(["budgets", "k", "cpu-dispatch", "scopes", "mlp"], True), 'scopes["mlp"]: exp'),
        (change(["budgets", "k", "cpu-dispatch", "scopes", "a..b"], 1), 'name "a..b" is not a'),
        (change(["budgets", "k", "cpu-dispatch", "scopes", "sum()"], 1), '"sum()" sums the'),
        (change(["budgets", "k", "cpu-dispatch", "torch"], 2), ".torch: expected a str or null"),
    ],
)
def test_a_malformed_file_names_the_file_and_field(tmp_path, edit, message):
    path = tmp_path / "b.json"
    path.write_text(json.dumps(edit(good_doc())))
    with pytest.raises(BudgetFileError) as e:
        read_budgets(path)
    assert str(e.value).startswith(f"{path}: "), str(e.value)
    assert message in str(e.value), str(e.value)
    before = path.read_text()
    with pytest.raises(BudgetFileError):  # never overwritten
        record(path, "k", count(load_step()), None)
    assert path.read_text() == before


def test_a_file_that_is_not_json_is_refused(tmp_path):
    path = tmp_path / "b.json"
    path.write_text("{")
    with pytest.raises(BudgetFileError, match=rf"^cannot read node budgets {re.escape(str(path))}"):
        read_budgets(path)
    assert read_budgets(_write(tmp_path / "ok.json", good_doc()))["k"]["cpu-dispatch"].total == 3


def _write(path, doc):
    path.write_text(json.dumps(doc))
    return path


# --------------------------------------------------------------- the plugin, in pytest


@pytest.fixture
def project(pytester):
    """A project with no conftest: the step's module, and an ini at its root (the rootdir
    that record= paths are relative to)."""
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(steps=steps_source())
    return pytester


def run(pytester, *args):
    return pytester.runpytest_inprocess(*PLUGIN, *args)


def test_plugin_a_budget_met_passes(project):
    project.makepyfile(
        test_decode=f"""
        from graph_harness.capture import NodeExport
        import steps

        def test_exact(node_budget):
            export = node_budget(
                steps.make_step(), total={TOTAL}, per_scope={{"attention": {ATTENTION + INNER}}},
                device="cpu", warmup=1,
            )
            assert isinstance(export, NodeExport) and export.total == {TOTAL}

        def test_roomy(node_budget):
            node_budget(steps.make_step(), total={TOTAL + 2}, device="cpu", warmup=1)
        """
    )
    result = run(project)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "*- node budgets -*",
            f"test_decode.py::test_roomy [[]cpu-dispatch[]]: under budget: total {TOTAL} of "
            f"{TOTAL + 2}; lower the budget in the test",
        ]
    )
    assert "test_exact" not in result.stdout.str()  # no room: nothing to tighten


def test_plugin_over_budget_fails_with_its_table(project):
    project.makepyfile(
        test_decode=f"""
        import steps

        def test_total(node_budget):
            node_budget(steps.make_step(), total={TOTAL - 1}, device="cpu", warmup=1)
        """
    )
    result = run(project)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            ">*node_budget(steps.make_step(), total=*",
            "E*NodeBudgetExceeded: node budget exceeded in the total: callable:make_step.<locals>"
            ".step, counting dispatched ops on the CPU (no GPU: ATen ops + Triton launches, "
            "not graph nodes)",
            "E*budgets: inline",
            "E*scope    budget  nodes  diff  kernels",
            f"E*(total)       {TOTAL - 1}      {TOTAL}    +1  {ATTENTION + INNER} × aten.add.out",
            f"E*                                {MLP} × aten.mul.out",
            f"E*                                {FREE} × aten.sub.out",
            "E*if the new count is intended, raise the budget in the test",
        ]
    )
    # the plugin's own frames are hidden: the test's line, then the message
    assert "pytest_plugin.py" not in result.stdout.str()


def test_plugin_a_scope_over_budget_counts_what_is_nested_in_it(project):
    project.makepyfile(
        test_decode=f"""
        import steps

        def test_scope(node_budget):
            node_budget(
                steps.make_step(),
                total={TOTAL},
                per_scope={{"attention": {ATTENTION + INNER - 1}, "mlp": {MLP}}},
                device="cpu",
                warmup=1,
            )
        """
    )
    result = run(project)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "E*node budget exceeded in 1 scope: callable:*",
            "E*scope      budget  nodes  diff  kernels",
            f"E*attention       {ATTENTION + INNER - 1}      {ATTENTION + INNER}    +1  "
            f"{ATTENTION + INNER} × aten.add.out",
            f"E*(total)         {TOTAL}      {TOTAL}    +0  {ATTENTION + INNER} × aten.add.out",
        ]
    )
    out = result.stdout.str()
    assert "E       mlp " not in out  # within its budget: not a row of the failure


def test_plugin_records_then_checks(project):
    project.makepyfile(
        test_decode="""
        import steps

        def test_decode(node_budget):
            node_budget(
                steps.make_step(), record="budgets/decode.json", per_scope=["attention", "mlp"],
                device="cpu", warmup=1,
            )

        def test_named(node_budget):
            step = steps.make_step()
            node_budget(step, record="budgets/decode.json", name="whole", device="cpu", warmup=1)
        """
    )
    path = project.path / "budgets" / "decode.json"
    first = run(project)  # no file yet
    first.assert_outcomes(failed=2)
    first.stdout.fnmatch_lines(
        [
            "E*BudgetError: no node budget file budgets/decode.json: run pytest with "
            "--update-node-budgets to record today's counts"
        ]
    )
    assert not path.exists()

    recorded = run(project, "--update-node-budgets")
    recorded.assert_outcomes(passed=2)
    recorded.stdout.fnmatch_lines(
        [
            "test_decode.py::test_decode [[]cpu-dispatch[]]: recorded in budgets/decode.json: "
            f"total {TOTAL}, attention {ATTENTION + INNER}, mlp {MLP}",
            f"whole [[]cpu-dispatch[]]: recorded in budgets/decode.json: total {TOTAL}, "
            f"attention {ATTENTION + INNER}, mlp {MLP}, unscoped {FREE}",
        ]
    )
    doc = json.loads(path.read_text())
    recorded_with = {"torch": torch.__version__, "device": "cpu"}
    assert doc == {
        "schema": SCHEMA,
        "schema_version": 2,
        "budgets": {
            "test_decode.py::test_decode": {
                "cpu-dispatch": {
                    "total": TOTAL,
                    "scopes": {"attention": ATTENTION + INNER, "mlp": MLP},
                    **recorded_with,
                }
            },
            "whole": {
                "cpu-dispatch": {
                    "total": TOTAL,
                    "scopes": {"attention": ATTENTION + INNER, "mlp": MLP, "unscoped": FREE},
                    **recorded_with,
                }
            },
        },
    }

    run(project).assert_outcomes(passed=2)  # today's counts meet today's budgets

    # a change brings a node back: both budgets see it, in mlp and in the total
    project.makepyfile(steps=steps_source(mlp=MLP + 1) + "\n# one more mul\n")
    failed = run(project)
    failed.assert_outcomes(failed=2)
    failed.stdout.fnmatch_lines(
        [
            "E*budgets: budgets/decode.json, entry 'test_decode.py::test_decode' "
            f"[[]cpu-dispatch[]] (recorded with torch {torch.__version__} on cpu)",
            "E*scope    budget  nodes  diff  kernels",
            f"E*mlp           {MLP}      {MLP + 1}    +1  {MLP + 1} × aten.mul.out",
            f"E*(total)       {TOTAL}      {TOTAL + 1}    +1  *",
            "E*if the new count is intended, re-record it: pytest --update-node-budgets",
        ]
    )
    run(project, "--update-node-budgets").assert_outcomes(passed=2)
    assert read_budgets(path)["whole"]["cpu-dispatch"].total == TOTAL + 1
    run(project).assert_outcomes(passed=2)


def test_plugin_a_pattern_is_per_match_and_sum_is_named(project):
    # The issue's case: `"layers.*": 3`, meant per layer, failed at the sum (7).
    project.makepyfile(layers=layers_source())
    project.makepyfile(
        test_layers="""
        import layers

        def test_per_layer(node_budget):
            node_budget(layers.make_step(), per_scope={"layers.*": 3}, device="cpu", warmup=1)

        def test_over(node_budget):
            node_budget(
                layers.make_step(), per_scope={"layers.*": 2, "sum(layers.*)": 6},
                device="cpu", warmup=1,
            )

        def test_recorded(node_budget):
            node_budget(
                layers.make_step(), record="b.json", per_scope=["layers.*", "sum(layers.*)"],
                device="cpu", warmup=1,
            )
        """
    )
    result = run(project, "--update-node-budgets")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "E*node budget exceeded in 1 scope and 1 sum: callable:*",
            "E*scope                             budget  nodes  diff  kernels",
            "E*layers.1 (per match of layers.*)       2      3    +1  3 × aten.add.out",
            "E*sum(layers.*) (sum of 3 scopes)        6      7    +1  7 × aten.add.out",
            "test_layers.py::test_recorded [[]cpu-dispatch[]]: recorded in b.json: total 8, "
            "layers.* (per match, largest layers.1) 3, sum(layers.*) 7",
        ]
    )
    assert "E       layers.0 " not in result.stdout.str()  # within its budget: no row
    scopes = json.loads((project.path / "b.json").read_text())["budgets"]
    assert scopes["test_layers.py::test_recorded"]["cpu-dispatch"]["scopes"] == {
        "layers.*": 3,
        "sum(layers.*)": 7,
    }
    run(project, "-k", "recorded").assert_outcomes(passed=1)  # read back, both kinds hold
    project.makepyfile(layers=layers_source((2, 3, 4)))  # the last layer grows past the rest
    failed = run(project, "-k", "recorded")
    failed.assert_outcomes(failed=1)
    failed.stdout.fnmatch_lines(
        [
            "E*layers.2 (per match of layers.*)       3      4    +1  4 × aten.add.out",
            "E*sum(layers.*) (sum of 3 scopes)        7      9    +2  9 × aten.add.out",
        ]
    )


def test_plugin_refuses_a_scope_name_that_never_occurs(project):
    project.makepyfile(
        test_decode="""
        import steps

        def test_typo(node_budget):
            node_budget(steps.make_step(), per_scope={"atention": 5}, device="cpu", warmup=1)
        """
    )
    result = run(project)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            '>*node_budget(steps.make_step(), per_scope={"atention": 5}*',
            "E*BudgetError: scope name never occurs in callable:make_step.<locals>.step (no node "
            'is in a scope of that name): "atention": did you mean "attention" or '
            '"attention.inner". Top-level scopes: attention, mlp, unscoped.*',
        ]
    )


def test_plugin_a_record_of_another_source_or_other_scopes_is_refused(project):
    (project.path / "budgets").mkdir()
    doc = {
        "schema": SCHEMA,
        "schema_version": 1,
        "budgets": {
            "gpu-only": {"cuda-graph": {"total": TOTAL, "scopes": {}}},
            "names": {"cpu-dispatch": {"total": TOTAL, "scopes": {"mlp": MLP}}},
        },
    }
    (project.path / "budgets" / "b.json").write_text(json.dumps(doc))
    project.makepyfile(
        test_decode="""
        import steps

        def test_gpu_only(node_budget):
            node_budget(steps.make_step(), record="budgets/b.json", name="gpu-only",
                        device="cpu", warmup=1)

        def test_names(node_budget):
            node_budget(steps.make_step(), record="budgets/b.json", name="names",
                        per_scope=["attention"], device="cpu", warmup=1)
        """
    )
    result = run(project)
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            'E*BudgetError: budgets/b.json has no cpu-dispatch node budget for "gpu-only", '
            "only cuda-graph: counts of another source are not comparable (ops dispatched on "
            "the CPU now); run pytest with --update-node-budgets to record today's counts on "
            "this machine",
            "E*BudgetError: budgets/b.json: the budget for 'names' records scopes [[]'mlp'], "
            "the test names [[]'attention']: re-record with --update-node-budgets",
        ]
    )


@pytest.mark.parametrize(
    ("call", "message"),
    [
        ("node_budget(step)", "node_budget needs total=, per_scope= or record="),
        ("node_budget(step, total=1, record='b.json')", "give total= or record=, not both"),
        ("node_budget(step, record='b.json', per_scope={'mlp': 1})", "with record=, per_scope"),
        ("node_budget(step, per_scope=['mlp'])", "per_scope maps scope names to budgets"),
        ("node_budget(step, total=9, name='x')", "name= names an entry of a budget file"),
        ("node_budget(step, total=9, depth=2)", "depth= is the depth of module scopes"),
        (
            "node_budget(step, total=9, record=None, warmup=1, device='cpu');"
            "node_budget(step, record='b.json', per_scope=['mlp'], device='cpu');"
            "node_budget(step, record='b.json', per_scope=['mlp'], device='cpu')",
            "this test already used the budget 'test_call.py::test_call' of b.json: give each",
        ),
        ("node_budget(step, total=9, wamrup=1)", "node_budget has no option wamrup= (it takes"),
    ],
)
def test_plugin_refuses_arguments_that_do_not_combine(project, call, message):
    project.makepyfile(
        test_call=f"""
        import steps

        def test_call(node_budget):
            step = steps.make_step()
            {call}
        """
    )
    result = run(project, "--update-node-budgets")  # the third case records twice
    result.assert_outcomes(failed=1)
    assert message in result.stdout.str(), result.stdout.str()


def test_plugin_module_scopes_by_qualified_name(project):
    project.makepyfile(
        test_model="""
        import torch
        from torch import nn

        def test_model(node_budget):
            model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4))
            x = torch.ones(2, 4)
            step = torch.no_grad()(lambda: model(x))
            export = node_budget(step, per_scope={"0": 1, "2": 1, "1": 1}, module=model,
                                 depth=1, device="cpu", warmup=1)
            assert export.total == 3  # addmm, relu, addmm: each its own module's
        """
    )
    run(project).assert_outcomes(passed=1)


def test_plugin_names_that_are_not_text_record_and_check(project):
    """A scope, a name= and a test file's name with a lone surrogate (a non-UTF-8 byte in
    a file name is one, as Python decodes it): each is recorded and checked as its
    escape, the form the scope tables and the file read back hold (before, a budget named
    like the scope never occurred, and every recorded entry read back as missing)."""
    steps = steps_source().replace('scope("mlp")', 'scope("m\\udc80lp")')
    project.makepyfile(steps=steps)
    source = f"""
import steps

def test_inline(node_budget):
    node_budget(steps.make_step(), per_scope={{"m\\udc80lp": {MLP}}}, device="cpu", warmup=1)

def test_by_id(node_budget):
    node_budget(steps.make_step(), record="b.json", per_scope=["m\\udc80lp"],
                device="cpu", warmup=1)

def test_named(node_budget):
    node_budget(steps.make_step(), record="b.json", name="n\\udc80", device="cpu", warmup=1)
"""
    (project.path / os.fsdecode(b"test_\xff.py")).write_text(source)
    run(project, "--update-node-budgets").assert_outcomes(passed=3)
    doc = json.loads((project.path / "b.json").read_text())
    assert {k: v["cpu-dispatch"]["scopes"] for k, v in doc["budgets"].items()} == {
        "test_\\udcff.py::test_by_id": {"m\\udc80lp": MLP},
        "n\\udc80": {"attention": ATTENTION + INNER, "m\\udc80lp": MLP, "unscoped": FREE},
    }
    run(project).assert_outcomes(passed=3)  # each entry found, each scope named
    project.makepyfile(steps=steps.replace("range(MLP)", "range(MLP + 1)"))
    run(project).assert_outcomes(failed=3)  # and held to its budget


# ----------------------------------------------------------- registration by entry point


def test_the_plugin_is_light_until_used():
    # Loaded into every pytest run of an environment with graph-harness: no torch, no
    # pandas, none of the budget's code until a test asks for node_budget (its flag comes
    # from capture/budget/__init__, which imports nothing); one name for its flag.
    probe = (
        "import sys, graph_harness.pytest_plugin as p\n"
        "heavy = {'torch', 'pandas', 'triton', 'matplotlib'}\n"
        "heavy = sorted((heavy | {'graph_harness.capture.budget.limits'}) & set(sys.modules))\n"
        "assert not heavy, heavy\n"
        "print(p.UPDATE_FLAG)\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, timeout=120
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == budget.UPDATE_FLAG == "--update-node-budgets"


def test_the_entry_point_is_declared():
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["pytest11"] == {
        "graph_harness.pytest_plugin": "graph_harness.pytest_plugin"
    }


def test_the_installed_metadata_registers_the_plugin():
    # A checkout installed with `pip install -e .` (CI): its metadata must carry the
    # entry point. tests/test_install.py checks a wheel built from this tree in any case.
    # Or a build's egg-info in the tree itself, found first on a PYTHONPATH naming it.
    dist = importlib.metadata.distribution("graph-harness")
    url = urlparse(json.loads(dist.read_text("direct_url.json") or "{}").get("url", ""))
    ours = url.scheme == "file" and Path(unquote(url.path)).resolve() == REPO
    if not ours and Path(dist.locate_file("")).resolve() != REPO:
        where = url.geturl() or dist.locate_file("")
        pytest.skip(f"the graph-harness metadata found is from {where}, not {REPO}")
    eps = [ep for ep in dist.entry_points if ep.group == "pytest11"]
    assert [(ep.name, ep.value) for ep in eps] == [
        ("graph_harness.pytest_plugin", "graph_harness.pytest_plugin")
    ]


# ------------------------------------------------------------------------------- GPU


@pytest.mark.gpu
def test_node_budget_counts_graph_nodes(node_budget):
    # On CUDA each add into a static buffer is one kernel node: a budget of exactly that
    # many passes, one less fails; and the graph captured here by plain torch, read node
    # by node from the driver, holds the same number.
    from graph_harness.capture.graph.reader import read_graph

    a = torch.ones(1024, device="cuda")
    out = torch.empty_like(a)  # [1024] static output
    adds, inner = 5, 2

    def step():
        with scope("attention"):
            for _ in range(adds - inner):
                torch.add(a, a, out=out)
            with scope("inner"):
                for _ in range(inner):
                    torch.add(a, a, out=out)

    export = node_budget(step, total=adds, per_scope={"attention": adds, "attention.inner": inner})
    assert export.source == "cuda-graph" and export.total == adds
    with pytest.raises(NodeBudgetExceeded) as e:
        node_budget(step, total=adds, per_scope={"attention": adds - 1})
    assert f"attention       {adds - 1}      {adds}    +1" in str(e.value)
    assert "counting CUDA graph nodes on" in str(e.value)

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        step()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph(keep_graph=True)
    with torch.cuda.graph(graph):
        step()
    nodes = read_graph(graph.raw_cuda_graph())
    assert [n.kind for n in nodes] == ["kernel"] * adds


@pytest.mark.gpu
def test_node_budget_on_the_round_pack(node_budget):
    # The fused pack is one kernel per stage (kernels/pack.py); the shipped one is eight
    # ops: a budget of one node per stage's pack (per match), or of one per stage summed,
    # holds the fused round and refuses the shipped.
    from graph_harness.capture import DecodeRound, RoundParams

    params = RoundParams(stages=3, rows=4, k=64, world=4, rank=2, shard=256, seed=7)
    budgets = {"stage*/pack": 1, "sum(stage*/pack)": params.stages}
    fused = DecodeRound(params, "fused", "cuda")
    export = node_budget(fused.run, per_scope=budgets)
    df = export.frame()
    assert df[df.step == "pack"].kernel.tolist() == ["_pack_flat_kernel"] * params.stages
    shipped = DecodeRound(params, "shipped", "cuda")
    with pytest.raises(NodeBudgetExceeded) as e:
        node_budget(shipped.run, per_scope=budgets)
    *each, summed = e.value.check.exceeded
    assert [(ln.name, ln.kind) for ln in each] == [
        (f"stage{s}/pack", budget.PER_MATCH) for s in range(params.stages)
    ]
    assert all(ln.nodes > 1 and "_pack_flat_kernel" not in dict(ln.kernels) for ln in each)
    assert (summed.name, summed.scopes) == ("sum(stage*/pack)", params.stages)
    assert summed.nodes == sum(ln.nodes for ln in each)
    assert "stage0/pack (per match of stage*/pack)" in str(e.value)
    assert "sum(stage*/pack) (sum of 3 scopes)" in str(e.value)
