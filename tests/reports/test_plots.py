"""The plots and report.md say what they count: axes name nodes or, on the CPU,
dispatches (from the export's source, reports/text.py's one word for it), count axes tick
at whole numbers, the dispatch-share legend sits outside the bars; the round's parameters
in report.md are a readable list; "1 export" is singular."""

import dataclasses

import pandas as pd
import pytest
from matplotlib.ticker import MaxNLocator

from graph_harness.capture import count_round
from graph_harness.capture.round.params import RoundParams, param_help
from graph_harness.reports import plots
from graph_harness.reports.report import header
from graph_harness.reports.text import plural

TINY = RoundParams(stages=2, rows=2, k=4, world=2, shard=16)


@pytest.fixture(scope="module")
def exports():
    return {v: count_round(TINY, v).export for v in ("shipped", "fused")}


def _integer(axis) -> bool:
    loc = axis.get_major_locator()
    return isinstance(loc, MaxNLocator) and loc._integer


def as_graph(e):
    return dataclasses.replace(e, source="cuda-graph")


def test_nodes_per_stage_says_dispatches_on_the_cpu_and_ticks_whole(exports, figures, tmp_path):
    cpu = list(exports.values())
    assert {e.source for e in cpu} == {"cpu-dispatch"}  # the CPU counts here, as labelled
    plots.nodes_per_stage(cpu, tmp_path / "a.png")
    plots.nodes_per_stage([as_graph(e) for e in cpu], tmp_path / "b.png")
    (cpu_ax,), (gpu_ax,) = (f.axes for f in figures)
    assert cpu_ax.get_ylabel() == "dispatches per stage (CPU)"
    assert "nodes" not in (cpu_ax.get_ylabel() + cpu_ax.get_title()).lower()
    assert gpu_ax.get_ylabel() == "nodes per stage" and gpu_ax.get_title().startswith("Nodes")
    assert _integer(cpu_ax.yaxis) and _integer(gpu_ax.yaxis)
    ticks = cpu_ax.get_yticks()
    assert len(ticks) >= 2 and all(t == int(t) for t in ticks)


def test_the_report_waterfall_counts_with_the_exports_word(exports, figures, tmp_path):
    from graph_harness.reports.report import delta_section

    delta_section(tmp_path, exports)
    (ax,) = figures[-1].axes
    assert ax.get_ylabel() == "dispatches per round" and ax.get_title().endswith("dispatches")
    assert _integer(ax.yaxis)


def test_nodes_per_module_axis_from_the_source(figures, tmp_path):
    # the bars are each scope's own (tests/reports/test_depths.py: the report's own), and say so
    per_module = pd.DataFrame(
        dict(name=["a", "a", "b", "b"], scope=["layers.0", "layers.1"] * 2, own=[3, 4, 3, 1])
    )
    plots.nodes_per_module(per_module, 2, tmp_path / "a.png", "cpu-dispatch")
    plots.nodes_per_module(per_module, None, tmp_path / "b.png", "cuda-graph")
    (cpu_ax,), (gpu_ax,) = (f.axes for f in figures)
    assert cpu_ax.get_xlabel() == "own dispatches (CPU)" and gpu_ax.get_xlabel() == "own nodes"
    assert cpu_ax.get_title().startswith("Own dispatches") and "depth 2" in cpu_ax.get_title()
    assert "cut at 2 parts" in cpu_ax.get_ylabel() and "every level" in gpu_ax.get_ylabel()
    assert _integer(cpu_ax.xaxis) and _integer(gpu_ax.xaxis)


def test_dispatch_share_legend_covers_no_bar(figures, tmp_path):
    scopes = pd.DataFrame(
        dict(
            depth=[1] * 6,
            scope=["topk", "pack", "select"] * 2,
            variant=["shipped"] * 3 + ["fused"] * 3,
            dispatch_share=[0.9, 0.95, 0.99, 0.5, 0.6, 0.97],  # long bars, up to the edge
        )
    )
    plots.dispatch_share(scopes, tmp_path / "d.png")
    (fig,) = figures
    (ax,) = fig.axes
    fig.canvas.draw()
    legend = ax.get_legend().get_window_extent()
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["shipped", "fused"]
    bars = [p.get_window_extent() for p in ax.patches]
    assert len(bars) == 6
    assert not any(legend.overlaps(b) for b in bars)
    assert not legend.overlaps(ax.get_window_extent())  # beside the plot, not on it


def test_round_parameters_in_the_report_are_a_list(exports):
    lines = header(exports, command="graph-harness report --out r")
    text = "\n".join(lines)
    assert "{" not in text and "'stages'" not in text  # no dict repr
    i = lines.index("- round parameters:")
    listed = lines[i + 1 : i + 1 + len(param_help())]
    for line, (name, what) in zip(listed, param_help().items()):
        assert line == f"  - `{name} = {getattr(TINY, name)}`: {what}"


def test_plural():
    assert [plural(n, "export") for n in (0, 1, 2)] == ["0 exports", "1 export", "2 exports"]
    assert [plural(n, "index", "indices") for n in (1, 3)] == ["1 index", "3 indices"]
