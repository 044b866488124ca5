"""`profile`: CUPTI activities matched to graph nodes, each node's duration and the gap
before it, roll-ups by scope, savings priced from profiles.

The CPU tests feed synthetic activities (a schedule simulated from the nodes, so the
right answer is known) through the same functions the GPU path uses; the gpu-marked tests
at the end profile real graphs and check the matching by other routes."""

import json
import math
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from graph_harness.capture.profile.activities import (
    Activity,
    ProfileError,
    activities_from_trace,
    split_replays,
)
from graph_harness.capture.profile.breakdown import pair_breakdown
from graph_harness.capture.profile.document import ProfileResult
from graph_harness.capture.profile.matching import (
    agreement,
    ids_consistent,
    match_by_id,
    match_by_order,
    plan_of,
)
from graph_harness.capture.profile.node_stats import group_of
from graph_harness.capture.profile.nodes import Window, profile_windows, replay_costs
from graph_harness.capture.profile.pairs import price_pair
from graph_harness.capture.profile.rollup import group_costs, scope_costs
from graph_harness.capture.profile.settings import ProfileSettings
from graph_harness.capture.round.params import RoundParams
from graph_harness.capture.stats import median_interval
from tests.capture.profile.stand_in import (
    LAUNCH_EARLY,
    STAND_IN_EXCESS,
    _fake_record,
    _FakeGraph,
    _stand_in_for_the_gpu,
)
from tests.capture.profile.synthetic import (
    MODEL_PATHS,
    chain,
    export_of,
    node,
    run_serially,
    windows_of,
)
from tests.capture.profile.variants import A, B, _trials, _variant

REPO = Path(__file__).resolve().parents[3]
MANGLED = "_ZN2at6native29vectorized_elementwise_kernelILi4EEEviT_"  # a C++ kernel symbol


# --- synthetic graphs and what CUPTI would record of them ----------------------------------


# --- reading the trace ------------------------------------------------------------------


