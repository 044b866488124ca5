"""Rich tables of an in-round profile (capture/profile/document.py). Renders; never measures."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import pandas as pd
from rich.table import Table

from graph_harness.capture.profile.calibration import PERIOD_TOLERANCE
from graph_harness.capture.profile.document import ProfileResult
from graph_harness.capture.profile.nodes import TIMING
from graph_harness.capture.profile.pairs import FAIL, NOT_MEASURED, TOLERANCE
from graph_harness.reports.kernel_names import short_names

if TYPE_CHECKING:
    from collections.abc import Callable


def _us(x: float, digits: int = 1) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def _pct(x: float, digits: int = 1) -> str:
    return "-" if x is None or math.isnan(x) else f"{100 * x:.{digits}f}%"


def _span(lo: float, hi: float, fmt: Callable[[float], str]) -> str:
    return "-" if math.isnan(lo) or math.isnan(hi) else f"[{fmt(lo)}, {fmt(hi)}]"


def summary_table(result: ProfileResult) -> Table:
    """Per graph: how its activities matched, its round time under CUPTI and timed by
    events, its work and gaps, and its dispatch share, as CUPTI saw them (raw)."""
    s = result.summary()
    t = Table(title="In-round profile (CUPTI, raw): median per replay, us")
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


def net_table(result: ProfileResult) -> Table | None:
    """Per graph the same figures net of the profiler's own cost (None where the run did
    not measure it): where the excess came from and what it is per node, the excess taken
    out, the round, gaps and dispatch share net, and the net round against the timed one."""
    if not any(p.calibrated for p in result.profiles.values()):
        return None
    s = result.summary()
    t = Table(title="Net of the profiler's own cost: median per replay, us")
    cols = ["graph", "basis", "per node", "95% interval", "excess", "round net", "timed"]
    cols += ["net vs timed", "gaps net", "dispatch net", "95% interval "]
    for c in cols:
        t.add_column(c, justify="left" if c in ("graph", "basis") else "right", no_wrap=True)
    for r in s.itertuples():
        t.add_row(
            r.name,
            r.excess_basis or "-",
            _us(r.excess_per_node_us, 3),
            _span(r.excess_per_node_lo, r.excess_per_node_hi, lambda x: _us(x, 3)),
            _us(r.excess_us),
            _us(r.period_net_us),
            _us(getattr(r, "timed_us", math.nan)),
            "fitted to it"
            if r.excess_basis == TIMING
            else _pct(getattr(r, "period_net_vs_timed", math.nan), 2),
            _us(r.gap_net_us),
            _pct(r.dispatch_share_net, 2),
            _span(r.dispatch_share_net_lo, r.dispatch_share_net_hi, lambda x: _pct(x, 2)),
        )
    return t


def net_period_notes(result: ProfileResult) -> list[str]:
    """A line per event-timed graph with net figures: on its own timing's basis, that its
    net period matches by construction and how far the chains' excess alone would leave
    it; on the chains', how far its net period lies from the timed one, and whether that
    is within PERIOD_TOLERANCE."""
    s = result.summary()
    if "period_net_vs_timed" not in s:
        return []
    tol = f"{100 * PERIOD_TOLERANCE:.0f}%"
    out = []
    for r in s.itertuples():
        off = r.period_net_vs_timed
        if r.excess_basis == TIMING and not math.isnan(r.timed_us):
            chains = getattr(r, "period_chains_vs_timed", math.nan)
            out.append(
                f"{r.name}: its excess, {_us(r.excess_per_node_us, 3)} us per node, is fitted to "
                f"its own event-timed period ({_us(r.timed_us)} us), which its net period so "
                "matches by construction"
                + ("" if math.isnan(chains) else f"; the chains' excess would leave it "
                   f"{100 * chains:+.2f}% off")
                + "; a pair that starts from it is judged on the other graph's period"
            )  # fmt: skip
            continue
        if math.isnan(off):
            continue
        within = abs(off) <= PERIOD_TOLERANCE
        out.append(
            f"{r.name}: net of the profiler, a replay lasts {_us(r.period_net_us)} us against "
            f"{_us(r.timed_us)} us event-timed ({100 * off:+.2f}%, "
            + (
                f"within {tol})"
                if within
                else f"MORE than {tol} off: the per-node excess "
                "measured on the chains does not fit this graph; read its net figures with that)"
            )
        )
    return out


def launch_table(result: ProfileResult) -> Table | None:
    """Per graph, its launch: the host's side of it timed plain (from an idle device) and
    under the profiler, and whether it is hidden behind the replay before it when the graph
    is replayed back to back (capture/profile/exposure.py); None where the trace named no
    launch for any graph."""
    s = result.summary()
    if "launch" not in s or (s.launch == "unknown").all():
        return None
    t = Table(title="Launches, replayed back to back: median per replay, us")
    cols = ["graph", "host launch", "launch call (profiled)", "GPU idle before", "slack"]
    cols += ["waiting on the host", "launch"]
    for c in cols:
        t.add_column(c, justify="left" if c in ("graph", "launch") else "right", no_wrap=True)
    if result.options.get("host_launch_after_profiler"):
        t.caption = (
            "host launch: timed after a profiler session in this process, where it may read "
            "high (BENCHMARKS.md, issue 43); a fresh `graph-harness profile` times it first"
        )
    for r in s.itertuples():
        t.add_row(
            r.name,
            _us(r.host_launch_us, 2),
            _us(r.launch_us, 2),
            _us(r.lead_gap_us, 2),
            _us(-r.launch_late_us, 1),
            _us(r.exposed_us, 2),
            r.launch,
        )
    return t


def launch_notes(result: ProfileResult) -> list[str]:
    """A line per graph: its launch verdict and why."""
    s = result.summary()
    if "launch" not in s:
        return []
    return [f"{r.name}: launch {r.launch}: {r.launch_why}" for r in s.itertuples()]


def excess_table(result: ProfileResult) -> Table | None:
    """CUPTI's own cost per node as this run measured it (None where it did not)."""
    df = result.excess_table()
    if not len(df):
        return None
    t = Table(title="The profiler's own cost per node, measured on calibration chains (us)")
    for c in ("node type", "chain", "rounds", "excess per node", "95% interval"):
        t.add_column(c, justify="left" if c in ("node type", "chain") else "right", no_wrap=True)
    for r in df.itertuples():
        t.add_row(
            r.type,
            r.chain,
            str(r.rounds),
            _us(r.us_per_node, 3),
            _span(r.us_per_node_lo, r.us_per_node_hi, lambda x: _us(x, 3)),
        )
    return t


