"""Rich tables of an in-round profile (capture/profile/document.py). Renders; never measures."""

from __future__ import annotations

import math

import pandas as pd
from rich.table import Table

from graph_harness.capture.profile.document import ProfileResult
from graph_harness.capture.profile.pairs import TOLERANCE
from graph_harness.reports.kernel_names import short_names


def _us(x: float, digits: int = 1) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def _pct(x: float, digits: int = 1) -> str:
    return "-" if x is None or math.isnan(x) else f"{100 * x:.{digits}f}%"


def _span(lo: float, hi: float, fmt) -> str:
    return "-" if math.isnan(lo) or math.isnan(hi) else f"[{fmt(lo)}, {fmt(hi)}]"


def summary_table(result: ProfileResult) -> Table:
    """Per graph: how its activities matched, its round time under CUPTI and timed by
    events, its work and gaps, and its dispatch share."""
    s = result.summary()
    t = Table(title="In-round profile (CUPTI): median per replay, us")
    cols = ["graph", "nodes", "matched", "replays", "round", "timed", "exec", "gaps"]
    cols += ["dispatch share", "95% interval", "overlap"]
    for c in cols:
        t.add_column(c, justify="left" if c in ("graph", "matched") else "right", no_wrap=True)
    for r in s.itertuples():
        timed = getattr(r, "timed_us", math.nan)
        t.add_row(
            r.name,
            str(r.nodes),
            f"{r.method}{'' if r.verified else ' (NOT verified)'}",
            str(r.replays),
            _us(r.period_us),
            _us(timed),
            _us(r.exec_us),
            _us(r.gap_us),
            _pct(r.dispatch_share, 2),
            _span(r.dispatch_share_lo, r.dispatch_share_hi, lambda x: _pct(x, 2)),
            _us(r.overlap_us, 2),
        )
    return t


def scope_tables(result: ProfileResult, depth: int | None = None) -> list[Table]:
    """Per graph: execution against dispatch by step (the round) or by scope (a step's
    scope tree, to `depth`). Means per replay: rows at one level sum to their parent."""
    scopes = result.scope_table(depth)
    out = []
    for name, df in scopes.groupby("variant", sort=False):
        round_ = result.profiles[name].export.is_round
        t = Table(title=f"{name}: execution and dispatch by {'step' if round_ else 'scope'}")
        for c in ("step" if round_ else "scope", "nodes", "exec us", "gap us", "dispatch share"):
            t.add_column(c, justify="left" if c in ("step", "scope") else "right", no_wrap=True)
        t.add_column("of the round" if round_ else "of the step", justify="right", no_wrap=True)
        for r in df.itertuples():
            label = r.scope if round_ or r.depth == 0 else "  " * (r.depth - 1) + r.scope
            t.add_row(
                label,
                str(r.nodes),
                _us(r.exec_us, 2),
                _us(r.gap_us, 2),
                _pct(r.dispatch_share),
                _pct(r.share),
            )
        out.append(t)
    return out


def top_gaps_tables(result: ProfileResult, top: int = 10) -> list[Table]:
    """Per graph: the nodes with the largest median gap before them."""
    nodes = result.node_table()
    names = short_names(nodes.kernel.fillna(""))
    out = []
    for name, df in nodes.groupby("variant", sort=False):
        t = Table(title=f"{name}: the {top} largest gaps (median us, 95% interval)")
        for c in ("node", "scope", "type", "kernel", "duration", "gap", "gap interval"):
            t.add_column(
                c,
                justify="left" if c in ("scope", "type", "kernel") else "right",
                no_wrap=c != "kernel",
                overflow="fold",
            )
        for r in df.sort_values("gap_us", ascending=False).head(top).itertuples():
            t.add_row(
                str(r.node),
                r.scope,
                r.type,
                names.get(r.kernel, r.kernel) if r.kernel else "-",
                _us(r.dur_us, 3),
                _us(r.gap_us, 3),
                _span(r.gap_lo, r.gap_hi, lambda x: _us(x, 3)),
            )
        out.append(t)
    return out


def pairs_table(pairs: pd.DataFrame) -> Table:
    t = Table(
        title=f"Savings priced from the profiles against measured (us per replay; pass: "
        f"within {100 * TOLERANCE:.0f}% and measured inside the predicted interval)"
    )
    cols = ["A -> B", "nodes", "predicted", "95% interval", "measured", "95% interval "]
    cols += ["error", "verdict"]
    for c in cols:
        t.add_column(c, justify="left" if c in ("A -> B", "verdict") else "right", no_wrap=True)
    for r in pairs.itertuples():
        if math.isnan(r.measured_us):
            verdict = "not measured"
        elif r.passed:
            verdict = "pass"
        else:
            why = [] if r.within_tolerance else [f"off by more than {100 * TOLERANCE:.0f}%"]
            why += [] if r.measured_in_interval else ["measured outside the interval"]
            verdict = "FAIL: " + "; ".join(why)
        t.add_row(
            f"{r.a} -> {r.b}",
            f"{-r.removed_nodes:+d}",
            _us(r.predicted_us, 2),
            _span(r.predicted_lo, r.predicted_hi, lambda x: _us(x, 2)),
            _us(r.measured_us, 2),
            _span(r.measured_lo, r.measured_hi, lambda x: _us(x, 2)),
            _pct(r.error, 2),
            verdict,
        )
    return t


def breakdown_table(breakdown: pd.DataFrame, a: str, b: str, top: int = 10) -> Table:
    """Where the predicted saving A -> B comes from: the common nodes whose cost moved
    most, then what was removed and added (mean us per replay)."""
    df = breakdown[(breakdown.a == a) & (breakdown.b == b)]
    common = df[df.part == "common"].head(top)
    rest = df[df.part != "common"].head(top)
    names = short_names(df.kernel)
    t = Table(title=f"{a} -> {b}: the nodes that disagree (common nodes whose cost moved most)")
    for c in ("part", "group", "type", "kernel", "nodes A", "nodes B", "A us", "B us", "saving"):
        t.add_column(
            c,
            justify="left" if c in ("part", "group", "type", "kernel") else "right",
            no_wrap=c != "kernel",
            overflow="fold",
        )
    for r in pd.concat([common, rest]).itertuples():
        t.add_row(
            r.part,
            r.group,
            r.type,
            names.get(r.kernel, r.kernel) or "-",
            str(r.nodes_a),
            str(r.nodes_b),
            _us(r.cost_a_us, 2),
            _us(r.cost_b_us, 2),
            f"{r.saving_us:+.2f}",
        )
    return t
