"""The profiler's excess fitted to a graph's own event timing (capture/profile/fit.py), the
bases the net figures take, and a pair priced at A's excess on both sides
(capture/profile/pairs.py): synthetic replays whose profiler adds a known cost to every
gap, the timed periods written down from how the replays were built."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from graph_harness.capture.profile.calibration import EXCESS_COLUMNS, Excess
from graph_harness.capture.profile.fit import fit_to_timing, with_bases
from graph_harness.capture.profile.nodes import profile_windows
from graph_harness.capture.profile.pairs import price_pair
from tests.capture.profile.synthetic import export_of, node, windows_of

GAP = 0.5  # every gap as the synthetic CUPTI shows it


def _profile(name, durs, pdl=()):
    nodes = [node(i, "kernel", f"k{i}", [i - 1] if i else [], ["m"]) for i in range(len(durs))]
    for i in pdl:
        nodes[i]["programmatic_deps"] = [i - 1]
    n = range(len(durs))
    return profile_windows(
        name, export_of(nodes), windows_of(nodes, n, dict(zip(n, durs)), dict.fromkeys(n, GAP))
    )


def _timed(durs, excess):
    """The event-timed period of a graph of `durs` whose every gap CUPTI lengthens by
    `excess`: what the synthetic replays would take without the profiler."""
    return sum(durs) + (GAP - excess) * len(durs)


def _trials(times, n=24, noise=0.0, seed=0):
    rng = np.random.default_rng(seed)
    rows = [
        dict(variant=v, build=0, trial=t, us=m + rng.normal(0, noise))
        for v, m in times.items()
        for t in range(n)
    ]
    return pd.DataFrame(rows)


def _spread(times, spread, n=13):
    """Trials whose medians are exactly `times` (n odd) but spread evenly by +-`spread`,
    the two graphs' in opposite directions: the saving's point is exact, its interval wide."""
    lin = np.linspace(-1, 1, n)
    rows = [
        dict(variant=v, build=0, trial=t, us=m + sign * spread * lin[t])
        for (v, m), sign in zip(times.items(), (1, -1))
        for t in range(n)
    ]
    return pd.DataFrame(rows)


def _chains(x):
    table = pd.DataFrame(
        [dict(type="kernel", chain="gemm", rounds=8, us_per_node=x, us_per_node_lo=x - 0.05,
              us_per_node_hi=x + 0.05)],
        columns=EXCESS_COLUMNS,
    )  # fmt: skip
    return Excess({"kernel": x}, table)


DA = [4.0, 1.0, 1.0, 1.0, 6.0, 2.0]
DB = [4.0, 1.0, 6.0, 2.0]  # two 1-us kernels removed


def test_the_fit_is_the_profiled_less_the_timed_period_over_the_nodes():
    x = 0.17
    p = _profile("a", DA)
    fit = fit_to_timing(p, _trials({"a": _timed(DA, x)}, noise=0.02).us.to_numpy())
    assert fit.nodes == len(DA) and fit.per_node == pytest.approx(x, abs=0.01)
    lo, hi = fit.interval
    assert lo < fit.per_node < hi and lo < x < hi
    (got,) = with_bases({"a": p}, _trials({"a": _timed(DA, x)}), None).values()
    s = got.summary()
    # its net period is its timed one by construction; its gaps lose x each
    assert got.excess_basis == "timing" and s["excess_per_node_us"] == pytest.approx(x)
    assert s["period_net_us"] == pytest.approx(_timed(DA, x))
    assert np.allclose(got.nodes.gap_net_us, GAP - x)
    assert s["dispatch_share_net"] == pytest.approx((GAP - x) * len(DA) / _timed(DA, x))


def test_each_graph_takes_its_own_timing_else_the_chains_else_nothing():
    a, b, c = _profile("a", DA), _profile("b", DB), _profile("c", DB, pdl=[2])
    trials = _trials({"a": _timed(DA, 0.2), "c": _timed(DB, 0.2)})
    got = with_bases({"a": a, "b": b, "c": c}, trials, _chains(0.1))
    assert [got[n].excess_basis for n in "abc"] == ["timing", "chains", "chains"]
    assert got["a"].excess_per_node() == pytest.approx(0.2)
    assert got["b"].excess == {"kernel": 0.1} and len(got["b"].excess_bounds) == 2
    assert fit_to_timing(c, trials.us.to_numpy()) is None  # a PDL node's gap is no launch's
    bare = with_bases({"b": b}, None, None)["b"]
    assert bare.excess_basis == "" and not bare.calibrated
    assert math.isnan(bare.summary()["period_net_us"])


# A's profiler adds 0.2 us a node, B's y: the measured saving is 2.6 + (y - 0.2) x 34 us,
# the prediction (A's excess on both sides) 2.6. 0.202: 2.55% off, with the predicted
# interval of zero width (the synthetic replays are exact) missing the measured saving: a
# pass all the same, that interval being sampling noise only. 0.0 and -0.2: B's period
# 2.1% and 4.0% off, B timed slower than A: a fail, not hidden behind B's period check.
@pytest.mark.parametrize(
    "y, verdict", [(0.2, "pass"), (0.202, "pass"), (0.26, "fail"), (0.02, "fail"), (0.0, "fail"),
                   (-0.2, "fail")]
)  # fmt: skip
def test_a_pair_takes_a_excess_on_both_sides_and_its_error_is_b_net_period_error(y, verdict):
    x = 0.2
    long_a, long_b = DA + [10.0] * 30, DB + [10.0] * 30  # a long B: its period barely moves
    ta, tb = _timed(long_a, x), _timed(long_b, y)
    profiles = with_bases(
        {"a": _profile("a", long_a), "b": _profile("b", long_b)}, _trials({"a": ta, "b": tb}), None
    )
    row = price_pair(profiles["a"], profiles["b"], _trials({"a": ta, "b": tb}))
    measured = ta - tb
    nb = len(long_b)
    assert row.basis == "timing" and row.measured_us == pytest.approx(measured)
    # by hand: B net of A's excess lasts tb + (y - x) nb, so the saving comes out that short
    assert row.predicted_net_us == pytest.approx(measured - (y - x) * nb)
    assert row.b_net_vs_timed == pytest.approx((y - x) * nb / tb)
    assert row.verdict == verdict, row.why
    assert y == x or not row.measured_in_interval


def test_a_measured_saving_not_known_to_the_tolerance_cannot_pass_or_fail_inside_it():
    x = 0.2
    long_a, long_b = DA + [10.0] * 30, DB + [10.0] * 30
    ta, tb = _timed(long_a, x), _timed(long_b, x)  # the saving is 2.6 us
    graphs = {"a": _profile("a", long_a), "b": _profile("b", long_b)}

    def priced(trials):
        profiles = with_bases(graphs, trials, None)
        return price_pair(profiles["a"], profiles["b"], trials)

    row = priced(_spread({"a": ta, "b": tb}, 0.6))
    lo, hi = row.measured_lo, row.measured_hi
    assert hi - lo > 0.06 * row.measured_us  # wider than the tolerance either side
    assert row.predicted_net_us == pytest.approx(row.measured_us)
    assert row.verdict == "cannot tell" and "not known to 3%" in row.why
    # a prediction far outside even that interval still fails: B's timed period 2 us
    # shorter (0.6% of it, within the period check; 2 us more saved than predicted)
    far = priced(_spread({"a": ta, "b": tb - 2.0}, 0.6))
    assert not far.measured_lo <= far.predicted_net_us <= far.measured_hi
    assert far.verdict == "fail", far.why


def test_a_timing_basis_says_its_net_period_matches_by_construction(tmp_path):
    from rich.console import Console

    from graph_harness.capture.profile.document import ProfileResult
    from graph_harness.reports.profile_tables import net_period_notes, net_table, pairs_table

    trials = _trials({"a": _timed(DA, 0.2), "b": _timed(DB, 0.2)})
    chains = _chains(0.1)
    profiles = with_bases({"a": _profile("a", DA), "b": _profile("b", DB)}, trials, chains)
    result = ProfileResult(
        profiles=profiles, excess=chains, round_trials=trials, pairs=[("a", "b")]
    )
    s = result.summary().set_index("name")
    # its net period is its timed one by construction: shown as no test (NaN), not a 0%
    assert (s.excess_basis == "timing").all() and np.allclose(s.period_net_us, s.timed_us)
    assert s.period_net_vs_timed.isna().all()
    # the chains' 0.1 us a node would leave a's period 0.1 x 6 nodes over its timed one
    assert s.period_chains_vs_timed["a"] == pytest.approx(0.1 * len(DA) / _timed(DA, 0.2))
    notes = net_period_notes(result)
    assert len(notes) == 2 and all("by construction" in n for n in notes)
    assert f"{100 * s.period_chains_vs_timed['a']:+.2f}% off" in notes[0]
    texts = []
    for t in (net_table(result), pairs_table(result.pair_table())):
        console = Console(record=True, width=250)
        console.print(t)
        texts.append(console.export_text())
    net, pairs = texts
    assert "timing" in net and "0.200" in net and "fitted to it" in net and "0.00%" not in net
    assert "B net vs timed" in pairs
    written = result.write(tmp_path)
    pairs = pd.read_csv(tmp_path / "profile-pairs.csv")
    assert "profile-pairs.csv" in written and pairs.basis.tolist() == ["timing"]
    summary = pd.read_csv(tmp_path / "profile-summary.csv")
    assert summary.excess_per_node_us.tolist() == pytest.approx([0.2, 0.2])


def test_the_report_gives_each_graph_its_basis_and_no_zero_as_a_match(tmp_path):
    from graph_harness.capture import count_round
    from graph_harness.capture.profile.document import ProfileResult
    from graph_harness.capture.round.params import RoundParams
    from graph_harness.reports.report import write_report
    from tests.capture.profile.variants import A, B, _variant

    p = RoundParams(stages=2, rows=2, k=32, world=2, rank=1, shard=64)
    exports = {v: count_round(p, v, "cpu").export for v in ("shipped", "fused")}
    costs = {"shipped": sum(c for *_, c in A), "fused": sum(c for *_, c in B)}
    # timed without the profiler: every gap 0.2 us shorter than the profiles' 0.5
    trials = _trials({v: costs[v] + 0.3 * len(n) for v, n in (("shipped", A), ("fused", B))})
    profiles = with_bases(
        {"shipped": _variant("shipped", A), "fused": _variant("fused", B)}, trials, None
    )
    profile = ProfileResult(profiles=profiles, round_trials=trials, pairs=[("shipped", "fused")])
    write_report(tmp_path, exports, None, command="graph-harness report", profile=profile)
    dispatch = pd.read_csv(tmp_path / "dispatch.csv").set_index("name")
    assert (dispatch.excess_basis == "timing").all()
    assert dispatch.excess_per_node_us.to_numpy() == pytest.approx([0.2, 0.2])
    assert dispatch.period_net_vs_timed.isna().all()  # by construction: no test, not a 0%
    md = (tmp_path / "report.md").read_text()
    assert "fitted to each graph's own event-timed period" in md and "| timing |" in md
