"""PNG plots of measured data. Input: export documents and replay frames; no measuring."""

from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from graph_harness.capture import NodeExport
from graph_harness.capture.attribution.rollup import ROOT, tree_order
from graph_harness.capture.files import write_output
from graph_harness.capture.scopes.names import UNSCOPED
from graph_harness.reports.text import counted, plot_label, plural

if TYPE_CHECKING:
    from types import ModuleType
    from typing import Any

    from matplotlib.axes import Axes
    from matplotlib.axis import Axis
    from matplotlib.figure import Figure

    from graph_harness.capture.sweep.document import SweepResult


def _plt() -> ModuleType:
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Figure, path: Path) -> Path:
    # Rendered in memory, then written beside and renamed in (capture/files.py): an
    # interrupted run leaves no half file, and the output folder lists it first.
    png = io.BytesIO()
    fig.savefig(png, dpi=120, bbox_inches="tight", format="png")
    _plt().close(fig)
    write_output(path, png.getvalue())
    return path


def _whole_numbers(axis: Axis) -> None:
    """Ticks at whole numbers only: the axis counts nodes (or dispatches)."""
    from matplotlib.ticker import MaxNLocator

    axis.set_major_locator(MaxNLocator(integer=True))


def _legend_outside(ax: Axes, **kwargs: Any) -> None:
    """The legend right of the plot, never over its bars (_save's tight bounding box
    takes it in)."""
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, **kwargs)


def _labelled(wide: pd.DataFrame) -> pd.DataFrame:
    """A frame whose index and columns (scopes, export names) label a plot."""
    return wide.set_axis(map(plot_label, wide.index), axis=0).set_axis(
        map(plot_label, wide.columns), axis=1
    )


def chain_fits(chain_trials: pd.DataFrame, fits: pd.DataFrame, path: Path) -> Path:
    """Replay time against chain length, medians per length, with the fitted line."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 5))
    med = chain_trials.groupby(["kind", "nodes"]).us.median().reset_index()
    for i, f in enumerate(fits.itertuples()):
        pts = med[med.kind == f.kind]
        color = f"C{i % 10}"
        ax.plot(pts.nodes, pts.us, "o", color=color, ms=4)
        xs = [0, pts.nodes.max()]
        ax.plot(
            xs,
            [f.intercept + f.slope * x for x in xs],
            "-",
            color=color,
            lw=1,
            label=plot_label(f"{f.kind}: {f.slope:.3f} us/node (R² {f.r2:.5f})"),
        )
    ax.set_xlabel("nodes in the graph")
    ax.set_ylabel("replay time (us), median over trials")
    ax.set_title("Per-node dispatch cost: replay time vs chain length")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return _save(fig, path)


def nodes_per_stage(exports: list[NodeExport], path: Path) -> Path:
    """Mean nodes per stage, stacked by step, one bar per variant."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    labels = [plot_label(e.variant or e.workload) for e in exports]
    bottoms = [0.0] * len(exports)
    for j, step in enumerate(exports[0].step_order):
        heights = []
        for e in exports:
            df = e.frame()
            stages = max(df.stage.nunique(), 1)
            heights.append((df.step == step).sum() / stages)
        if not any(heights):
            continue
        ax.bar(labels, heights, bottom=bottoms, label=step, color=f"C{j}")
        bottoms = [b + h for b, h in zip(bottoms, heights)]
    for i, b in enumerate(bottoms):
        ax.text(i, b, f"{b:g}", ha="center", va="bottom", fontsize=8)
    src = exports[0].source
    word = counted(src)
    ax.set_ylabel(f"{word} per stage" + (" (CPU)" if src == "cpu-dispatch" else ""))
    ax.set_title(f"{word.capitalize()} per stage by step ({src})")
    _whole_numbers(ax.yaxis)
    _legend_outside(ax, fontsize=8)
    plt.setp(ax.get_xticklabels(), rotation=15)
    return _save(fig, path)