def scope_tables(result: ProfileResult, depth: int | None = None) -> list[Table]:
    """Per graph: execution against dispatch by step (the round) or by scope (a step's
    scope tree, to `depth`). Means per replay: rows at one level sum to their parent."""
    scopes = result.scope_table(depth)
    out = []
    for name, df in scopes.groupby("variant", sort=False):
        round_ = result.profiles[name].export.is_round
        net = result.profiles[name].calibrated
        gap, share = (
            ("gap us raw / net", "dispatch raw / net") if net else ("gap us", "dispatch share")
        )
        t = Table(title=f"{name}: execution and dispatch by {'step' if round_ else 'scope'}")
        for c in ("step" if round_ else "scope", "nodes", "exec us", gap, share):
            t.add_column(c, justify="left" if c in ("step", "scope") else "right", no_wrap=True)
        t.add_column("of the round" if round_ else "of the step", justify="right", no_wrap=True)
        for r in df.itertuples():
            label = r.scope if round_ or r.depth == 0 else "  " * (r.depth - 1) + r.scope
            gaps, shares = _us(r.gap_us, 2), _pct(r.dispatch_share)
            if net:
                gaps += f" / {_us(r.gap_net_us, 2)}"
                shares += f" / {_pct(r.dispatch_share_net)}"
            t.add_row(label, str(r.nodes), _us(r.exec_us, 2), gaps, shares, _pct(r.share))
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
    """Each change's saving priced from the profiles, raw and net of the profiler, against
    the measured one; the verdict is on the net prediction where there is one."""
    t = Table(
        title=f"Savings priced from the profiles against measured (us per replay; pass: the "
        f"prediction net of the profiler, both sides at A's excess, within {100 * TOLERANCE:.0f}% "
        "of the measured saving's whole interval at its point and both intervals' ends)"
    )
    cols = ["A -> B", "nodes", "predicted raw / net", "95% interval", "measured"]
    cols += ["95% interval ", "error raw / net", "B net vs timed", "host launch saving"]
    cols += ["verdict"]
    for c in cols:
        t.add_column(c, justify="left" if c in ("A -> B", "verdict") else "right", no_wrap=True)
    for r in pairs.itertuples():
        verdict = r.verdict.upper() if r.verdict == FAIL else r.verdict
        net = r.basis != "raw"
        lo, hi = (
            (r.predicted_net_lo, r.predicted_net_hi) if net else (r.predicted_lo, r.predicted_hi)
        )
        t.add_row(
            f"{r.a} -> {r.b}",
            f"{-r.removed_nodes:+d}",
            _us(r.predicted_us, 2) + (f" / {_us(r.predicted_net_us, 2)}" if net else ""),
            _span(lo, hi, lambda x: _us(x, 2)),
            _us(r.measured_us, 2),
            _span(r.measured_lo, r.measured_hi, lambda x: _us(x, 2)),
            _pct(r.error, 2) + (f" / {_pct(r.error_net, 2)}" if net else ""),
            _pct(r.b_net_vs_timed, 2),
            _host_saving(r),
            verdict,
        )
    return t


def _host_saving(r: Any) -> str:
    """A pair's host launch saving: the price where both launches are exposed
    (capture/profile/pairs.py), shown only otherwise."""
    if math.isnan(r.host_saving_us):
        return "-"
    shown = _us(r.host_saving_us, 2)
    return f"{shown} (the price: both exposed)" if not math.isnan(r.predicted_launch_us) else shown


def pair_verdicts(pairs: pd.DataFrame) -> list[str]:
    """A line per judged pair: its verdict and why (beside the table, which they would
    crowd out of a terminal's width)."""
    return [
        f"{r.a} -> {r.b}: {r.verdict.upper() if r.verdict == FAIL else r.verdict}: {r.why}"
        for r in pairs.itertuples()
        if r.verdict != NOT_MEASURED
    ]


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
