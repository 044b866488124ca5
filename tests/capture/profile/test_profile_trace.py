"""trace.json: the profile's first replays as a Trace Event Format timeline (Perfetto,
chrome://tracing).

`check_trace` holds the format to what Perfetto's JSON importer needs (the fields of each
phase, finite numbers, one pid per tid, names and sort indices for every process and
thread, flows paired) and then replays the importer itself on the text
(tests/capture/profile/perfetto_import.py, from Perfetto's source): every track's
slices side by side and every flow end bound to its node, under the importer's rounding
(std::llround(us * 1000) ns) and its older truncation alike, nothing kept where the
importer does not read it. The CPU tests build profiles from synthetic CUPTI activities
through the real matching and costing (tests/capture/profile/synthetic.py's
simulator), so the right timeline is known; the gpu tests run `profile --out` on real
CUPTI data and hold its trace.json to the same checks and sums."""

import json
import math
import os
import random
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from graph_harness.capture.profile.activities import Activity
from graph_harness.capture.profile.document import ProfileResult
from graph_harness.capture.profile.nodes import VariantProfile, Window, profile_windows
from graph_harness.capture.profile.settings import ProfileSettings
from graph_harness.capture.profile.trace import profile_trace, trace_text, track_of
from graph_harness.capture.round.params import STEPS
from graph_harness.reports.kernel_names import short_names
from tests.capture.profile.synthetic import (
    MODEL_PATHS,
    _model,
    _times,
    _windows,
    chain,
    export_of,
    node,
)

REPO = Path(__file__).resolve().parents[3]
META = {"process_name", "process_sort_index", "thread_name", "thread_sort_index"}
# How far a drawn edge is from CUPTI's time: the nearest nanosecond, written 0.2 ns past
# it (capture/profile/trace.py `_us`), and a hair for the float arithmetic.
GRID_US = 0.7e-3 + 1e-9


def drawn_as(e, start_us: float, dur_us: float) -> bool:
    """Whether slice `e` is drawn from `start_us` for `dur_us`, to the nanosecond grid,
    and holds both exactly in its args."""
    exact = e["args"]["start_us"] == start_us and e["args"]["dur_us"] == dur_us
    near = abs(e["ts"] - start_us) <= GRID_US
    return exact and near and abs(e["ts"] + e["dur"] - start_us - dur_us) <= 2 * GRID_US


def _finite(value, where="document"):
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return
    if isinstance(value, (int, float)):
        assert math.isfinite(value), f"{where}: {value}"
    elif isinstance(value, dict):
        for k, v in value.items():
            _finite(v, f"{where}.{k}")
    else:
        assert isinstance(value, list), f"{where}: {type(value)}"
        for i, v in enumerate(value):
            _finite(v, f"{where}[{i}]")