def test_trace_activities_are_read_with_their_ids_and_sorted():
    trace = {
        "traceEvents": [
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "ts": 1, "dur": 5},
            {
                "ph": "X",
                "cat": "kernel",
                "name": "void k2()",
                "ts": 20.5,
                "dur": 2.25,
                "args": {"stream": 7, "correlation": 11, "graph node id": (5 << 32) | 3},
            },
            {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD", "ts": 10, "dur": 1},
            {"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "ts": 15, "dur": 1},
            {"ph": "f", "cat": "ac2g", "name": "flow", "ts": 20.5},  # not an activity
            {"ph": "X", "cat": "kernel", "name": "memcpy32_post", "ts": 12, "dur": 0.5},
        ]
    }
    acts = activities_from_trace(trace)
    assert [(a.kind, a.start_us) for a in acts] == [
        ("memcpy", 10.0),
        ("kernel", 12.0),
        ("memset", 15.0),
        ("kernel", 20.5),
    ]
    k2 = acts[-1]
    assert (k2.end_us, k2.stream, k2.correlation) == (22.75, 7, 11)
    assert k2.graph_node_id == (5 << 32) | 3 and k2.graph_id is None
    with pytest.raises(ProfileError, match="traceEvents"):
        activities_from_trace({"events": []})


def test_replays_split_by_launch_else_by_count():
    a = lambda t, c: Activity("kernel", "k", t, t + 1, correlation=c)
    by_launch = [a(0, 5), a(2, 5), a(4, 9), a(6, 9), a(8, 9)]  # launches of 2 and 3
    assert [len(r) for r in split_replays(by_launch, 2)] == [2, 3]
    no_ids = [Activity("kernel", "k", t, t + 1) for t in (6, 0, 2, 4)]
    parts = split_replays(no_ids, 2)
    assert [[x.start_us for x in p] for p in parts] == [[0, 2], [4, 6]]
    with pytest.raises(ProfileError, match="5 device activities for 2 replays"):
        split_replays([Activity("kernel", "k", t, t + 1) for t in range(5)], 2)


# --- matching -------------------------------------------------------------------------------


def test_dependencies_pass_through_events_empty_nodes_and_child_graphs():
    nodes = [
        node(0, "kernel", "a"),
        node(1, "event_record", deps=[0]),
        node(2, "empty", deps=[1]),
        node(3, "kernel", "b", deps=[2]),
        node(4, "graph", deps=[3]),  # a child graph: its roots wait for what it waits for
        node(5, "kernel", "c", parent=4),
        node(6, "memcpy", deps=[5], parent=4),
        node(7, "kernel", "d", deps=[4]),  # waits for everything inside the child
        node(8, "wait_event"),
        node(9, "kernel", "e", deps=[8]),  # waits for nothing that runs on the device
    ]
    plan = plan_of(nodes)
    assert plan.nodes == (0, 3, 5, 6, 7, 9)
    assert {n: sorted(plan.deps[n]) for n in plan.nodes} == {
        0: [],
        3: [0],
        5: [3],
        6: [5],
        7: [5, 6],
        9: [],
    }
    assert plan.nested


def test_serial_round_matches_exactly_memcpy_as_a_copy_kernel_or_a_copy():
    nodes = [
        node(0, "kernel", MANGLED, scope_path=["stage0/topk"], stage=0),
        node(1, "memcpy", deps=[0], scope_path=["stage0/copy"], stage=0),
        node(2, "memcpy", deps=[1], scope_path=["stage0/copy"], stage=0),
        node(3, "memset", deps=[2], scope_path=["stage0/copy"], stage=0),
        node(4, "kernel", "triton_poi_fused_0", deps=[3], scope_path=["stage0/pack"], stage=0),
    ]
    plan = plan_of(nodes)
    dur = {n: 1.0 + n for n in range(5)}
    gap = dict.fromkeys(range(5), 0.25)
    # the driver ran the first copy as its own kernel, the second as a copy
    acts, _ = run_serially(nodes, range(5), dur, gap, names={1: "memcpy32_post"})
    assert acts[0].name.startswith("void at::native::vectorized_elementwise_kernel")
    assert [a.kind for a in acts] == ["kernel", "kernel", "memcpy", "memset", "kernel"]
    m = match_by_order(plan, acts)
    assert m.node == [0, 1, 2, 3, 4] and m.complete


def test_a_kernel_named_like_a_copy_is_its_own_node_first():
    nodes = [node(0, "memcpy"), node(1, "kernel", "memcpy_rows", deps=[0])]
    nodes[1]["deps"] = []  # both ready at once: the name decides
    acts = [
        Activity("kernel", "memcpy_rows", 0, 1),
        Activity("kernel", "memcpy32_post", 1, 2),
    ]
    assert match_by_order(plan_of(nodes), acts).node == [1, 0]


def test_a_kernel_the_driver_would_not_name_takes_what_no_named_node_takes():
    nodes = chain(["a", "<unknown>", "c"])
    acts = [Activity("kernel", n, t, t + 1) for t, n in ((0, "a"), (2, "mystery"), (4, "c"))]
    assert match_by_order(plan_of(nodes), acts).node == [0, 1, 2]


def test_equal_names_on_parallel_branches_go_in_node_order():
    # 0 forks into two branches of the same kernels, joined by 5
    nodes = [
        node(0, "kernel", "fork"),
        node(1, "kernel", "gemm", [0]),
        node(2, "kernel", "gemm", [0]),
        node(3, "kernel", "act", [1]),
        node(4, "kernel", "act", [2]),
        node(5, "kernel", "join", [3, 4]),
    ]
    acts = [
        Activity("kernel", "fork", 0, 1),
        Activity("kernel", "gemm", 1.2, 3),
        Activity("kernel", "gemm", 1.3, 3.1),
        Activity("kernel", "act", 3.2, 4),
        Activity("kernel", "act", 3.3, 4.2),
        Activity("kernel", "join", 4.5, 5),
    ]
    m = match_by_order(plan_of(nodes), acts)
    assert m.node == [0, 1, 2, 3, 4, 5] and m.complete


def test_branches_that_ran_the_other_way_round_are_still_matched():
    # two ready "gemm"s; the second's branch ran first (its "act" came before the other
    # gemm): index order alone would leave "act" behind a gemm that had not started
    nodes = [node(0, "kernel", "gemm"), node(1, "kernel", "gemm"), node(2, "kernel", "act", [1])]
    acts = [Activity("kernel", n, t, t + 1) for t, n in ((0, "gemm"), (2, "act"), (4, "gemm"))]
    m = match_by_order(plan_of(nodes), acts)
    assert m.node == [1, 2, 0] and m.complete


def test_unmatched_activities_and_nodes_are_reported():
    nodes = chain(["a", "b", "c", "d"])
    plan = plan_of(nodes)
    dur, gap = dict.fromkeys(range(4), 1.0), dict.fromkeys(range(4), 0.1)
    acts, t = run_serially(nodes, [0, 1, 3], dur, gap)  # c never ran
    acts.append(Activity("kernel", "stranger", t + 1, t + 2))  # nor did we launch this
    m = match_by_order(plan, acts)
    assert m.node == [0, 1, 3, None]
    assert m.unmatched_nodes == [2] and m.unmatched_activities == [3]
    assert m.out_of_order == 1  # d ran though c (its dependency) never started
    assert not m.complete


def test_match_by_id_and_the_checks_between_routes():
    nodes = chain(["k", "k", "k"])  # names alone cannot tell these apart
    plan = plan_of(nodes)
    ids = {0: (9 << 32) | 40, 1: (9 << 32) | 41, 2: (9 << 32) | 42}  # tools ids: graph 9
    acts = [
        Activity("kernel", "k", t, t + 1, graph_node_id=(77 << 32) | lid)  # exec graph 77
        for t, lid in ((0, 40), (2, 41), (4, 42))
    ]
    by_id, by_order = match_by_id(plan, acts, ids), match_by_order(plan, acts)
    assert by_id.node == [0, 1, 2] and by_id.complete
    assert agreement(by_id, by_order) == 1.0
    assert ids_consistent([acts, acts], [by_order, by_order]) is True
    swapped = [acts[1], acts[0], acts[2]]  # as if the first two had run the other way
    assert match_by_id(plan, swapped, ids).node == [1, 0, 2]
    assert agreement(match_by_id(plan, swapped, ids), match_by_order(plan, swapped)) == 1 / 3
    # an order match that gives one node different ids in different replays is caught
    m = match_by_order(plan, acts)
    assert ids_consistent([acts, swapped], [m, m]) is False
    no_ids = [Activity("kernel", "k", t, t + 1) for t in (0, 2, 4)]
    assert ids_consistent([no_ids], [match_by_order(plan, no_ids)]) is None
    # an id whose node has another name is no match
    wrong = [Activity("kernel", "other", 0, 1, graph_node_id=40)]
    assert match_by_id(plan, wrong, ids).node == [None]


@st.composite
def dags(draw, unique_names: bool):
    n = draw(st.integers(1, 25))
    nodes = []
    for i in range(n):
        deps = draw(st.sets(st.integers(0, i - 1), max_size=3)) if i else set()
        # copies and sets have no names to tell them apart: only where names may repeat
        others = ["event_record", "empty"] + ([] if unique_names else ["memcpy", "memset"])
        type_ = draw(st.sampled_from(["kernel"] * 6 + others))
        name = f"k{i}" if unique_names else draw(st.sampled_from(["gemm", "add", "norm"]))
        nodes.append(node(i, type_, name, sorted(deps)))
    # a schedule: any topological order, one activity at a time, random gaps and times
    order, done = [], set()
    while len(order) < n:
        ready = [x["index"] for x in nodes if x["index"] not in done]
        ready = [i for i in ready if set(nodes[i]["deps"]) <= done]
        pick = draw(st.sampled_from(ready))
        order.append(pick)
        done.add(pick)
    times = st.floats(0.0, 5.0, allow_nan=False)
    dur = {i: draw(st.floats(0.5, 50.0)) for i in range(n)}
    gap = {i: draw(times) for i in range(n)}
    return nodes, order, dur, gap


@settings(max_examples=150, deadline=None)
@given(dags(unique_names=True))
def test_matching_recovers_any_schedule_with_unique_names(case):
    nodes, order, dur, gap = case
    plan = plan_of(nodes)
    runs = [i for i in order if nodes[i]["type"] in ("kernel", "memcpy", "memset")]
    acts, end = run_serially(nodes, runs, dur, gap, t0=100.0)
    m = match_by_order(plan, acts)
    assert m.node == runs and m.complete
    # each node's duration and gap, by the definitions, against the simulation
    costs = {n: (d, g) for n, d, g in replay_costs(plan, acts, m, prev_end=100.0)}
    start = {n: a.start_us for n, a in zip(runs, acts)}
    finish = {n: a.end_us for n, a in zip(runs, acts)}
    for n in runs:
        ready = max((finish[d] for d in plan.deps[n]), default=100.0)
        assert costs[n] == pytest.approx((dur[n], start[n] - ready))
    # one stream: the costs sum to the replay's period whenever each node waits for the
    # one before it; in general the period is never more than the sum
    assert sum(d + g for d, g in costs.values()) >= end - 100.0 - 1e-9


@settings(max_examples=150, deadline=None)
@given(dags(unique_names=False))
def test_matching_with_repeated_names_is_complete_and_respects_dependencies(case):
    nodes, order, dur, gap = case
    plan = plan_of(nodes)
    runs = [i for i in order if nodes[i]["type"] in ("kernel", "memcpy", "memset")]
    acts, _ = run_serially(nodes, runs, dur, gap)
    m = match_by_order(plan, acts)
    assert m.complete and sorted(m.node) == sorted(runs)
    seen = set()
    for a, n in zip(acts, m.node):
        assert plan.key[n][0] == a.kind and (a.kind != "kernel" or plan.key[n][1] == a.name)
        assert plan.deps[n] <= seen  # every node it waits for had started
        seen.add(n)


# Found by hypothesis (session 10): many kernels of one name, run in an order where the
# greedy match takes the wrong gemm; the search behind it ran out of steps trying equal
# orders again until it skipped states it had found dead and ready nodes no different.
SEARCHED = [
    ("gemm", []), ("gemm", []), ("gemm", []), ("norm", []), ("norm", []), ("gemm", [0, 3, 4]),
    ("gemm", []), ("gemm", [0, 1, 3]), ("gemm", []), ("gemm", []), ("gemm", []), ("gemm", [4]),
    ("gemm", [0, 1, 11]), ("norm", [12]), ("gemm", []), ("gemm", [0, 7]),
    ("gemm", [11, 14, 15]), ("gemm", []), ("gemm", []), ("gemm", []), ("gemm", []),
    ("memset", [3]), ("gemm", []), ("gemm", []), ("gemm", []),
]  # fmt: skip
SEARCHED_ORDER = [0, 14, 4, 6, 19, 1, 22, 18, 20, 2, 10, 9, 11, 17, 12, 8, 3, 5, 13, 21, 23]
SEARCHED_ORDER += [24, 7, 15, 16]


def test_matching_finds_the_order_the_greedy_match_misses():
    nodes = [
        node(i, "memset" if k == "memset" else "kernel", "" if k == "memset" else k, deps)
        for i, (k, deps) in enumerate(SEARCHED)
    ]
    plan = plan_of(nodes)
    n = len(nodes)
    acts, _ = run_serially(nodes, SEARCHED_ORDER, dict.fromkeys(range(n), 1.0), [0.0] * n)
    m = match_by_order(plan, acts)
    assert m.complete and sorted(m.node) == list(range(n))
    seen = set()
    for a, k in zip(acts, m.node):
        assert plan.key[k][0] == a.kind and plan.deps[k] <= seen
        seen.add(k)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(0.5, 100.0), st.floats(-0.2, 5.0)),  # PDL may overlap a little
        min_size=1,
        max_size=40,
    )
)
def test_a_serial_graph_costs_sum_to_its_period(spec):
    names = [f"k{i % 3}" for i in range(len(spec))]
    nodes = chain(names)
    dur = {i: d for i, (d, _) in enumerate(spec)}
    gap = {i: g for i, (_, g) in enumerate(spec)}
    p = profile_windows("x", export_of(nodes), windows_of(nodes, range(len(spec)), dur, gap))
    r = p.replays
    assert np.allclose(r.cost_us, r.period_us) and np.allclose(
        r.cost_us, sum(dur.values()) + sum(gap.values())
    )
    assert (r.unmatched_activities == 0).all() and p.matching["verified"]
    assert np.allclose(p.nodes.dur_us, list(dur.values()))
    assert np.allclose(p.nodes.gap_us, list(gap.values()))


