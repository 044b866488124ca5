"""The profiler's own cost per node (capture/profile/calibration.py) and the figures net
of it (capture/profile/nodes.py, rollup.py, pairs.py): the arithmetic on the CPU with
synthetic replays whose profiler adds a known cost to every gap, and the measurement on
a GPU (the chains' node counts read two ways)."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from graph_harness.capture.profile.calibration import (
    CHAIN_NODES,
    ROW_COLUMNS,
    excess_per_node,
    measure_excess,
)
from graph_harness.capture.profile.document import ProfileResult
from graph_harness.capture.profile.nodes import profile_windows
from graph_harness.capture.profile.pairs import price_pair
from tests.capture.profile.synthetic import export_of, node, windows_of

gpu = pytest.mark.gpu


def _rows(per_node, fixed=3.0, rounds=6, noise=0.0, seed=0):
    """Calibration rows of chains whose profiled period is the timed one plus `fixed` per
    replay and `per_node[t]` per node."""
    rng = np.random.default_rng(seed)
    rows = []
    for t, x in per_node.items():
        for r in range(rounds):
            for n in CHAIN_NODES:
                timed = 1.3 * n + rng.normal(0, noise)
                period = timed + fixed + x * n + rng.normal(0, noise)
                rows.append(dict(type=t, round=r, nodes=n, timed_us=timed, period_us=period))
    return pd.DataFrame(rows, columns=ROW_COLUMNS)


def test_the_excess_per_node_is_the_slope_and_leaves_the_fixed_cost_out():
    got = excess_per_node(_rows({"kernel": 0.11, "memcpy": 0.14}, fixed=5.0))
    assert got.per_node == pytest.approx({"kernel": 0.11, "memcpy": 0.14})
    table = got.table.set_index("type")
    assert list(table.chain) == ["gemm", "memcpy"] and (table.rounds == 6).all()
    assert got.total(["kernel", "kernel", "memcpy", "event-record"]) == pytest.approx(0.36)
    assert math.isnan(got.of("memset"))  # has activities, was not measured: unknown, not 0
    corners = got.bounds()  # each type at either end of its interval
    assert len(corners) == 4 and {c["kernel"] for c in corners} == {
        table.us_per_node_lo["kernel"],
        table.us_per_node_hi["kernel"],
    }


def test_the_interval_covers_the_spread_over_rounds():
    got = excess_per_node(_rows({"kernel": 0.1}, noise=0.5, rounds=12)).table.iloc[0]
    assert got.us_per_node_lo < got.us_per_node < got.us_per_node_hi
    assert got.us_per_node_lo < 0.1 < got.us_per_node_hi


@pytest.mark.parametrize(
    "rows, message",
    [
        (pd.DataFrame({"type": ["kernel"], "nodes": [32]}), "lack columns"),
        (_rows({"kernel": 0.1}).query("nodes == 32"), "two chain lengths"),
    ],
)
def test_bad_calibration_rows_are_refused(rows, message):
    with pytest.raises(ValueError, match=message):
        excess_per_node(rows)


def test_no_types_or_no_rounds_measure_nothing():
    assert measure_excess(["event-record"], 4).per_node == {}
    assert measure_excess(["kernel"], 0).table.empty


# --- the figures net of it ---------------------------------------------------------------

X = 0.2  # the synthetic profiler's cost per node, us


def _profile(name, durs, gap=0.5, excess=None):
    nodes = [node(i, "kernel", f"k{i}", [i - 1] if i else [], ["m"]) for i in range(len(durs))]
    dur = dict(enumerate(durs))
    ws = windows_of(nodes, range(len(durs)), dur, dict.fromkeys(range(len(durs)), gap))
    return profile_windows(name, export_of(nodes), ws, excess)


def test_net_figures_are_the_raw_less_the_excess_of_every_node():
    durs = [3.0, 1.0, 2.0, 1.5]
    p = _profile("g", durs, excess={"kernel": X})
    s = p.summary()
    n = len(durs)
    assert s["excess_us"] == pytest.approx(X * n)
    assert s["period_net_us"] == pytest.approx(s["period_us"] - X * n)
    assert s["gap_net_us"] == pytest.approx(0.5 * n - X * n)
    assert s["dispatch_share_net"] == pytest.approx((0.5 - X) * n / (sum(durs) + (0.5 - X) * n))
    assert s["dispatch_share_net_lo"] <= s["dispatch_share_net"] <= s["dispatch_share_net_hi"]
    assert np.allclose(p.nodes.gap_net_us, 0.5 - X) and np.allclose(p.nodes.excess_us, X)
    scopes = ProfileResult(profiles={"g": p}).scope_table()
    root = scopes.iloc[0]
    assert root.gap_net_us == pytest.approx((0.5 - X) * n)
    assert root.dispatch_share_net == pytest.approx(s["dispatch_share_net"])


def test_without_a_calibration_every_net_figure_is_nan_not_the_raw():
    p = _profile("g", [1.0, 2.0])
    s = p.summary()
    assert not p.calibrated
    for k in ("excess_us", "period_net_us", "gap_net_us", "dispatch_share_net"):
        assert math.isnan(s[k]), k
    assert p.nodes.gap_net_us.isna().all()
    assert ProfileResult(profiles={"g": p}).scope_table().gap_net_us.isna().all()


def _trials(a_us, b_us, n=20):
    return pd.DataFrame(
        [dict(variant=v, build=0, trial=t, us=m) for v, m in (("a", a_us), ("b", b_us))
         for t in range(n)]
    )  # fmt: skip


def test_a_pair_is_judged_net_of_the_profiler_where_both_were_calibrated():
    da, db = [3.0, 1.0, 1.0, 1.0, 2.0], [3.0, 1.0, 2.0]  # B drops two 1-us kernels
    a, b = _profile("a", da, excess={"kernel": X}), _profile("b", db, excess={"kernel": X})
    # measured without the profiler: every gap X shorter than CUPTI shows it
    timed = _trials(sum(da) + (0.5 - X) * len(da), sum(db) + (0.5 - X) * len(db))
    row = price_pair(a, b, timed)
    assert row.basis == "chains" and row.passed
    assert row.predicted_net_us == pytest.approx(row.measured_us)
    assert row.predicted_us - row.predicted_net_us == pytest.approx(2 * X)
    assert row.error == pytest.approx(2 * X / row.measured_us)
    # B's own calibration is not used: both sides take A's excess
    assert price_pair(a, _profile("b", db), timed).predicted_net_us == pytest.approx(
        row.predicted_net_us
    )
    # A uncalibrated: no net prediction, the raw one shown unjudged (it is off by the
    # excess of the two removed nodes by construction)
    raw = price_pair(_profile("a", da), b, timed)
    assert raw.basis == "raw" and math.isnan(raw.predicted_net_us)
    assert not raw.within_tolerance and raw.verdict == "not judged"


@gpu
def test_measure_excess_on_the_gpu():
    got = measure_excess(["kernel", "memcpy", "event-record"], 2)
    rows = got.rows
    assert set(got.per_node) == {"kernel", "memcpy"}
    assert sorted(rows.nodes.unique()) == sorted(CHAIN_NODES)  # read from the graphs
    assert len(rows) == 2 * 2 * len(CHAIN_NODES)
    assert (rows.timed_us > 0).all() and (rows.period_us > 0).all()
    assert all(math.isfinite(x) for x in got.per_node.values())


# --- several types, a replay left unmatched, PDL ------------------------------------------


def _mixed(types, excess, drop=None, pdl=()):
    """A serial graph of `types` (durations 1, 2, ...; gaps 0.5) profiled over 2 windows of
    5 replays; `drop` = (window, replay, position): that activity left out of the trace."""
    nodes = [
        node(i, t, f"k{i}" if t == "kernel" else "", [i - 1] if i else [], ["m"])
        for i, t in enumerate(types)
    ]
    for i in pdl:
        nodes[i]["programmatic_deps"] = [i - 1]
    dur = {i: 1.0 + i for i in range(len(types))}
    ws = windows_of(nodes, range(len(types)), dur, dict.fromkeys(range(len(types)), 0.5))
    if drop:
        w, r, k = drop
        del ws[w].replays[r][k]
    return profile_windows("g", export_of(nodes), ws, excess), dur


def test_each_node_takes_its_own_types_excess_and_an_unmatched_replay_has_no_net_figure():
    types = ["kernel", "memcpy", "kernel", "kernel"]
    p, dur = _mixed(types, {"kernel": 0.2, "memcpy": 0.5}, drop=(1, 3, 2))
    # by hand: three kernels at 0.2 and a copy at 0.5 take 1.1 us off each replay
    period = sum(dur.values()) + 0.5 * len(types)
    net = p.net.assign(window=p.replays.window.to_numpy(), replay=p.replays.replay.to_numpy())
    dropped = (net.window == 1) & (net.replay == 3)
    assert dropped.sum() == 1 and net[dropped].period_net_us.isna().all()
    kept = net[~dropped]
    assert np.allclose(kept.excess_us, 1.1) and np.allclose(kept.period_net_us, period - 1.1)
    assert p.summary()["period_net_us"] == pytest.approx(period - 1.1)  # NaN left out
    assert dict(zip(p.nodes.node, p.nodes.excess_us)) == pytest.approx(
        {0: 0.2, 1: 0.5, 2: 0.2, 3: 0.2}
    )


def test_a_type_with_activities_but_no_measured_excess_leaves_every_net_figure_unknown():
    p, _ = _mixed(["kernel", "memset", "kernel"], {"kernel": 0.2})
    assert p.net.period_net_us.isna().all() and math.isnan(p.summary()["dispatch_share_net"])
    assert math.isnan(p.nodes.set_index("node").excess_us[1])


def test_a_programmatic_dependent_has_no_net_figure():
    p, _ = _mixed(["kernel", "kernel", "kernel"], {"kernel": 0.2}, pdl=[2])
    assert math.isnan(p.node_excess[2]) and p.net.period_net_us.isna().all()


# --- verdicts -----------------------------------------------------------------------------


def _calibrated(lo, hi, x=X):
    from graph_harness.capture.profile.calibration import EXCESS_COLUMNS, Excess

    table = pd.DataFrame(
        [dict(type="kernel", chain="gemm", rounds=8, us_per_node=x,
              us_per_node_lo=lo, us_per_node_hi=hi)],
        columns=EXCESS_COLUMNS,
    )  # fmt: skip
    return Excess({"kernel": x}, table)


def _pair(timed_a_extra=0.0, lo=X, hi=X):
    da, db = [3.0, 1.0, 1.0, 1.0, 2.0], [3.0, 1.0, 2.0]
    a, b = _profile("a", da, excess={"kernel": X}), _profile("b", db, excess={"kernel": X})
    a = replace(a, excess_bounds=_calibrated(lo, hi).bounds())
    timed = _trials(sum(da) + (0.5 - X) * len(da) + timed_a_extra, sum(db) + (0.5 - X) * len(db))
    return price_pair(a, b, timed)


def test_an_excess_whose_interval_straddles_the_tolerance_cannot_tell():
    ok = _pair()
    assert ok.verdict in ("pass", "fail") and ok.within_tolerance
    wide = _pair(lo=0.0, hi=0.4)  # 2 removed nodes: the saving moves by -0.4 .. +0.4 us
    assert wide.verdict == "cannot tell" and not wide.passed
    assert wide.net_low < wide.predicted_net_us < wide.net_high


def test_a_graph_whose_net_period_misses_its_timed_one_cannot_tell():
    row = _pair(timed_a_extra=-1.0)  # A's timed period 1 us (> 2%) below its net one
    assert row.verdict == "cannot tell" and "a ran more than 2%" in row.why


def _host(a_us, b_us, n=10):
    """Host launch trials (HOST_LAUNCH_COLUMNS), a trial's drift shared by both graphs."""
    drift = np.linspace(0.0, 3.0, n)
    return pd.DataFrame(
        [dict(variant=v, trial=t, us=m + drift[t]) for v, m in (("a", a_us), ("b", b_us))
         for t in range(n)]
    )  # fmt: skip