def check_trace(doc):
    """The format checks; returns (slices by (pid, tid), flows as (source, target)
    slices, process names by pid, thread names by (pid, tid) in sort order)."""
    from tests.capture.profile.perfetto_import import RULES, check_clean, imported

    text = trace_text(doc)  # as the file is written; NaN or an infinity raises here
    assert json.loads(text) == doc
    assert doc["otherData"]["schema"] == doc["metadata"]["schema"] == "graph-harness/trace"
    events = doc["traceEvents"]
    assert isinstance(events, list) and events
    _finite(doc)
    procs, sort_p, threads, sort_t = {}, {}, {}, {}
    slices, flows, owner = defaultdict(list), defaultdict(list), {}
    for e in events:
        assert e["ph"] in {"M", "X", "s", "f"}, e
        assert isinstance(e["name"], str) and e["name"], e
        assert type(e["pid"]) is int and e["pid"] > 0, e
        if e["ph"] == "M":
            args = e["args"]
            assert e["name"] in META, e
            if e["name"].startswith("process"):
                assert "tid" not in e, e  # the importer would read tid 0 as the pid
                if e["name"] == "process_sort_index":
                    assert type(args["sort_index"]) is int and e["pid"] not in sort_p, e
                    sort_p[e["pid"]] = args["sort_index"]
                else:
                    assert isinstance(args["name"], str) and args["name"], e
                    assert e["pid"] not in procs, e
                    procs[e["pid"]] = args["name"]
                continue
            key = (e["pid"], e["tid"])
            if e["name"] == "thread_name":
                assert isinstance(args["name"], str) and args["name"] and key not in threads, e
                threads[key] = args["name"]
            else:
                assert type(args["sort_index"]) is int and key not in sort_t, e
                sort_t[key] = args["sort_index"]
        else:
            assert type(e["tid"]) is int and e["tid"] > 0, e
            assert type(e["ts"]) in (int, float) and e["ts"] >= 0, e
            assert isinstance(e["cat"], str) and e["cat"], e
            key = (e["pid"], e["tid"])
            if e["ph"] == "X":
                assert type(e["dur"]) in (int, float) and e["dur"] >= 0, e
                assert isinstance(e["args"], dict), e
                slices[key].append(e)
            else:
                assert type(e["id"]) is int, e
                assert (e["ph"] == "f") == (e.get("bp") == "e"), e  # an end binds its slice
                flows[e["id"]].append(e)
        if "tid" in e:
            assert owner.setdefault(e["tid"], e["pid"]) == e["pid"], f"tid {e['tid']}: two pids"
    used = set(slices) | {(f["pid"], f["tid"]) for fs in flows.values() for f in fs}
    assert used <= set(threads) == set(sort_t), (used - set(threads), set(threads) ^ set(sort_t))
    assert {p for p, _ in threads} <= set(procs) == set(sort_p)
    assert not set(owner) & set(procs), "a tid equal to a pid reads as that process's own"
    for pid in procs:  # sort indices order the threads of a process one way only
        mine = [sort_t[k] for k in sort_t if k[0] == pid]
        assert len(set(mine)) == len(mine), pid
    bound = None
    for fs in flows.values():
        assert sorted(f["ph"] for f in fs) == ["f", "s"], fs  # one start, one end per id
        s, f = sorted(fs, key=lambda f: f["ph"] == "f")
        assert (s["cat"], s["name"]) == (f["cat"], f["name"]), fs  # Perfetto pairs by both
    check_clean(text)  # laid out side by side, every flow end bound, as the importer reads
    for rule in RULES.values():  # each flow joins the same two node slices either way
        imp = imported(text, rule)
        pairs = [(events[a], events[b]) for a, b in imp.flows]
        assert bound is None or pairs == bound
        bound = pairs
    names = {
        pid: [threads[k] for k in sorted((k for k in threads if k[0] == pid), key=sort_t.get)]
        for pid in procs
    }
    return slices, bound, procs, names


def replay_sums(slices, pid):
    """Per replay slice of process `pid`: (its period, the sum of its nodes' durations
    and gaps as CUPTI stamped them (their args), the sum of its drawn gap slices, its
    nodes' slices)."""
    out = {}
    for key, xs in slices.items():
        if key[0] != pid:
            continue
        for e in xs:
            r = e["args"]["replay"]
            row = out.setdefault(r, {"period": None, "cost": 0.0, "gaps": 0.0, "nodes": []})
            if e["cat"] == "replay":
                row["period"] = e["args"]["period_us"]
            elif e["cat"] == "gap":
                row["gaps"] += e["dur"]
            else:
                row["cost"] += e["args"]["dur_us"] + e["args"]["gap_us"]
                row["nodes"].append(e)
    return out


def drawn_gaps(row) -> float:
    """What a replay's gap slices should add up to: its nodes' positive gaps (a PDL launch
    that starts before its primary ends has a negative gap, and no slice)."""
    return sum(max(e["args"]["gap_us"], 0.0) for e in row["nodes"])


# --- synthetic profiles --------------------------------------------------------------

PATHS = MODEL_PATHS


