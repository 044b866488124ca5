"""One depth and one `own` for every output of a user's step (issue 31, item 9): count's
table, report.md's table, scopes-NAME.csv, nodes_per_module.csv and its plot cut the scope
tree at the same depth (one row per layer without DEPTH, else DEPTH), and agree on each
scope's `nodes` (all under it) and `own` (in it and in no scope below it that is shown; at
the cut, everything under it). The numbers they must show are counted here another way:
from each node's `scope` alone, not through capture/attribution/rollup.py."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from graph_harness.capture import NodeExport
from graph_harness.capture.profile.document import ProfileResult
from graph_harness.capture.profile.nodes import profile_windows
from graph_harness.reports.cli.args import BLOCKS, shown_depth
from graph_harness.reports.target_report import write_target_report
from tests.capture.profile.synthetic import chain, export_of, windows_of

REPO = Path(__file__).resolve().parents[2]
# HF's nesting (`model.layers.N` is depth 3), and a `model` with nodes of its own (the
# rotary embedding's, the causal mask's) under children that have theirs: the model the
# issue was seen on, where `model`'s bar (its own) and its table row (its total) differ.
SPEC = f"{REPO / 'examples' / 'hf_decode.py'}:make_tiny_step"
NAME = "make_tiny_step"  # report's name for it (reports/cli/target.py output_names)
LAYER_DEPTH = 3
ROOT, UNSCOPED = "(all)", "unscoped"
# A step five levels deep, by the modules' qualified names alone (no blocks recorded):
# unscoped work, a layer's own, its attention's own and one of its projections.
PATHS = [
    (),
    ("layers.0",),
    ("layers.0", "layers.0.attention"),
    ("layers.0", "layers.0.attention", "layers.0.attention.wq.lora"),
    ("layers.1", "layers.1.feed_forward", "layers.1.feed_forward.w1"),
    ("norm",),
]


def run(*args):
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}  # output is piped
    env.update(PYTHONPATH=str(REPO), CUDA_VISIBLE_DEVICES="")
    r = subprocess.run(
        [sys.executable, "-m", "graph_harness", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert r.returncode == 0, r.stderr
    return r


def expected(doc: dict, depth: int | None) -> dict[str, tuple[int, int]]:
    """scope -> (nodes, own) of the tree cut at `depth`, from each counted node's innermost
    label: every label of an eager module path extends the one before it (`model`,
    `model.layers`, `model.layers.0`: tests/capture/attribution/test_module_tree.py checks
    it), so the label's dot-separated parts are the node's place in the tree."""
    out: dict[tuple, list[int]] = {}
    for n in doc["nodes"]:
        if n["type"] in ("view", "alloc"):  # not counted (NodeExport.frame)
            continue
        parts = () if n["scope"] == UNSCOPED else tuple(n["scope"].split("."))
        cut = parts[:depth] if depth is not None else parts
        for d in range(len(cut) + 1):
            out.setdefault(cut[:d], [0, 0])[0] += 1
        out[cut][1] += 1  # its own: the deepest scope shown that holds it
    assert sum(own for _, own in out.values()) == doc["total_nodes"]
    return {(".".join(p) if p else ROOT): (t, o) for p, (t, o) in out.items()}


def count_table(stdout: str) -> dict[str, tuple[int, int]]:
    """scope -> (nodes, own) as count prints its scope tree."""
    block = stdout[stdout.index("nodes by scope") : stdout.index("nodes by type and kernel")]
    rows = {}
    for line in block.splitlines():
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if cells and cells[0] not in ("", "scope"):
            rows[cells[0]] = (int(cells[1]), int(cells[2]))
    return rows


def report_table(md: str, name: str = NAME) -> dict[str, tuple[int, int]]:
    """scope -> (nodes, own) as report.md's table of `name` shows it."""
    lines = md[md.index(f"### {name}: nodes by scope") :].splitlines()[2:]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = {}
    for line in lines[2:]:
        if not line.startswith("|"):
            break
        r = dict(zip(head, (c.strip() for c in line.strip("|").split("|"))))
        rows[r["scope"]] = (int(r["nodes"]), int(r["own"]))
    return rows


def csv_table(path: Path) -> dict[str, tuple[int, int]]:
    df = pd.read_csv(path, keep_default_na=False)
    return {r.scope: (int(r.nodes), int(r.own)) for r in df.itertuples()}


def owns(table: dict[str, tuple[int, int]]) -> dict[str, int]:
    """What nodes_per_module.csv and its plot must hold: the table's nonzero owns."""
    return {s: own for s, (_, own) in table.items() if own}


def plotted(fig) -> dict[str, float]:
    """A one-export barh plot's bars: label -> length (the plot's data, as drawn)."""
    (ax,) = fig.axes
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert len(labels) == len(ax.patches)
    return dict(zip(labels, (p.get_width() for p in ax.patches)))


def check_report(folder: Path, want: dict, fig) -> str:
    """report.md's table, scopes-NAME.csv, nodes_per_module.csv and its plot (`fig`, as
    drawn) against `want` (scope -> (nodes, own)); report.md's text."""
    md = (folder / "report.md").read_text()
    assert report_table(md) == want
    assert csv_table(folder / f"scopes-{NAME}.csv") == want
    per_module = pd.read_csv(folder / "nodes_per_module.csv", keep_default_na=False)
    assert list(per_module.columns) == ["name", "scope", "own"]  # own, and named so
    assert dict(zip(per_module.scope, per_module.own)) == owns(want)
    # the root's own are the unscoped nodes: so its bar is named
    assert plotted(fig) == {UNSCOPED if s == ROOT else s: v for s, v in owns(want).items()}
    (ax,) = fig.axes
    assert ax.get_xlabel().startswith("own ") and ax.get_title().startswith("Own ")
    return md