def waterfall(
    steps: list[tuple[str, float]],
    start: tuple[str, float],
    end: tuple[str, float],
    unit: str,
    title: str,
    path: Path,
    *,
    whole: bool = False,
) -> Path:
    """From `start` through each (label, change) to `end`; `whole`: the changes are counts
    (ticks at whole numbers)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.bar(0, start[1], color="C7")
    level = start[1]
    names = [plot_label(start[0])]
    for i, (name, change) in enumerate(steps, start=1):
        ax.bar(i, change, bottom=level, color="C2" if change < 0 else "C3")
        ax.text(
            i,
            level + change,
            f"{change:+.4g}",
            ha="center",
            va="top" if change < 0 else "bottom",
            fontsize=8,
        )
        level += change
        names.append(plot_label(name))
    ax.bar(len(steps) + 1, end[1], color="C0")
    names.append(plot_label(end[0]))
    ax.text(0, start[1], f"{start[1]:.5g}", ha="center", va="bottom", fontsize=8)
    ax.text(len(steps) + 1, end[1], f"{end[1]:.5g}", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(names)), names, rotation=15)
    ax.set_ylabel(unit)
    ax.set_title(title)
    if whole:
        _whole_numbers(ax.yaxis)
    return _save(fig, path)


def nodes_per_module(
    per_module: pd.DataFrame, depth: int | None, path: Path, source: str = "cuda-graph"
) -> Path:
    """Each scope's own nodes (`own`: in it and in no scope below it down to `depth`; at
    `depth`, everything under it; None: every level), one bar group per scope, one bar per
    export (`name`): bars that sum to the total, so not a parent's total beside its
    children's, and labelled own. `source`: the exports' (nodes, or dispatches on the CPU)."""
    plt = _plt()
    wide = per_module.pivot_table(index="scope", columns="name", values="own", fill_value=0)
    wide = wide[list(dict.fromkeys(per_module.name))]  # exports in the order given
    wide = wide.loc[sorted(wide.index, key=tree_order)]  # layers.2 before layers.10
    # the root's own are the nodes in no scope: its bar says so, not "(all)" (every node)
    wide = _labelled(wide.rename(index={ROOT: UNSCOPED}))
    fig, ax = plt.subplots(figsize=(8, max(3.0, 0.3 * len(wide) + 1)))
    wide.iloc[::-1].plot.barh(ax=ax, width=0.8)
    word = counted(source)
    cut = "every level" if depth is None else f"cut at {plural(depth, 'part')}"
    ax.set_xlabel(f"own {word}" + ("" if source == "cuda-graph" else " (CPU)"))
    ax.set_ylabel(f"module (qualified name, {cut})")
    to = "" if depth is None else f" down to depth {depth}"
    ax.set_title(f"Own {word} per module ({source}): none of a submodule's{to}")
    _whole_numbers(ax.xaxis)
    ax.grid(alpha=0.3, axis="x")
    return _save(fig, path)


def dispatch_share(scopes: pd.DataFrame, path: Path) -> Path:
    """Dispatch share (gaps over cost) per scope, one bar per profiled graph: the round's
    steps, or a step's scope tree (a profile's scope table) at its deepest level: where
    its tables cut it (one bar per layer by default: layers.3), so the plot shows the
    level the tables and the nodes plot do; a table of every level, its deepest scopes."""
    plt = _plt()
    df = scopes
    if (df.depth > 0).any():  # a scope tree: one level of it, not the root
        df = df[df.depth == int(df.depth.max())]
    wide = df.pivot_table(index="scope", columns="variant", values="dispatch_share")
    wide = wide[list(dict.fromkeys(df.variant))]  # graphs in the order profiled
    wide = wide.reindex(list(dict.fromkeys(df.scope)))  # scopes in table order
    wide = _labelled(wide)
    fig, ax = plt.subplots(figsize=(8, max(3.0, 0.3 * len(wide) * max(1, wide.shape[1]) ** 0.5)))
    (100 * wide.iloc[::-1]).plot.barh(ax=ax, width=0.8)
    ax.set_xlabel("dispatch share: gaps before nodes / (their durations + gaps), %")
    ax.set_ylabel("scope")
    ax.set_title("Where the GPU waits for dispatch (CUPTI, in-round)")
    ax.grid(alpha=0.3, axis="x")
    _legend_outside(ax, fontsize=7)
    return _save(fig, path)


def sweep(result: SweepResult, path: Path) -> Path:
    """Replay time (with its 95% interval) and graph memory (own pool) against batch size,
    the sizes chosen for the first request distribution marked."""
    plt = _plt()
    rows = [r for r in result.rows if r.replay_us is not None]
    batch = [r.batch for r in rows]
    fc = result.forecast if result.forecast is not None and result.forecast.ladders else None
    fig, axes = plt.subplots(1, 3 if fc else 2, figsize=(16.5 if fc else 11, 4))
    ax_t, ax_m = axes[0], axes[1]
    if fc:
        _forecast_panel(axes[2], fc)
    err = [[r.replay_us - r.replay_lo for r in rows], [r.replay_hi - r.replay_us for r in rows]]
    ax_t.errorbar(batch, [r.replay_us for r in rows], yerr=err, marker="o", capsize=3)
    ax_t.set(xlabel="batch size", ylabel="replay, us (median, 95% interval)", xscale="log")
    ax_t.set_title(plot_label(f"{result.name}: replay time per size"), fontsize=10)
    own = [r for r in rows if r.reserved is not None]  # none: Inductor's one pool
    if own:
        ax_m.plot([r.batch for r in own], [r.reserved / 2**20 for r in own], marker="o",
                  label="own pool")  # fmt: skip
    if result.shared:
        shared = sorted(
            (s for s in result.shared if s.adds is not None), key=lambda s: s.batch
        )  # a first size's addition can be unknown (Inductor's pool: capture/sweep/sizes.py)
        ax_m.plot(
            [s.batch for s in shared], [s.adds / 2**20 for s in shared],
            marker="s", label="adds to the shared pool (largest first)",
        )  # fmt: skip
    ax_m.set(xlabel="batch size", ylabel="graph memory, MiB", xscale="log")
    ax_m.set_title("graph memory per size", fontsize=10)
    if result.padding:
        for b in result.padding[0].chosen:
            for ax in (ax_t, ax_m):
                ax.axvline(b, color="grey", linestyle=":", linewidth=1)
        ax_t.text(
            0.01, 0.98, plot_label(f"dotted: chosen for {result.padding[0].requests}"),
            transform=ax_t.transAxes, va="top", fontsize=8,
        )  # fmt: skip
    if fc:  # a third panel to its right: the legend inside
        ax_m.legend(loc="upper left", fontsize=7)
    else:
        _legend_outside(ax_m)
    return _save(fig, path)


def _forecast_panel(ax: object, fc: object) -> None:
    """The sizes swept, in capture order: the graphs' memory so far (shared pool plus
    executables) predicted, its interval, and the truth; the totals' error in the title
    (or that none was measured)."""
    lf = fc.ladders[0]
    rows = sorted(lf.rows, key=lambda r: r.batch)
    batch = [r.batch for r in rows]
    ax.fill_between(batch, [r.total_lo / 2**20 for r in rows], [r.total_hi / 2**20 for r in rows],
                    alpha=0.25, label="predicted interval")  # fmt: skip
    ax.plot(batch, [r.total / 2**20 for r in rows], marker="o", label="predicted")
    true = [r for r in rows if r.true_total is not None]
    if true:
        ax.plot([r.batch for r in true], [r.true_total / 2**20 for r in true], marker="s",
                label="true")  # fmt: skip
    if lf.vllm is not None:
        ax.axhline(lf.vllm / 2**20, color="grey", linestyle="--", linewidth=1,
                   label="vLLM's method, total")  # fmt: skip
    ax.set(xlabel="batch size (captured largest first)", ylabel="graphs so far, MiB",
           xscale="log")  # fmt: skip
    sampled = ", ".join(map(str, fc.sampled))
    ax.set_title(plot_label(f"predicted from {sampled}: total {fc.error_note(lf)}"), fontsize=10)
    _legend_outside(ax)


def padding(result: SweepResult, path: Path) -> Path:
    """Per request distribution, each ladder's time per step: an exact-size graph's part
    and what padding adds."""
    plt = _plt()
    n = len(result.padding)
    fig, axes = plt.subplots(1, n, figsize=(5.5 * n, 3.8), squeeze=False)
    for ax, p in zip(axes[0], result.padding):
        names = [c.name + (" *" if c.interpolated else "") for c in p.ladders]
        exact = [c.exact_us for c in p.ladders]
        lost = [c.lost_us for c in p.ladders]
        ax.bar(names, exact, label="an exact-size graph")
        ax.bar(names, lost, bottom=exact, label="lost to padding")
        for i, c in enumerate(p.ladders):
            ax.text(i, c.expected_us, f"{100 * c.padding_share:.0f}% rows padded",
                    ha="center", va="bottom", fontsize=8)  # fmt: skip
        ax.set(ylabel="replay us per step")
        ax.set_title(plot_label(f"requests {p.requests}"), fontsize=10)
        ax.tick_params(axis="x", labelrotation=15)
    _legend_outside(axes[0][-1])
    fig.text(0.01, -0.04, "* interpolated between measured sizes", fontsize=8)
    return _save(fig, path)


def recorded_graphs(table: pd.DataFrame, path: Path, *, top: int = 40) -> Path:
    """Nodes and replays of each recorded graph (`table`: a recording's graphs.csv rows,
    in capture order; the first `top`), side by side on two axes."""
    plt = _plt()
    rows = table.head(top)
    labels = [plot_label(f"{p} {n}") for p, n in zip(rows["process"], rows["name"])]
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, max(3, 0.28 * len(rows) + 1.5)), sharey=True)
    ys = range(len(rows))
    a.barh(ys, rows["nodes"], color="C0")
    a.set_xlabel("nodes")
    b.barh(ys, rows["replays"], color="C1")
    b.set_xlabel("replays")
    a.set_yticks(list(ys), labels, fontsize=7)
    a.invert_yaxis()
    for ax in (a, b):
        _whole_numbers(ax.xaxis)
        ax.grid(axis="x", alpha=0.3)
    more = f" (the first {top} of {len(table)})" if len(table) > top else ""
    fig.suptitle(f"Recorded graphs: nodes and replays{more}")
    return _save(fig, path)