def test_a_steps_trace_is_what_the_gpu_ran_and_each_replay_sums_to_its_period(tmp_path):
    p, ws, origins, dur, gap = _model()
    result = ProfileResult(profiles={"model": p}, options={"trace_replays": 3})
    names = result.write(tmp_path, 2, names=short_names)
    assert "trace.json" in names and (tmp_path / "trace.json").is_file()
    doc = json.loads((tmp_path / "trace.json").read_text())
    slices, flows, procs, threads = check_trace(doc)
    assert procs == {1: "model"}
    # tracks at depth 2 (as the tables cut), in the order the graph first runs them
    assert threads[1] == ["replays", "unscoped", "layers.0", "layers.1", "norm"]
    sums = replay_sums(slices, 1)
    assert sorted(sums) == [1, 2, 3]  # the first three sampled replays of window 0
    lead_in_end = origins[0]
    for r, row in sums.items():
        # every node's slice is its activity as CUPTI recorded it, less the window's origin:
        # exactly in its args, to the nearest nanosecond on the timeline
        acts = {int(a.name[1:]): a for a in ws[0].replays[r]}
        assert len(row["nodes"]) == len(PATHS)
        for e in row["nodes"]:
            a = acts[e["args"]["node"]]
            assert drawn_as(e, a.start_us - lead_in_end, a.end_us - a.start_us), e
        # one stream: durations and gaps sum to the period, to float precision ...
        assert math.isclose(row["cost"], row["period"], rel_tol=1e-12), (r, row)
        # ... which is the simulated replay's, made by another route (the clock reads
        # ~5e6 us here, where a float's step is ~1e-9 us: each stamp is that far off)
        want = sum(dur.values()) + sum(gap.values())
        assert math.isclose(row["period"], want, abs_tol=4 * len(PATHS) * 1e-9)
        # the drawn gap slices are the gaps, to the nanosecond grid
        assert abs(row["gaps"] - drawn_gaps(row)) <= 2e-3 * len(PATHS)
    # a chain: an arrow wherever consecutive nodes sit on different tracks, each replay
    track = [track_of(n, False, 2) for n in p.export.nodes]
    crossings = sum(track[i] != track[i - 1] for i in range(1, len(track)))
    assert len(flows) == 3 * crossings and crossings == 3
    for src, dst in flows:
        assert src["args"]["replay"] == dst["args"]["replay"]
        assert src["args"]["node"] == dst["args"]["node"] - 1  # the edge, node to node
    graph = doc["metadata"]["graphs"]["model"]
    assert graph["flows"] == len(flows) and graph["flows_within_tracks"] == 3 * (8 - crossings)


def test_innermost_scopes_without_a_depth_and_args_that_name_the_node():
    p, *_ = _model(kernels=["_ZN2at6native29vectorized_elementwise_kernelILi4EEEviT_"] * 9)
    doc = profile_trace({"m": p}, replays=1, names=short_names)
    slices, flows, _, threads = check_trace(doc)
    want = ["unscoped", "layers.0.attention", "layers.0.feed_forward", "layers.0"]
    want += ["layers.1.attention", "layers.1.feed_forward", "layers.1.feed_forward.sample", "norm"]
    assert threads[1] == ["replays", *want]
    nodes = [e for xs in slices.values() for e in xs if e["cat"] == "kernel"]
    assert len(nodes) == 9 and len(flows) == 7  # one replay: 8 edges, one within a track
    for e in nodes:
        rec = p.export.nodes[e["args"]["node"]]
        assert e["name"] == "vectorized_elementwise_kernel<4>" != rec["kernel"]
        assert e["args"]["kernel"] == rec["kernel"] and e["args"]["type"] == "kernel"
        assert e["args"]["scope_path"] == list(rec["scope_path"])
        assert abs(e["args"]["dur_us"] - e["dur"]) <= 2 * GRID_US


def test_the_round_has_a_track_per_step_in_step_order():
    steps = ["topk", "pack", "pack", "gather", "copy", "copy"]
    nodes = [
        node(6 * s + i, "memcpy" if step == "copy" else "kernel", f"{step}{i}", [6 * s + i - 1]
             if s or i else [], [f"stage{s}/{step}"], stage=s)
        for s in range(3)
        for i, step in enumerate(steps)
    ]  # fmt: skip
    dur, gap = _times(len(nodes))
    ws, _ = _windows(nodes, dur, gap, replays=4, windows=1)
    p = profile_windows("fused", export_of(nodes, "decode-round"), ws)
    slices, flows, _, threads = check_trace(profile_trace({"fused": p}, replays=2))
    assert threads[1] == ["replays", "topk", "pack", "gather", "copy"]
    assert set(threads[1][1:]) <= set(STEPS)
    copies = [e for xs in slices.values() for e in xs if e["cat"] == "memcpy"]
    assert len(copies) == 2 * 3 * 2 and {e["name"] for e in copies} == {"memcpy"}
    assert {e["args"]["stage"] for e in copies} == {0, 1, 2}
    # per stage topk->pack, pack->gather, gather->copy cross tracks, and copy->topk between
    # stages: 3 * 3 + 2 arrows per replay
    assert len(flows) == 2 * 11
    for r, row in replay_sums(slices, 1).items():
        assert math.isclose(row["cost"], row["period"], rel_tol=1e-12), (r, row)