def test_count_report_csvs_and_plot_cut_at_one_depth_and_agree(figures, tmp_path):
    """One test, not one per depth: the example's five runs happen once, on one worker."""
    r = run("count", "--target", SPEC, "--module-scopes", "--out", str(tmp_path / "count"))
    doc = json.loads((tmp_path / "count" / "nodes-target.json").read_text())
    e = NodeExport.from_dict(doc)
    assert doc["options"]["block_depth"] == LAYER_DEPTH == shown_depth(BLOCKS, [e])
    want = expected(doc, LAYER_DEPTH)
    # the case: `model` owns nodes, and its total is far more than its own
    assert 0 < want["model"][1] < want["model"][0]
    assert "model.layers.0" in want and max(s.count(".") for s in want) == LAYER_DEPTH - 1
    assert count_table(r.stdout) == want
    # report, without DEPTH: the same cut, the same numbers
    run("report", "--target", SPEC, "--module-scopes", "--out", str(tmp_path / "report"))
    # (its plot, as drawn: of the same export, whose report.md is the CLI's)
    (tmp_path / "mine").mkdir()
    write_target_report(tmp_path / "mine", {NAME: e}, command="x")
    (fig,) = figures
    md = check_report(tmp_path / "report", want, fig)
    assert f"sit deeper than depth {LAYER_DEPTH}" in md
    assert plotted(fig)["model"] == want["model"][1] != want["model"][0]  # own, not total
    assert f"cut at {LAYER_DEPTH} parts" in fig.axes[0].get_ylabel()
    mine = (tmp_path / "mine" / "report.md").read_text()
    assert mine[mine.index("## Nodes per call") :] == md[md.index("## Nodes per call") :]
    for flag in ("2", "4", "all"):  # an explicit DEPTH: count's, and the report's with it
        depth = shown_depth(None if flag == "all" else int(flag), [e])
        want = expected(doc, depth)
        r = run("count", "--target", SPEC, "--module-scopes", flag)
        assert count_table(r.stdout) == want, flag
        folder = tmp_path / f"at-{flag}"
        folder.mkdir()
        write_target_report(folder, {NAME: e}, command="x", depth=depth)
        check_report(folder, want, figures[-1])
    # at 4 (the issue's own that differed): a layer's attention owns all under it
    attn = expected(doc, 4)["model.layers.0.self_attn"]
    assert attn[1] == attn[0] > expected(doc, None)["model.layers.0.self_attn"][1]


def test_without_depth_the_report_cuts_where_count_does(figures, tmp_path):
    # one default (reports/tables.py default_depth), whatever the step: the blocks' depth,
    # else every level; a report with a default of its own would cut these five levels
    deep = export_of(chain([f"k{i}" for i in range(len(PATHS))], PATHS))
    layered = NodeExport.from_dict({**deep.to_dict(), "options": {"block_depth": 1}})
    for i, e in enumerate((deep, layered)):
        depth = shown_depth(BLOCKS, [e])  # count's table without DEPTH
        assert depth == (None, 1)[i]
        (tmp_path / str(i)).mkdir()
        write_target_report(tmp_path / str(i), {"m": e}, command="x")
        assert csv_table(tmp_path / str(i) / "scopes-m.csv") == expected(e.to_dict(), depth)
        (ax,) = figures[i].axes
        assert ax.get_ylabel().endswith("every level)" if depth is None else "cut at 1 part)")


@pytest.mark.parametrize("depth", [3, 4])
def test_the_dispatch_plot_shows_the_level_the_tables_cut_at(figures, tmp_path, depth):
    # a step profiled on a GPU (here from synthetic CUPTI times): its dispatch-share plot
    # is one bar per scope at the depth report.md's tables show, not a level of its own
    paths = PATHS
    nodes = chain([f"k{i}" for i in range(len(paths))], paths)
    dur = {i: 1.0 + i for i in range(len(paths))}
    gap = {i: 0.1 * (i + 1) for i in range(len(paths))}
    p = profile_windows("m", export_of(nodes), windows_of(nodes, range(len(paths)), dur, gap))
    write_target_report(
        tmp_path,
        {"m": p.export},
        command="x",
        profile=ProfileResult(profiles={"m": p}),
        depth=depth,
    )
    by_scope = pd.read_csv(tmp_path / "dispatch_by_scope.csv")
    assert by_scope.depth.max() == depth
    _, share = figures
    bars = plotted(share)
    assert set(bars) == set(by_scope[by_scope.depth == depth].scope)
    assert set(bars) <= set(csv_table(tmp_path / "scopes-m.csv"))  # the nodes table's scopes


def test_report_cuts_where_count_does_for_an_explicit_depth(tmp_path):
    r = run("count", "--target", SPEC, "--module-scopes", "4")
    run("report", "--target", SPEC, "--module-scopes", "4", "--out", str(tmp_path / "r"))
    assert report_table((tmp_path / "r" / "report.md").read_text()) == count_table(r.stdout)