def _exposed_pair(monkeypatch, launches, host=None, timed=None, after_profiler=False):
    """_pair's graphs (2 nodes removed), each graph's exposure verdict as `launches` says;
    `timed`: the event-timed periods (A, B), default the device's (net of the excess)."""
    from graph_harness.capture.profile.nodes import VariantProfile

    monkeypatch.setattr(
        VariantProfile, "exposure", lambda self, _h=None: (launches[self.name], "as set")
    )
    da, db = [3.0, 1.0, 1.0, 1.0, 2.0], [3.0, 1.0, 2.0]
    a, b = _profile("a", da, excess={"kernel": X}), _profile("b", db, excess={"kernel": X})
    a = replace(a, excess_bounds=_calibrated(X, X).bounds())
    ta, tb = timed or (sum(da) + (0.5 - X) * len(da), sum(db) + (0.5 - X) * len(db))
    return price_pair(a, b, _trials(ta, tb), host, host_after_profiler=after_profiler)


def test_a_pair_whose_launches_are_both_exposed_is_priced_by_the_host_launches(monkeypatch):
    # The loop runs at the host's pace: 15.0 and 8.0 us a replay, the device's 9.5 and
    # 6.9 us of work hidden under it; the device's 2.6 us saving is not what it saves.
    both = {"a": "exposed", "b": "exposed"}
    row = _exposed_pair(monkeypatch, both, _host(15.0, 8.0), timed=(15.0, 8.0))
    assert row.predicted_net_us == pytest.approx(2.6)  # the device's, shown
    assert row.measured_us == pytest.approx(7.0)
    assert row.host_saving_us == pytest.approx(7.0)  # paired by trial: the drift cancels
    assert row.host_saving_lo == pytest.approx(7.0) and row.host_saving_hi == pytest.approx(7.0)
    assert row.predicted_launch_us == pytest.approx(7.0)
    assert row.verdict == "pass" and row.why.startswith("both launches exposed")
    assert (row.launch_a, row.launch_b) == ("exposed", "exposed")
    # a host saving 10% off the measured one fails, whatever the device's price says
    off = _exposed_pair(monkeypatch, both, _host(15.0, 8.7), timed=(15.0, 8.0))
    assert off.verdict == "fail" and off.predicted_launch_us == pytest.approx(6.3)
    # trials joined by number, not by row order: shuffled rows price the same
    shuffled = _host(15.0, 8.0).sample(frac=1.0, random_state=3)
    again = _exposed_pair(monkeypatch, both, shuffled, timed=(15.0, 8.0))
    assert again.host_saving_lo == pytest.approx(7.0) and again.verdict == "pass"
    # launches timed after a profiler session read high: never a verdict from them
    late = _exposed_pair(monkeypatch, both, _host(15.0, 8.0), (15.0, 8.0), after_profiler=True)
    assert late.verdict == "cannot tell" and "after a profiler session" in late.why
    # no host launch times: an exposed pair's price is not known
    blind = _exposed_pair(monkeypatch, both, None, timed=(15.0, 8.0))
    assert blind.verdict == "cannot tell" and blind.why.startswith("both launches exposed")
    assert "not timed" in blind.why
    assert math.isnan(blind.predicted_launch_us) and math.isnan(blind.host_saving_us)