def test_parallel_branches_overlap_on_a_second_lane():
    # a forks into b and c, in one scope, which run side by side; d joins them
    nodes = [
        node(0, "kernel", "a", [], ["x"]),
        node(1, "kernel", "b", [0], ["x"]),
        node(2, "kernel", "c", [0], ["x"]),
        node(3, "kernel", "d", [1, 2], ["y"]),
    ]
    reps = []
    for r in range(3):
        t = 100.0 + 20.0 * r
        reps.append(
            [
                Activity("kernel", "a", t + 1.0, t + 3.0, correlation=r),
                Activity("kernel", "b", t + 4.0, t + 9.0, correlation=r),
                Activity("kernel", "c", t + 5.0, t + 8.0, correlation=r),  # inside b's time
                Activity("kernel", "d", t + 11.0, t + 12.0, correlation=r),
            ]
        )
    p = profile_windows("fork", export_of(nodes), [Window(0, 0, reps)])
    doc = profile_trace({"fork": p}, replays=2)
    slices, flows, _, threads = check_trace(doc)
    assert threads[1] == ["replays", "x", "x (2)", "y"]
    assert len(flows) == 2 * 2  # b->d and c->d cross to y; a->b, a->c stay within x
    rows = replay_sums(slices, 1)
    # in parallel, durations and gaps exceed the period by the overlap (the profile's own)
    assert all(row["cost"] > row["period"] for row in rows.values())


def test_rounded_nanoseconds_never_overlap_a_gap_with_its_node():
    # Times on the H200's 1/1024 us grid, whose nanoseconds the importer rounds apart: the
    # gap before b runs from a's end (233/1024 us) to b's start (235/1024). Drawn as
    # (ts, dur) it reads llround(227.5390625) + llround(1.953125) = 230 ns, and b starts
    # at llround(229.4921875) = 229: inside the gap. Edges laid out in whole nanoseconds
    # share one: the gap is [228, 229) and b starts at 229.
    from tests.capture.profile.perfetto_import import RULES, round_ns

    a_end, b_start = 233 / 1024, 235 / 1024
    assert round_ns(repr(a_end)) + round_ns(repr(b_start - a_end)) > round_ns(repr(b_start))
    nodes = chain(["a", "b"], [("x",), ("x",)])
    lead = [Activity("kernel", "a", -3.0, -2.0, 0), Activity("kernel", "b", -1.0, 0.0, 0)]
    r1 = [Activity("kernel", "a", 0.1, a_end, 1), Activity("kernel", "b", b_start, 2.5, 1)]
    p = profile_windows("t", export_of(nodes), [Window(0, 0, [lead, r1])])
    doc = profile_trace({"t": p}, replays=1)
    slices, _, _, threads = check_trace(doc)  # side by side in the importer's ns, both rules
    assert threads[1] == ["replays", "x"]  # no second lane for a nanosecond
    assert doc["metadata"]["graphs"]["t"]["trimmed_slices"] == 0
    gaps = [e for xs in slices.values() for e in xs if e["cat"] == "gap"]
    assert len(gaps) == 2
    for e in gaps:  # drawn to the nanosecond grid; the exact gap in its args
        assert abs(e["dur"] - e["args"]["gap_us"]) <= 2 * GRID_US
    for rule in RULES.values():  # the gap ends where b starts, to the nanosecond
        gap, b = (next(e for xs in slices.values() for e in xs if e["args"].get(k) == 1)
                  for k in ("before node", "node"))  # fmt: skip
        assert rule.ts(repr(gap["ts"])) + rule.dur(repr(gap["dur"])) == rule.ts(repr(b["ts"]))