# --- one graph's profile -------------------------------------------------------------------


def test_the_first_node_waits_for_the_previous_replay():
    nodes = chain(["a", "b"])
    dur, gap = {0: 3.0, 1: 2.0}, {0: 4.0, 1: 0.5}  # 4 us: the graph launch, GPU-side
    p = profile_windows("x", export_of(nodes), windows_of(nodes, [0, 1], dur, gap, replays=3))
    assert list(p.nodes.gap_us) == [4.0, 0.5]
    assert len(p.replays) == 2 * 3  # the lead-in of each window is not sampled
    s = p.summary()
    assert s["period_us"] == pytest.approx(9.5) and s["gap_us"] == pytest.approx(4.5)
    assert s["dispatch_share"] == pytest.approx(4.5 / 9.5)
    assert s["overlap_us"] == pytest.approx(0.0)


def test_a_node_whose_dependency_never_ran_is_measured_from_the_last_activity():
    nodes = chain(["a", "b", "c"])
    plan = plan_of(nodes)
    acts = [Activity("kernel", "a", 10, 12), Activity("kernel", "c", 13, 14)]
    m = match_by_order(plan, acts)
    assert m.node == [0, 2] and m.unmatched_nodes == [1]
    assert replay_costs(plan, acts, m, prev_end=5.0) == [(0, 2.0, 5.0), (2, 1.0, 1.0)]


def test_parallel_branches_report_their_overlap():
    nodes = [node(0, "kernel", "a"), node(1, "kernel", "b"), node(2, "kernel", "c", [0, 1])]
    reps = []
    for r in range(4):
        t = 10.0 * r
        reps.append(
            [
                Activity("kernel", "a", t + 1, t + 5, correlation=r),
                Activity("kernel", "b", t + 2, t + 6, correlation=r),  # beside a
                Activity("kernel", "c", t + 7, t + 10, correlation=r),
            ]
        )
    p = profile_windows("x", export_of(nodes), [Window(0, 0, reps)])
    s = p.summary()
    assert s["period_us"] == pytest.approx(10.0)
    assert s["cost_us"] == pytest.approx(4 + 4 + 3 + 1 + 2 + 1)  # durations + gaps
    assert s["overlap_us"] == pytest.approx(s["cost_us"] - 10.0)


def test_profile_uses_the_id_route_where_complete_and_says_when_they_disagree():
    nodes = chain(["k", "k", "k"])
    dur, gap = {0: 1.0, 1: 2.0, 2: 3.0}, dict.fromkeys(range(3), 0.5)
    ws = windows_of(nodes, [0, 1, 2], dur, gap, replays=2, windows=1)
    right = {0: 100, 1: 101, 2: 102}
    for w in ws:
        w.replays = [
            [
                Activity(a.kind, a.name, a.start_us, a.end_us, graph_node_id=100 + i)
                for i, a in enumerate(r)
            ]
            for r in w.replays
        ]
    w = Window(0, 0, ws[0].replays, right)
    p = profile_windows("x", export_of(nodes), [w])
    assert p.matching["method"] == "id" and p.matching["agreement"] == 1.0
    assert p.matching["ids_consistent"] is True
    wrong = Window(0, 0, ws[0].replays, {0: 101, 1: 100, 2: 102})
    p = profile_windows("x", export_of(nodes), [wrong])
    assert p.matching["method"] == "id" and p.matching["agreement"] == pytest.approx(1 / 3)
    partial = Window(0, 0, ws[0].replays, {0: 100, 1: 101, 2: 999})
    p = profile_windows("x", export_of(nodes), [partial])
    assert p.matching["method"] == "order" and p.matching["id_route"] == "incomplete"
    assert p.matching["verified"]


# --- scopes ---------------------------------------------------------------------------------


def _model_profile():
    paths = MODEL_PATHS
    nodes = chain([f"k{i}" for i in range(len(paths))], paths)
    dur = {i: 1.0 + i for i in range(len(paths))}
    gap = {i: 0.1 * (i + 1) for i in range(len(paths))}
    return profile_windows("m", export_of(nodes), windows_of(nodes, range(len(paths)), dur, gap))