def test_one_exposed_launch_cannot_tell_and_hidden_ones_take_the_device_price(monkeypatch):
    mixed = _exposed_pair(monkeypatch, {"a": "hidden", "b": "exposed"}, _host(10.0, 9.0))
    assert mixed.verdict == "cannot tell" and "b's launch is exposed, a's not" in mixed.why
    assert math.isnan(mixed.predicted_launch_us)
    # hidden launches: the host saving is shown, not used; the device price passes
    hidden = {"a": "hidden", "b": "hidden"}
    row = _exposed_pair(monkeypatch, hidden, _host(10.0, 9.0))
    assert row.host_saving_us == pytest.approx(1.0) and math.isnan(row.predicted_launch_us)
    assert row.verdict == "pass" and "exposed" not in row.why
    # the same pair, its measured saving moved by the host's 1 us: judged on the device's
    moved = _exposed_pair(monkeypatch, hidden, _host(10.0, 9.0), timed=(10.5, 6.9))
    assert moved.verdict != "pass" and not moved.within_tolerance


def test_profile_excess_csv_and_the_net_tables_are_written_and_shown(tmp_path):
    from rich.console import Console

    from graph_harness.reports.profile_tables import excess_table, net_period_notes, net_table

    a, b = _profile("a", [3.0, 1.0, 2.0], excess={"kernel": X}), _profile("b", [3.0, 1.0])
    excess = _calibrated(0.15, 0.25)
    result = ProfileResult(
        profiles={"a": a, "b": b}, excess=excess, round_trials=_trials(8.0, 5.0), pairs=[("a", "b")]
    )
    names = result.write(tmp_path)
    assert "profile-excess.csv" in names
    assert pd.read_csv(tmp_path / "profile-excess.csv").us_per_node.tolist() == [X]
    assert "period_net_us" in pd.read_csv(tmp_path / "profile-replays.csv")
    trace = (tmp_path / "trace.json").read_text()
    assert '"gap_net_us"' in trace
    console = Console(record=True, width=200)
    for t in (excess_table(result), net_table(result)):
        console.print(t)
    text = console.export_text()
    assert "0.200" in text and "[0.150, 0.250]" in text and "round net" in text
    notes = net_period_notes(result)
    # a: net ~6.9 against 8.0 timed; b is uncalibrated, so no line for it
    assert len(notes) == 1 and "MORE than 2% off" in notes[0]
    doc = result.to_dict()
    assert doc["excess"][0]["type"] == "kernel" and doc["calibration"]["note"] is None
    # b is not calibrated, and priced at a's excess anyway; a's net period is 14% off
    pair = result.pair_table().iloc[0]
    assert pair.basis == "chains" and pair.verdict == "cannot tell" and "a and b ran" in pair.why


def test_no_calibration_writes_no_excess_file(tmp_path):
    names = ProfileResult(profiles={"a": _profile("a", [1.0, 2.0])}).write(tmp_path)
    assert "profile-excess.csv" not in names and not (tmp_path / "profile-excess.csv").exists()