def test_a_gap_that_rounding_puts_into_its_neighbour_is_trimmed():
    # Two floats for one moment (a node's end, the next gap's start) can straddle a half
    # nanosecond: the gap then starts where the lane ends, a nanosecond later
    from graph_harness.capture.profile.trace_lanes import Lanes

    lanes = Lanes()
    assert lanes.node("x", 0, 10, None) == (0, None)
    assert lanes.node("x", 12, 20, 9) == (0, (10, 12))  # trimmed from 9, same lane
    assert lanes.node("x", 15, 30, 14) == (1, (14, 15))  # overlaps by more: a second lane
    assert lanes.trimmed == 1
    assert lanes.replay(0, 100) == (0, 100) and lanes.replay(99, 200) == (100, 200)
    assert lanes.trimmed == 2


def test_any_schedule_lays_out_laminar_with_every_node_once():
    # Random graphs run with branches side by side, stamped to the nanosecond as Kineto
    # writes them (3 decimals: what truncation makes the most of), nodes in two scopes.
    for case in range(25):
        n = random.randint(2, 14)
        deps = [sorted(random.sample(range(i), random.randint(0, min(i, 2)))) for i in range(n)]
        scopes = [[random.choice(["a", "b"])] for _ in range(n)]
        nodes = [node(i, "kernel", f"k{i}", deps[i], scopes[i]) for i in range(n)]
        reps, t = [], 0.0
        for r in range(4):
            starts = sorted(round(t + random.uniform(0.0, 30.0), 3) for _ in range(n))
            acts = [
                Activity("kernel", f"k{i}", s, round(s + random.uniform(0.001, 9.0), 3), r)
                for i, s in enumerate(starts)
            ]  # index order is start order: every dependency started first
            reps.append(acts)
            t = max(a.end_us for a in acts) + 0.5
        p = profile_windows("g", export_of(nodes), [Window(0, 0, reps)])
        assert p.matching["verified"], case
        slices, _, _, threads = check_trace(profile_trace({"g": p}, replays=3))
        rows = replay_sums(slices, 1)
        assert sorted(rows) == [1, 2, 3]
        for r, row in rows.items():
            assert sorted(e["args"]["node"] for e in row["nodes"]) == list(range(n)), case
            origin = max(a.end_us for a in reps[0])
            for e in row["nodes"]:
                a = reps[r][e["args"]["node"]]
                assert drawn_as(e, a.start_us - origin, a.end_us - a.start_us), (case, e)
            assert abs(row["gaps"] - drawn_gaps(row)) <= 2e-3 * n, case
        assert {t.split(" (")[0] for t in threads[1]} <= {"replays", "a", "b"}


def test_trace_replays_is_a_profile_setting():
    p, *_ = _model()
    assert ProfileSettings().trace_replays == 3
    with pytest.raises(ValueError, match="trace_replays must be a whole number >= 1"):
        ProfileSettings(trace_replays=0)
    for options, want in (({}, ProfileSettings().trace_replays), ({"trace_replays": 2}, 2)):
        slices, *_ = check_trace(ProfileResult(profiles={"m": p}, options=options).trace())
        assert sorted(replay_sums(slices, 1)) == list(range(1, want + 1))
    # more than a window holds: all of the first window's, nothing from the second
    slices, *_ = check_trace(profile_trace({"m": p}, replays=50))
    assert sorted(replay_sums(slices, 1)) == [1, 2, 3, 4, 5]


def test_profiles_without_start_times_still_give_their_tables_but_no_timeline():
    # start_us is new: a profile whose samples lack it (as made before) is read as before
    p, *_ = _model()
    samples, replays = p.samples.drop(columns="start_us"), p.replays.drop(columns="start_us")
    old = VariantProfile(p.name, p.export, samples, replays, p.matching)
    assert old.nodes.equals(p.nodes) and old.summary() == p.summary()
    a, b = ProfileResult(profiles={"m": p}).to_dict(), ProfileResult(profiles={"m": old}).to_dict()
    for key in ("summary", "nodes", "scopes", "matching"):
        assert a[key] == b[key], key
    with pytest.raises(ValueError, match="m: this profile keeps no start times.*profile it again"):
        ProfileResult(profiles={"m": old}).trace()