def test_scope_roll_up_nests_and_every_level_sums_to_its_parent():
    from graph_harness.capture.attribution.rollup import tree_parts

    p = _model_profile()
    cost = p.nodes.dur_mean + p.nodes.gap_mean
    for depth in (None, 1, 2):
        tree = scope_costs(p.nodes, depth).set_index("scope")
        root = tree.loc["(all)"]
        assert root.nodes == 9 and root.cost_us == pytest.approx(cost.sum()) and root.share == 1
        position = p.nodes.scope_path.map(lambda x, d=depth: tree_parts(x)[:d])
        for label, row in tree.iterrows():
            parts = () if label == "(all)" else tuple(label.split("."))
            under = position.map(lambda q, pp=parts: q[: len(pp)] == pp)
            assert row.nodes == under.sum(), label  # every node below, itself included
            assert row.exec_us == pytest.approx(p.nodes.dur_mean[under].sum()), label
            assert row.gap_us == pytest.approx(p.nodes.gap_mean[under].sum()), label
            assert row.dispatch_share == pytest.approx(row.gap_us / row.cost_us)
            # a level sums to its parent: the children, plus the nodes that stop here
            kids = [k for k in tree.index if k != "(all)" and tuple(k.split("."))[:-1] == parts]
            own = position.map(lambda q, pp=parts: q == pp)
            assert tree.loc[kids, "cost_us"].sum() + cost[own].sum() == pytest.approx(row.cost_us)
        assert tree.depth.max() == (4 if depth is None else depth)
    assert root.cost_us == pytest.approx(p.summary()["cost_us"])


def test_groups_fold_repeats_and_sum_to_the_whole():
    p = _model_profile()
    groups = group_costs(p.nodes).set_index("scope")
    assert groups.loc["layers.*.attention", "nodes"] == 3
    assert groups.loc["layers.*.feed_forward", "nodes"] == 2
    assert groups.cost_us.sum() == pytest.approx(float((p.nodes.dur_mean + p.nodes.gap_mean).sum()))
    assert group_of(node(0, scope_path=["stage12/pack"], stage=12)) == "pack"
    assert group_of(node(0, scope_path=["layers.10.w1"])) == "layers.*.w1"
    assert group_of(node(0)) == "unscoped"


# --- pricing --------------------------------------------------------------------------------


def test_a_pair_is_priced_from_its_profiles_and_judged_against_measured():
    a, b = _variant("a", A), _variant("b", B)
    cost_a, cost_b = 70 + 1 + 1 + 1.2 + 4 * 0.5, 70 + 1.1 + 1.5 + 3 * 0.5
    row = price_pair(a, b)
    assert row.predicted_us == pytest.approx(cost_a - cost_b)
    assert row.removed_nodes == 1 and math.isnan(row.measured_us) and not row.passed
    good = price_pair(a, b, _trials(cost_a + 10, cost_b + 10))  # the same saving, timed
    assert good.measured_us == pytest.approx(cost_a - cost_b, abs=0.1)
    assert good.within_tolerance and abs(good.error) < 0.05
    off = price_pair(a, b, _trials(cost_a + 10, cost_b + 10 - 0.5))  # 0.5 us more saved
    assert not off.within_tolerance and not off.passed


def test_the_predicted_interval_pools_builds():
    shift = (0.0, 2.0, -1.0)  # placement moves A's first node per build
    a, b = _variant("a", A, shift=shift), _variant("b", B)
    row = price_pair(a, b)
    base = (70 + 1 + 1 + 1.2 + 2.0) - (70 + 1.1 + 1.5 + 1.5)
    assert row.predicted_us == pytest.approx(base)  # the median build
    assert row.predicted_lo < base - 0.5 and row.predicted_hi > base + 1.5


def test_breakdown_names_the_nodes_whose_cost_moved():
    a, b = _variant("a", A), _variant("b", B)
    bd = pair_breakdown(a, b)
    assert bd.saving_us.sum() == pytest.approx(price_pair(a, b).predicted_us)
    common = bd[bd.part == "common"].set_index("kernel")
    assert common.loc["copy_", "saving_us"] == pytest.approx(1.2 - 1.5)  # the copy got dearer
    assert common.loc["topk", "saving_us"] == pytest.approx(0.0)
    assert set(bd[bd.part == "removed"].kernel) == {"fill", "where"}
    assert list(bd[bd.part == "added"].kernel) == ["fused"]
    assert list(bd.saving_us.abs()) == sorted(bd.saving_us.abs(), reverse=True)


def test_result_document_is_plain_json_and_its_files(tmp_path):
    a, b = _variant("a", A), _variant("b", B)
    result = ProfileResult(
        profiles={"a": a, "b": b},
        round_trials=_trials(76, 74),
        pairs=[("a", "b")],
        params={"stages": 1},
    )
    doc = json.loads(json.dumps(result.to_dict(), allow_nan=False))
    assert doc["schema"] == "graph-harness/profile" and len(doc["nodes"]) == 7
    assert [r["name"] for r in doc["summary"]] == ["a", "b"]
    assert doc["pairs"][0]["a"] == "a" and doc["matching"]["a"]["verified"] is True
    summary = result.summary().set_index("name")
    assert summary.loc["a", "timed_us"] == pytest.approx(76, abs=0.1)
    names = result.write(tmp_path)
    assert sorted(names) == sorted(p.name for p in tmp_path.iterdir())
    assert "profile-pairs.csv" in names and "profile-breakdown.csv" in names
    scopes = pd.read_csv(tmp_path / "profile-scopes.csv")
    assert list(scopes[scopes.variant == "a"].scope) == ["topk", "pack", "copy"]  # step order


def test_tables_render(tmp_path):
    from rich.console import Console

    from graph_harness.reports import plots
    from graph_harness.reports.profile_tables import (
        breakdown_table,
        pair_verdicts,
        pairs_table,
        scope_tables,
        summary_table,
        top_gaps_tables,
    )

    a, b = _variant("a", A), _variant("b", B)
    result = ProfileResult(
        profiles={"a": a, "b": b}, round_trials=_trials(76, 70), pairs=[("a", "b")]
    )
    console = Console(record=True, width=200)
    for t in [summary_table(result), *scope_tables(result), *top_gaps_tables(result, 3)]:
        console.print(t)
    pairs = result.pair_table()
    console.print(pairs_table(pairs))
    console.print(breakdown_table(result.breakdown(), "a", "b"))
    text = console.export_text() + "\n".join(pair_verdicts(pairs))
    # no calibration here: the raw prediction is not judged (it runs high by construction)
    assert "not judged: no net prediction" in text and "FAIL" not in text
    assert "dispatch share" in text
    assert "copy_" in text
    plots.dispatch_share(result.scope_table(), tmp_path / "d.png")
    m = _model_profile()
    plots.dispatch_share(ProfileResult(profiles={"m": m}).scope_table(), tmp_path / "m.png")
    assert (tmp_path / "d.png").stat().st_size > 0 and (tmp_path / "m.png").stat().st_size > 0


def test_a_result_prices_its_pairs_once(tmp_path, monkeypatch):
    """write, to_dict and the tables a show prints read one pricing of each pair (each
    price_pair runs two bootstraps) and one roll-up, and each caller gets its own copy."""
    import graph_harness.capture.profile.document as D

    calls = Counter()

    def counted(f):
        def call(*a, **k):
            calls[f.__name__] += 1
            return f(*a, **k)

        return call

    for f in (D.price_pair, D.pair_breakdown, D.group_costs, D.scope_costs):
        monkeypatch.setattr(D, f.__name__, counted(f))
    a, b = _variant("a", A), _variant("b", B)
    result = ProfileResult(
        profiles={"a": a, "b": b}, round_trials=_trials(76, 74), pairs=[("a", "b")]
    )
    result.write(tmp_path)
    result.to_dict()
    pairs = result.pair_table()
    result.breakdown(), result.scope_table(), result.scope_table()
    # the round's graphs roll up by step: once each of a and b
    assert calls == {"price_pair": 1, "pair_breakdown": 1, "group_costs": 2}
    pairs.loc[0, "a"] = "changed by a caller"
    assert result.pair_table().loc[0, "a"] == "a"
    result.scope_table(2)  # another depth is another table
    assert calls["group_costs"] == 4