def test_two_graphs_are_two_processes_with_unique_ids():
    a, *_ = _model()
    b, *_ = _model()
    slices, flows, procs, threads = check_trace(profile_trace({"a": a, "b": b}, replays=2))
    assert procs == {1: "a", 2: "b"} and threads[1] == threads[2]
    assert {pid for pid, _ in slices} == {1, 2}
    track = [track_of(n, False, None) for n in a.export.nodes]  # innermost scopes
    crossings = sum(track[i] != track[i - 1] for i in range(1, len(track)))
    assert len(flows) == 2 * 2 * crossings  # ids unique across both: check_trace pairs by id


def test_the_report_folders_hold_the_trace(tmp_path):
    from graph_harness.capture import count_round
    from graph_harness.capture.round.params import RoundParams
    from graph_harness.reports.report import write_report
    from graph_harness.reports.target_report import write_target_report

    p, *_ = _model()
    (tmp_path / "t").mkdir()
    write_target_report(
        tmp_path / "t",
        {"model": p.export},
        command="x",
        profile=ProfileResult(profiles={"model": p}),
        depth=2,
    )
    slices, _, _, threads = check_trace(json.loads((tmp_path / "t" / "trace.json").read_text()))
    assert threads[1][:3] == ["replays", "unscoped", "layers.0"]  # the report's depth: 2
    assert "trace.json" in (tmp_path / "t" / "report.md").read_text()
    params = RoundParams(stages=2, rows=2, k=32, world=2, rank=1, shard=64)
    exports = {v: count_round(params, v, "cpu").export for v in ("shipped",)}
    # the CPU export's dispatches as the nodes of a serial graph
    nodes = [
        dict(n, type="kernel", deps=[i - 1] if i else [])
        for i, n in enumerate(exports["shipped"].nodes)
    ]
    dur, gap = _times(len(nodes))
    ws, _ = _windows(nodes, dur, gap, replays=3, windows=1)
    round_profile = profile_windows("shipped", export_of(nodes, "decode-round"), ws)
    (tmp_path / "r").mkdir()
    write_report(
        tmp_path / "r",
        exports,
        None,
        command="x",
        profile=ProfileResult(profiles={"shipped": round_profile}),
    )
    slices, _, procs, threads = check_trace(json.loads((tmp_path / "r" / "trace.json").read_text()))
    assert procs == {1: "shipped"} and set(threads[1]) - {"replays"} <= set(STEPS)
    for row in replay_sums(slices, 1).values():
        assert math.isclose(row["cost"], row["period"], rel_tol=1e-12)


def test_profile_out_writes_the_trace_with_the_gpu_stood_in_for(monkeypatch, tmp_path):
    import torch

    from graph_harness.reports import cli
    from tests.capture.profile.stand_in import _stand_in_for_the_gpu

    _stand_in_for_the_gpu(monkeypatch)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "stand-in", raising=False)
    out = tmp_path / "p"
    args = ["profile", "--variant", "shipped", "--variant", "fused", "--builds", "1"]
    assert (
        cli.main([*args, "--trials", "3", "--windows", "1", "--replays", "4", "--out", str(out)])
        == 0
    )
    doc = json.loads((out / "trace.json").read_text())
    slices, _, procs, threads = check_trace(doc)
    assert procs == {1: "shipped", 2: "fused"}
    assert threads[1] == ["replays", "topk", "pack", "copy"]
    manifest = json.loads((out / ".graph-harness-manifest.json").read_text())
    assert "trace.json" in json.dumps(manifest)
    for pid in procs:
        rows = replay_sums(slices, pid)
        assert sorted(rows) == list(range(1, ProfileSettings().trace_replays + 1))
        for row in rows.values():
            assert math.isclose(row["cost"], row["period"], rel_tol=1e-12)


# --- on a GPU: real CUPTI data ---------------------------------------------------------


def _profile_cli(*args):
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    return subprocess.run(
        [sys.executable, "-m", "graph_harness", "profile", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**env, "PYTHONPATH": str(REPO)},
    )