def test_median_interval_brackets_the_median():
    x = np.random.default_rng(1).normal(10.0, 1.0, (200, 3))
    lo, hi = median_interval(x)
    med = np.median(x, axis=0)
    assert (lo < med).all() and (med < hi).all() and (hi - lo < 0.6).all()
    x[:, 1] = np.nan
    lo, hi = median_interval(x)
    assert np.isnan(lo[1]) and not np.isnan(lo[0])
    with pytest.raises(ValueError, match="two samples"):
        median_interval([1.0])


def test_profile_settings_are_checked_and_share_replay_defaults():
    from graph_harness.capture.replay.settings import ReplaySettings

    s = ProfileSettings()
    assert (s.trials, s.builds, s.warmup) == (
        ReplaySettings.trials,
        ReplaySettings.builds,
        ReplaySettings.warmup,
    )
    assert s.timing().trials == s.trials
    with pytest.raises(ValueError, match="replays must be a whole number >= 2"):
        ProfileSettings(replays=1)


# --- the command ----------------------------------------------------------------------------


def _cli(*args, cpu=True):
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env["PYTHONPATH"] = str(REPO)
    if cpu:
        env["CUDA_VISIBLE_DEVICES"] = ""
    return subprocess.run(
        [sys.executable, "-m", "graph_harness", "profile", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )


def test_profile_has_help():
    r = _cli("--help")
    assert r.returncode == 0 and "usage: graph-harness profile" in r.stdout


def test_profile_without_a_gpu_refuses_in_one_line(tmp_path):
    out = tmp_path / "out"
    r = _cli("--out", str(out))
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "no GPU here" in lines[0] and "CUPTI" in lines[0]
    assert r.stdout == "" and not out.exists()


@pytest.mark.parametrize(
    "flags, named",
    [
        (["--target", "tests.targets:small_mlp", "--stages", "2"], "--stages"),
        (["--target", "tests.targets:small_mlp", "--variant", "fused"], "--variant"),
        (["--target", "tests.targets:small_mlp", "--builds", "2"], "--builds"),
        (["--module-scopes"], "--module-scopes"),
        (["--replays", "1"], "replays"),
        (["--target", "a:b", "--target", "a:b", "--target", "a:b"], "one --target"),
    ],
)
def test_profile_flags_that_do_not_combine_are_refused_first(flags, named):
    r = _cli(*flags)
    assert r.returncode == 2 and named in r.stderr and "no GPU" not in r.stderr, r.stderr


# --- on a GPU ---------------------------------------------------------------------------------

SMALL = RoundParams(stages=3, rows=4, k=64, world=4, rank=2, shard=256, seed=7)
QUICK = ProfileSettings(trials=6, builds=2, windows=2, replays=5)


def _activity_nodes_by_driver(graph) -> int:
    """Kernel, memcpy and memset nodes counted by walking the graph with the driver."""
    from graph_harness.capture.graph.reader import read_graph

    return sum(r.kind in ("kernel", "memcpy", "memset") for r in read_graph(graph.raw_cuda_graph()))


@pytest.mark.gpu
def test_profiled_round_matches_every_node_once_and_sums_to_its_replay():
    from graph_harness.capture.round.profile import profile_rounds

    result = profile_rounds(SMALL, ["shipped", "fused"], QUICK)
    summary = result.summary().set_index("name")
    for v, p in result.profiles.items():
        m = p.matching
        assert m["verified"] and m["unmatched_activities"] == m["unmatched_nodes"] == 0, m
        types = Counter(n["type"] for n in p.export.nodes)
        assert m["activities_per_replay"] == [types["kernel"] + types["memcpy"] + types["memset"]]
        per_replay = p.samples.groupby(["build", "window", "replay"]).node
        assert (per_replay.nunique() == m["nodes"]).all() and (
            per_replay.size() == m["nodes"]
        ).all()
        assert len(p.replays) == QUICK.builds * QUICK.windows * QUICK.replays
        assert (p.nodes.dur_us > 0).all() and (p.samples.dur_us > 0).all()
        # one stream: each replay's node costs sum to its period
        assert np.allclose(p.replays.cost_us, p.replays.period_us, rtol=1e-9, atol=1e-3)
        # and the period is what CUDA events time, plus the profiler's own cost: CUPTI
        # adds 0.01-0.5 us per node by graph (BENCHMARKS.md, Open), which in this small
        # round of short kernels came to 7.2% on the H200. Never less than events time,
        # never far off.
        assert -0.02 < summary.loc[v, "period_vs_timed"] < 0.15, summary.loc[v]
        assert 0 < summary.loc[v, "dispatch_share"] < 1
    pairs = result.pair_table()
    assert list(zip(pairs.a, pairs.b)) == [("shipped", "fused")]
    assert pairs.predicted_us.iloc[0] > 0 and pairs.measured_us.iloc[0] > 0


@pytest.mark.gpu
def test_profiled_round_node_count_is_the_drivers():
    # another route to the count: walk the graph with the driver, not the export
    from graph_harness.capture import count_round
    from graph_harness.capture.profile.nodes import profile_windows
    from graph_harness.capture.profile.run import profile_graphs

    counted = count_round(SMALL, "shipped", "cuda")
    graph = counted.captured.graph
    windows = profile_graphs({"shipped": (graph, counted.export)}, QUICK)["shipped"]
    p = profile_windows("shipped", counted.export, windows)
    assert p.matching["activities_per_replay"] == [_activity_nodes_by_driver(graph)]
    assert p.matching["verified"]


@pytest.mark.gpu
def test_matching_by_id_agrees_with_matching_by_order():
    from graph_harness.capture import count_round
    from graph_harness.capture.profile.nodes import profile_windows
    from graph_harness.capture.profile.run import local_ids, profile_graphs

    counted = count_round(SMALL, "fused", "cuda")
    graph = counted.captured.graph
    windows = profile_graphs({"fused": (graph, counted.export)}, QUICK)["fused"]
    p = profile_windows("fused", counted.export, windows)
    has_trace_ids = any(a.graph_node_id is not None for w in windows for r in w.replays for a in r)
    if has_trace_ids:  # the order match is one-to-one with CUPTI's ids, replay after replay
        assert p.matching["ids_consistent"] is True, p.matching
    if local_ids(graph, counted.export) is None or not has_trace_ids:
        pytest.skip(
            f"no id route here: graph node ids in the trace {has_trace_ids}, tools ids "
            "from the driver (cudaGraphNodeGetToolsId, CUDA 13.1+) "
            f"{local_ids(graph, counted.export) is not None}"
        )
    assert p.matching["id_route"] == "used" and p.matching["agreement"] == 1.0, p.matching


@pytest.mark.gpu
def test_profiled_step_by_module():
    import importlib.util

    from graph_harness.capture import module_scopes
    from graph_harness.capture.count import capture_and_keep
    from graph_harness.capture.profile.run import profile_steps

    spec = importlib.util.spec_from_file_location(
        "llama_profile", REPO / "examples" / "llama_decode.py"
    )
    ex = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = ex
    spec.loader.exec_module(ex)
    step = ex.make_tiny_step()
    with module_scopes(step.module, depth=2):
        kept = capture_and_keep(step)
        export, captured = kept.export, kept.captured
    result = profile_steps(
        {"tiny": (export, captured.graph)}, ProfileSettings(trials=4, windows=2, replays=4)
    )
    p = result.profiles["tiny"]
    assert p.matching["verified"], p.matching
    assert (p.nodes.dur_us > 0).all()
    tree = scope_costs(p.nodes, depth=2).set_index("scope")
    assert tree.loc["(all)", "nodes"] == len(p.plan.nodes)
    layers = [s for s in tree.index if s.startswith("layers.")]
    assert tree.loc[layers, "cost_us"].sum() == pytest.approx(tree.loc["layers", "cost_us"])
    # The summary's figures against the tables they come from; how far the profiled period
    # sits above the timed one is the profiler's own cost, a benchmark figure (BENCHMARKS.md),
    # not a bound a unit test may hold the GPU to.
    s = result.summary().iloc[0]
    assert s.period_us == pytest.approx(p.replays.period_us.median())
    timed = result.round_trials.groupby("variant").us.median()["tiny"]
    assert s.timed_us == pytest.approx(timed) and timed > 0
    assert s.period_vs_timed == pytest.approx(s.period_us / timed - 1)


# The profile command on a GPU, end to end (its tables, files and timeline): one run,
# tests/capture/profile/test_profile_trace.py::test_profile_round_writes_a_trace_of_real_replays.


def test_report_gains_the_dispatch_share_section(tmp_path):
    from graph_harness.capture import count_round
    from graph_harness.reports.report import write_report

    p = RoundParams(stages=2, rows=2, k=32, world=2, rank=1, shard=64)
    exports = {v: count_round(p, v, "cpu").export for v in ("shipped", "fused")}
    profile = ProfileResult(
        profiles={"shipped": _variant("shipped", A), "fused": _variant("fused", B)}
    )
    write_report(tmp_path, exports, None, command="graph-harness report", profile=profile)
    md = (tmp_path / "report.md").read_text()
    assert "## Dispatch share in the round (CUPTI)" in md and "dispatch_share.png" in md
    by_step = pd.read_csv(tmp_path / "dispatch_by_step.csv")
    assert set(by_step.variant) == {"shipped", "fused"}
    assert (tmp_path / "dispatch_share.png").read_bytes()[:4] == b"\x89PNG"


def test_target_report_gains_the_dispatch_share_per_module(tmp_path):
    from graph_harness.reports.target_report import write_target_report

    p = _model_profile()
    write_target_report(
        tmp_path,
        {"m": p.export},
        command="graph-harness report",
        profile=ProfileResult(profiles={"m": p}),
        depth=2,
    )
    md = (tmp_path / "report.md").read_text()
    assert "## Dispatch share in the step (CUPTI)" in md and "per scope, %" in md
    by_scope = pd.read_csv(tmp_path / "dispatch_by_scope.csv").set_index("scope")
    # Known by construction: node i takes 1 + i us and waits 0.1 (i + 1) us before it, so
    # whatever nodes a scope holds, a gap is 1/11 of their cost; the scopes are those of
    # the model's paths cut at the report's depth, 2.
    from graph_harness.capture.attribution.rollup import tree_label, tree_parts

    # (nodes outside every scope are in "(all)" alone: no row of their own)
    cut = {tree_label(tree_parts(x)[:d]) for x in p.nodes.scope_path if x for d in (1, 2)}
    assert set(by_scope.index) == cut | {"(all)"} and by_scope.depth.max() == 2
    assert np.allclose(by_scope.dispatch_share, 1 / 11)
    assert by_scope.loc["(all)", "nodes"] == len(p.nodes) == 9
    assert (tmp_path / "dispatch_share.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.gpu
def test_target_report_on_a_gpu_profiles_the_step(tmp_path):
    out = tmp_path / "r"
    spec = f"{REPO / 'examples' / 'llama_decode.py'}:make_tiny_step"
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    args = ["report", "--target", spec, "--module-scopes", "2", "--out", str(out)]
    r = subprocess.run(
        [sys.executable, "-m", "graph_harness", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**env, "PYTHONPATH": str(REPO)},
    )
    assert r.returncode == 0, r.stderr
    md = (out / "report.md").read_text()
    assert "## Dispatch share in the step (CUPTI)" in md
    by_scope = pd.read_csv(out / "dispatch_by_scope.csv")
    layers = by_scope[by_scope.scope.str.fullmatch(r"layers\.\d+")]
    assert len(layers) > 0 and ((layers.dispatch_share > 0) & (layers.dispatch_share < 1)).all()
    counted = json.loads(next(out.glob("nodes-*.json")).read_text())["total_nodes"]
    assert by_scope.set_index("scope").loc["(all)", "nodes"] == counted


def test_bench_profile_needs_a_gpu():
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    bench = REPO / "benchmarks" / "bench_profile.py"
    r = subprocess.run(
        [sys.executable, str(bench), "--out", "/nonexistent/never"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert r.returncode == 2 and "no GPU here" in r.stderr, r.stderr


@pytest.mark.gpu
def test_bench_profile_smoke(tmp_path):
    bench = REPO / "benchmarks" / "bench_profile.py"
    r = subprocess.run(
        [sys.executable, str(bench), "--out", str(tmp_path), "--smoke"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    for part in ("round", "model"):
        doc = json.loads((tmp_path / part / "profile.json").read_text())
        assert all(m["verified"] for m in doc["matching"].values()), doc["matching"]
    pairs = pd.read_csv(tmp_path / "round" / "profile-pairs.csv")
    assert len(pairs) == 4  # the four standard changes
    assert "dispatch share" in (tmp_path / "summary.md").read_text()


# --- the GPU path's wiring, with the GPU parts stood in for ---------------------------------


def test_profile_rounds_profiles_every_build_and_prices_the_pair(monkeypatch):
    from graph_harness.capture.round.profile import profile_rounds

    _, durs, seen = _stand_in_for_the_gpu(monkeypatch)
    s = ProfileSettings(trials=5, builds=2, windows=2, replays=3)
    result = profile_rounds(RoundParams(), ["shipped", "fused"], s)
    assert seen == [0, 1] and result.pairs == [("shipped", "fused")]
    for v, p in result.profiles.items():
        assert len(p.replays) == 2 * 2 * 3 and p.matching["verified"]
        assert list(p.nodes.dur_us) == pytest.approx(list(durs[v].values()))
    pair = result.pair_table().iloc[0]
    # the stand-in's profiles are exact (an interval of zero width): judge the point only.
    # Raw, the prediction carries the profiler's excess on the removed nodes; net, not.
    removed = len(durs["shipped"]) - len(durs["fused"])
    assert pair.predicted_us - pair.measured_us == pytest.approx(STAND_IN_EXCESS * removed, abs=0.1)
    assert pair.predicted_net_us == pytest.approx(pair.measured_us, abs=0.1)
    assert pair.basis == "timing" and pair.within_tolerance
    assert pair.predicted_net_hi - pair.predicted_net_lo < 1e-9
    assert result.excess.per_node == pytest.approx({"kernel": STAND_IN_EXCESS})
    # each graph's excess fitted to its own timing: the stand-in's gaps run STAND_IN_EXCESS
    # shorter timed than profiled; the chains' (the stand-in's calibration rows) beside it
    for p in result.profiles.values():
        assert p.excess_basis == "timing"
        assert p.excess_per_node() == pytest.approx(STAND_IN_EXCESS, abs=0.01)
    s = result.summary()
    assert np.allclose(s.period_chains_vs_timed, 0, atol=1e-3)
    assert result.options["builds"] == 2 and result.params["stages"] == 24


def test_windows_are_interleaved_across_graphs():
    from graph_harness.capture.profile.run import interleaved

    assert interleaved(["a", "b", "c"], 3) == [
        (0, "a"), (0, "b"), (0, "c"), (1, "c"), (1, "b"), (1, "a"), (2, "a"), (2, "b"), (2, "c")
    ]  # fmt: skip
    assert interleaved(["a"], 2) == [(0, "a"), (1, "a")]


def test_profile_rounds_interleaves_the_variants_windows(monkeypatch):
    import graph_harness.capture.profile.run as R
    from graph_harness.capture.round.profile import profile_rounds

    _stand_in_for_the_gpu(monkeypatch)
    order = []

    def record(graph, replays, warmup=5, what="", launched=None):
        order.append((len(graph.graph.export.nodes), warmup))
        return _fake_record(graph, replays, warmup, launched=launched)

    monkeypatch.setattr(R, "record_replays", record)
    s = ProfileSettings(trials=3, builds=2, windows=3, replays=2, warmup=4)
    said = []
    result = profile_rounds(RoundParams(), ["shipped", "fused"], s, progress=said.append)
    windows = [m for m in said if "window" in m]  # one line as each window starts
    assert windows == [
        f"profiling 2 graphs, window {w} of 3 (build {b} of 2)" for b in (1, 2) for w in (1, 2, 3)
    ]
    sizes = {v: len(p.export.nodes) for v, p in result.profiles.items()}
    assert sizes["shipped"] != sizes["fused"]  # tells the two apart in `order`
    a, b = sizes["shipped"], sizes["fused"]
    # per build: A B, B A, A B; each graph's first window of a build warms it up
    assert order == 2 * [(a, 4), (b, 4), (b, 1), (a, 1), (a, 1), (b, 1)]
    for p in result.profiles.values():
        assert list(p.replays.window.drop_duplicates()) == [0, 1, 2]


def test_profile_steps_times_and_prices_the_second_against_the_first(monkeypatch):
    from graph_harness.capture.profile.run import profile_steps

    exports, durs, _ = _stand_in_for_the_gpu(monkeypatch)
    steps = {
        "eager": (exports["shipped"], _FakeGraph(exports["shipped"], durs["shipped"])),
        "compiled": (exports["fused"], _FakeGraph(exports["fused"], durs["fused"])),
    }
    result = profile_steps(steps, ProfileSettings(trials=4, windows=1, replays=4))
    assert result.pairs == [("eager", "compiled")]
    assert set(result.round_trials.variant) == {"eager", "compiled"}
    # instantiated before timing, then the host launches' warm-up and each launch
    assert steps["eager"][1].replays == 1 + 1 + 4 * ProfileSettings().host_launches
    summary = result.summary().set_index("name")
    assert summary.loc["eager", "timed_us"] == 10.0
    assert summary.host_launch_us.to_dict() == {"eager": 4.0, "compiled": 5.0}
    # the stand-in's launches return 100 us before the GPU runs dry, more than the
    # profiler's excess on a replay: hidden, and no part of a lead gap waits on the host
    assert set(summary.launch) == {"hidden"}, summary.launch_why.tolist()
    assert (summary.launch_late_us == -LAUNCH_EARLY).all() and (summary.exposed_us == 0).all()
    assert set(result.host_trials.variant) == {"eager", "compiled"}


def test_profile_command_end_to_end_with_the_gpu_stood_in_for(monkeypatch, tmp_path, capsys):
    from graph_harness.reports.cli import program as cli

    _stand_in_for_the_gpu(monkeypatch)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "stand-in", raising=False)
    out = tmp_path / "p"
    args = ["profile", "--variant", "shipped", "--variant", "fused", "--builds", "2"]
    args += ["--trials", "4", "--windows", "1", "--replays", "3", "--out", str(out)]
    assert cli.main(args) == 0
    printed = capsys.readouterr().out
    assert "dispatch raw / net" in printed and "shipped -> fused" in printed
    assert "Launches, replayed back to back" in printed
    assert "shipped: launch hidden: every launch returned" in printed
    names = {p.name for p in out.iterdir()}
    assert {"profile.json", "profile-pairs.csv", "dispatch_share.png"} <= names
    doc = json.loads((out / "profile.json").read_text())
    assert doc["options"]["builds"] == 2 and len(doc["summary"]) == 2
    # the launches timed in the first build, before any profiler session: 4 trials
    host = pd.DataFrame(doc["host_trials"])
    assert sorted(host[host.variant == "fused"].trial) == list(range(4))
    assert doc["options"]["host_launch_after_profiler"] is False
    assert {r["name"]: r["host_launch_us"] for r in doc["summary"]} == {
        "shipped": 4.0,
        "fused": 5.0,
    }
    assert cli.main([*args[:-2], "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["schema"] == "graph-harness/profile"


# --- profile_step: a user's step from Python, its capture and the GPU stood in --------------


def _stand_in_captures(monkeypatch, exports, durs, repeatable=True):
    """capture_step stood in: each step 'captured' as a stand-in graph of the export its
    name picks (`step.which`), warm-ups that showed it repeats (or not)."""
    from types import SimpleNamespace

    import graph_harness.capture.profile.step as PS
    from graph_harness.capture.state.steps import Repeatability
    from graph_harness.capture.step import CapturedStep

    def capture_step(step, *, name, warmup, module, own_graphs, host_notes):
        asked.append(dict(name=name, module=module, own_graphs=own_graphs, host_notes=host_notes))
        if step.which == "nothing":
            from graph_harness.capture.count import EmptyStepError

            raise EmptyStepError("its step issued no work")
        rep = Repeatability(warmups=warmup, reset=hasattr(step, "reset"), repeatable=repeatable)
        export = exports[step.which]
        graph = _FakeGraph(export, durs[step.which])
        return CapturedStep(
            step=step,
            export=export,
            captured=SimpleNamespace(graph=graph),
            watch=SimpleNamespace(repeatability=rep),
            notes=(f"{name}: a note from its capture",),
        )

    monkeypatch.setattr(PS, "capture_step", capture_step)
    asked = []
    return asked


def _a_step(which, reset=None):
    def step():
        raise AssertionError("the stand-in graph is replayed, never the step")

    step.which = which
    if reset is not None:
        step.reset = reset
    return step


def test_profile_step_captures_notes_and_prices_the_second_against_the_first(monkeypatch):
    from graph_harness.capture.profile.step import profile_step

    exports, durs, _ = _stand_in_for_the_gpu(monkeypatch)
    asked = _stand_in_captures(monkeypatch, exports, durs)
    resets, notes, said, before = [], [], [], []
    steps = {"eager": _a_step("shipped", reset=lambda: resets.append(1)), "fused": _a_step("fused")}
    result = profile_step(
        steps,
        ProfileSettings(trials=4, windows=1, replays=4),
        shown={"eager": "mod.py:eager"},
        note=notes.append,
        progress=said.append,
        before=before.append,
    )
    assert list(result.profiles) == ["eager", "fused"] and result.pairs == [("eager", "fused")]
    assert result.checks == {} and before == ["eager", "fused"]
    assert said[:2] == ["capturing mod.py:eager", "capturing fused"]
    assert notes[0] == "mod.py:eager: a note from its capture"
    assert any(n.startswith("mod.py:eager has a step.reset") for n in notes), notes
    assert not any(n.startswith("fused has a step.reset") for n in notes), notes
    assert resets, "a step with a reset is reset before its runs of replays"
    # unchecked: a step's own graphs counted by recording them, its host values noted
    assert [(a["name"], a["own_graphs"], a["host_notes"]) for a in asked] == [
        ("mod.py:eager", True, True),
        ("fused", True, True),
    ]
    for name, which in (("eager", "shipped"), ("fused", "fused")):
        assert list(result.profiles[name].nodes.dur_us) == pytest.approx(list(durs[which].values()))


def test_profile_step_names_the_step_that_issued_no_work(monkeypatch):
    from graph_harness.capture.count import EmptyStepError
    from graph_harness.capture.profile.step import profile_step

    exports, durs, _ = _stand_in_for_the_gpu(monkeypatch)
    _stand_in_captures(monkeypatch, exports, durs)
    steps = {"a": _a_step("shipped"), "b": _a_step("nothing")}
    with pytest.raises(EmptyStepError, match=r"^'mod.py:b': its step issued no work"):
        profile_step(
            steps, ProfileSettings(trials=2, windows=1, replays=2), shown={"b": "mod.py:b"}
        )


def test_profile_step_refuses_a_step_that_cannot_take_replays_before_any(monkeypatch):
    from graph_harness.capture.profile.step import profile_step
    from graph_harness.capture.state.steps import StepStateError

    exports, durs, _ = _stand_in_for_the_gpu(monkeypatch)
    _stand_in_captures(monkeypatch, exports, durs, repeatable=False)
    step = _a_step("shipped")
    with pytest.raises(StepStateError, match="step"):
        profile_step(step, ProfileSettings(trials=2, windows=1, replays=2))


def test_profile_step_stops_at_a_failed_check_with_every_result(monkeypatch):
    import graph_harness.capture.profile.step as PS
    from graph_harness.capture.check.findings import CheckFailed
    from graph_harness.capture.profile.step import profile_step

    exports, durs, _ = _stand_in_for_the_gpu(monkeypatch)
    asked = _stand_in_captures(monkeypatch, exports, durs)
    profiled = []
    monkeypatch.setattr(PS, "profile_steps", lambda *a, **k: profiled.append(1))

    def check_captured(step, export, captured, rep, *, name, steps):
        from types import SimpleNamespace

        status = "failed" if step.which == "fused" else "passed"
        return SimpleNamespace(
            status=status, passed=status == "passed", headline=lambda: f"{name} {status}"
        )

    monkeypatch.setattr(PS, "check_captured", check_captured)
    steps = {"a": _a_step("shipped"), "b": _a_step("fused")}
    with pytest.raises(CheckFailed, match="b failed") as e:
        profile_step(steps, ProfileSettings(trials=2, windows=1, replays=2), check=4)
    assert set(e.value.results) == {"a", "b"} and e.value.results["a"].passed
    assert profiled == [], "nothing is profiled after a check that did not pass"
    # checked: graphs of graph-harness's own, the host values left to the check's findings
    assert {(a["own_graphs"], a["host_notes"]) for a in asked} == {(False, False)}


@pytest.mark.gpu
def test_profile_step_from_python_matches_every_node():
    from graph_harness.capture import profile_step
    from tests.llama_example import load_example

    step = load_example().make_tiny_step()
    result = profile_step(step, QUICK, module=step.module, check=2)
    (p,) = result.profiles.values()
    m = p.matching
    assert m["verified"] and m["unmatched_activities"] == m["unmatched_nodes"] == 0, m
    assert result.checks["step"].passed
    # every kernel, copy and set the export holds was found among CUPTI's activities
    launching = sum(n["type"] in ("kernel", "memcpy", "memset") for n in p.export.nodes)
    assert m["nodes"] == launching > 0, m


@pytest.mark.gpu
def test_a_tiny_graphs_launch_is_exposed_and_a_long_ones_hidden_on_a_gpu():
    # Two graphs at the ends of the range, replayed back to back under CUPTI: 16 empty
    # kernels over 16 streams (a few us of GPU work, about 16 us of host launch on the
    # H200: BENCHMARKS.md, issue 43) and a chain of 200 adds over 16 M floats (about 4 ms
    # of work). The first's launch cannot hide behind so little work; the second's is
    # queued long before the GPU runs dry.
    from graph_harness.capture.count import capture_and_keep
    from graph_harness.capture.profile.run import profile_steps
    from graph_harness.capture.replay.host import shaped
    from graph_harness.capture.replay.kinds import get_kind

    empty = get_kind("triton-empty").make(torch.device("cuda"))
    x = torch.randn(1 << 24, device="cuda")

    def long():
        for _ in range(200):
            x.add_(1e-3)

    tiny = capture_and_keep(shaped(empty, 16, 16))
    heavy = capture_and_keep(long)
    from graph_harness.capture.profile.activities import profiled

    before = profiled()  # another test's profiler session in this process, or not
    result = profile_steps(
        {"tiny": (tiny.export, tiny.captured.graph), "long": (heavy.export, heavy.captured.graph)},
        ProfileSettings(trials=6, windows=2, replays=8, calibration_rounds=4),
    )
    s = result.summary().set_index("name")
    cols = ["host_launch_us", "launch_us", "lead_gap_us", "launch_late_us", "exposed_us"]
    shown = s[[*cols, "launch", "launch_why"]].to_dict("index")
    assert s.loc["long", "launch"] == "hidden", shown
    assert s.loc["long", "launch_late_us"] < -1000, shown  # queued milliseconds ahead
    assert s.loc["tiny", "launch"] == "exposed", shown
    assert 0 < s.loc["tiny", "exposed_us"] <= s.loc["tiny", "lead_gap_us"], shown
    # Host launches timed after a profiler session in the process read 4-26x high
    # (BENCHMARKS.md, issue 43, session 19's A/B), so no order between the two graphs'
    # is asserted here; the result says whether its launches came after one.
    assert result.options["host_launch_after_profiler"] is before
    assert s.host_launch_us.gt(0).all(), shown