def _check_against_the_profile(out: Path):
    """trace.json against profile.json, the same run's document: each traced replay's
    period is the profile's, its nodes' durations and gaps sum to it, every activity node
    of the graph is drawn once per replay, and times keep CUPTI's precision."""
    doc = json.loads((out / "trace.json").read_text())
    slices, flows, procs, threads = check_trace(doc)
    prof = json.loads((out / "profile.json").read_text())
    assert list(procs.values()) == [s["name"] for s in prof["summary"]]
    for pid, name in procs.items():
        period = {
            r["replay"]: r["period_us"]
            for r in prof["replays"]
            if r["variant"] == name and r["build"] == 0 and r["window"] == 0
        }
        rows = replay_sums(slices, pid)
        assert sorted(rows) == sorted(period)[: ProfileSettings().trace_replays], name
        for r, row in rows.items():
            assert row["period"] == period[r]
            assert math.isclose(row["cost"], row["period"], rel_tol=1e-9), (name, r, row)
            assert abs(row["gaps"] - drawn_gaps(row)) <= 2e-3 * len(row["nodes"])
            drawn = Counter(e["args"]["node"] for e in row["nodes"])
            assert len(drawn) == prof["matching"][name]["nodes"] and set(drawn.values()) == {1}
            assert all(e["dur"] > 0 for e in row["nodes"])
    times = [e["ts"] for xs in slices.values() for e in xs]
    assert any(t != round(t) for t in times)  # not rounded to whole microseconds
    assert flows  # modules and steps follow each other across tracks
    return procs, threads


@pytest.mark.gpu
def test_profile_target_writes_a_trace_of_real_replays(tmp_path):
    out = tmp_path / "p"
    spec = f"{REPO / 'examples' / 'llama_decode.py'}:make_tiny_step"
    quick = ["--trials", "4", "--windows", "1", "--replays", "4"]
    r = _profile_cli("--target", spec, "--module-scopes", "2", *quick, "--out", str(out))
    assert r.returncode == 0, r.stderr
    procs, threads = _check_against_the_profile(out)
    assert procs == {1: "make_tiny_step"}
    layers = [t for t in threads[1] if t.startswith("layers.")]
    assert layers == sorted(layers) and len(layers) >= 2, threads  # model order: layer by layer


@pytest.mark.gpu
def test_profile_round_writes_a_trace_of_real_replays(tmp_path):
    out = tmp_path / "p"
    small = ["--stages", "2", "--rows", "2", "--k", "32", "--world", "2", "--shard", "64"]
    quick = ["--trials", "4", "--builds", "1", "--windows", "1", "--replays", "3"]
    r = _profile_cli(
        *small, *quick, "--variant", "shipped", "--variant", "fused", "--out", str(out)
    )
    assert r.returncode == 0, r.stderr
    # the command's tables and files (one run for these and the timeline: GPU time)
    assert "dispatch share" in r.stdout and "shipped -> fused" in r.stdout
    want = {"profile.json", "profile-nodes.csv", "dispatch_share.png", "trace.json"}
    assert want <= {p.name for p in out.iterdir()}
    procs, threads = _check_against_the_profile(out)
    assert procs == {1: "shipped", 2: "fused"}
    for pid in procs:  # the replays, then the steps in the round's order
        steps = [t for t in threads[pid][1:] if t != "unscoped"]
        assert threads[pid][0] == "replays" and steps == [s for s in STEPS if s in steps]
        assert {"topk", "pack", "select"} <= set(steps), threads[pid]


@pytest.mark.gpu
def test_report_target_on_a_gpu_holds_the_trace(tmp_path):
    out = tmp_path / "r"
    spec = f"{REPO / 'examples' / 'llama_decode.py'}:make_tiny_step"
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    # --module-scopes without DEPTH: the report cuts at the block depth, a track per layer
    args = ["report", "--target", spec, "--module-scopes", "--out", str(out)]
    r = subprocess.run(
        [sys.executable, "-m", "graph_harness", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**env, "PYTHONPATH": str(REPO)},
    )
    assert r.returncode == 0, r.stderr
    slices, flows, procs, threads = check_trace(json.loads((out / "trace.json").read_text()))
    assert procs == {1: "make_tiny_step"} and flows
    assert [t for t in threads[1] if t.startswith("layers.")] == ["layers.0", "layers.1"]
    for r, row in replay_sums(slices, 1).items():
        assert math.isclose(row["cost"], row["period"], rel_tol=1e-9), (r, row)
