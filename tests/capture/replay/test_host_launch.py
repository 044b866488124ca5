"""The host side of a launch (capture/replay/host.py): the timing's plumbing on the CPU
with a clock and graphs stood in (each launch costs what its graph's node count says), the
fit recovering what the stand-in charges; the real launches on a GPU."""

import gc
import math
import time

import pandas as pd
import pytest
import torch

import graph_harness.capture.replay.host as H
from graph_harness.capture.replay.document import HOST_TRIAL_COLUMNS


class Clock:
    def __init__(self):
        self.ns = 0

    def __call__(self):
        return self.ns


class StandIn:
    """A graph whose launch costs `fixed + per_node * nodes` us of host time, plus a
    wobble that repeats every 3 launches (so medians have something to take)."""

    def __init__(self, clock, nodes, per_node=0.05, fixed=4.0, log=None, name=""):
        self.clock, self.nodes, self.per_node, self.fixed = clock, nodes, per_node, fixed
        self.launches, self.log, self.name = 0, log, name

    def replay(self):
        wobble = (0.0, 0.3, -0.2)[self.launches % 3]
        self.launches += 1
        if self.log is not None:
            self.log.append((self.name, gc.isenabled()))
        self.clock.ns += round((self.fixed + self.per_node * self.nodes + wobble) * 1e3)


@pytest.fixture
def clock(monkeypatch):
    c = Clock()
    syncs = []
    monkeypatch.setattr(time, "perf_counter_ns", c)
    monkeypatch.setattr(H, "sync", lambda: syncs.append(c.ns))
    c.syncs = syncs
    return c


def test_each_launch_is_timed_alone_from_a_synchronized_device(clock):
    log = []
    graphs = {n: StandIn(clock, nodes, log=log, name=n) for n, nodes in (("a", 64), ("b", 1024))}
    times = H.time_launches_us(graphs, trials=4, launches=3, warmup=2)
    # the median of the three wobbles (0, +0.3, -0.2) is the cost itself
    assert times["a"] == pytest.approx([4.0 + 0.05 * 64] * 4)
    assert times["b"] == pytest.approx([4.0 + 0.05 * 1024] * 4)
    timed = log[2 * 2 :]  # after each graph's two warm-up launches
    order = [n for n, _ in timed[::3]]
    assert order == ["a", "b", "b", "a", "a", "b", "b", "a"], "trials interleaved, reversed"
    assert not any(on for _, on in timed), "the collector is held off while launches are timed"
    assert gc.isenabled()
    # a sync before every timed launch and after each graph's trial: none inside the span
    assert len(clock.syncs) == 1 + 4 * 2 * (3 + 1)


def test_the_fit_recovers_the_cost_per_node_and_the_fixed_cost(clock):
    graphs = {f"triton-empty|chain|{n}": StandIn(clock, n, per_node=0.031) for n in H.HOST_LENGTHS}
    times = H.time_launches_us(graphs, trials=6, launches=3, warmup=1)
    rows = [
        dict(kind="triton-empty", shape="chain", branches=1, calls=n, nodes=n, trial=t, us=us)
        for (key, ts), n in zip(times.items(), H.HOST_LENGTHS)
        for t, us in enumerate(ts)
    ]
    (fit,) = H.host_fits(pd.DataFrame(rows, columns=HOST_TRIAL_COLUMNS)).itertuples()
    assert fit.slope == pytest.approx(0.031) and fit.intercept == pytest.approx(4.0)
    # exact medians: an interval of no width, at the cost (to rounding)
    assert fit.slope_lo - 1e-9 <= 0.031 <= fit.slope_hi + 1e-9 and fit.r2 == pytest.approx(1.0)
    assert list(H.host_fits(pd.DataFrame(rows)).columns) == H.HOST_FIT_COLUMNS


def test_a_shape_or_device_it_cannot_time_is_refused_by_name():
    with pytest.raises(ValueError, match="unknown graph shape.*star.*choose from chain"):
        H.measure_host_launch(shapes=["chain", "star"], device="cpu")
    with pytest.raises(RuntimeError, match="need a CUDA device"):
        H.measure_host_launch(device="cpu")


@pytest.mark.gpu
def test_host_launches_on_a_gpu_grow_with_nodes_in_every_shape():
    from graph_harness.capture.graph.capture import capture_graph
    from graph_harness.capture.graph.reader import read_graph
    from graph_harness.capture.replay.kinds import get_kind

    trials, fits = H.measure_host_launch(
        ["triton-empty"], lengths=(64, 1024, 4096), trials=6, launches=3
    )
    assert set(fits["shape"]) == set(H.SHAPES) and len(trials) == 3 * 3 * 6
    for f in fits.itertuples():
        assert f.slope > 0 and f.slope_lo <= f.slope <= f.slope_hi, f
        assert not math.isnan(f.intercept)
    # the shapes are what they say: as many roots as branches, one node per empty call
    call = get_kind("triton-empty").make(torch.device("cuda"))
    for shape, branches in H.SHAPES.items():
        g = capture_graph(H.shaped(call, 256, branches)).graph
        nodes = read_graph(g.raw_cuda_graph())
        assert len(nodes) == 256, (shape, len(nodes))
        assert sum(not n.deps for n in nodes) == branches, shape


def test_host_launch_figures_round_trip_through_the_replay_document(tmp_path):
    from graph_harness.capture.replay.document import ReplayDocumentError, ReplayResult
    from graph_harness.capture.stats import fit_chain

    trials = pd.DataFrame(
        [
            dict(kind="triton-empty", shape="wide", branches=64, calls=n, nodes=n, trial=t,
                 us=3.0 + 0.02 * n + 0.1 * t)
            for n in (64, 1024) for t in range(3)
        ],
        columns=HOST_TRIAL_COLUMNS,
    )  # fmt: skip
    fits = H.host_fits(trials)
    empty = pd.DataFrame(columns=["kind", "calls", "nodes", "trial", "us"])
    fit = fit_chain([1, 2], [[1.0, 1.1], [2.0, 2.1]])
    base = dict(chain_trials=empty, fits=pd.DataFrame([dict(kind="torch-add", **fit.__dict__)]))
    path = ReplayResult(**base, host_trials=trials, host_fits=fits).write_json(tmp_path / "r.json")
    back = ReplayResult.read_json(path)
    pd.testing.assert_frame_equal(back.host_trials, trials, check_dtype=False)
    pd.testing.assert_frame_equal(back.host_fits, fits, check_dtype=False)
    # a document from before host launches were measured reads, without them
    old = ReplayResult(**base).to_dict()
    del old["host_trials"], old["host_fits"]
    assert ReplayResult.from_dict(old).host_fits is None
    # a bad figure in them is refused by name
    doc = ReplayResult(**base, host_trials=trials, host_fits=fits).to_dict()
    doc["host_trials"][0]["branches"] = 0
    with pytest.raises(ReplayDocumentError, match=r"host_trials\[0\]\.branches"):
        ReplayResult.from_dict(doc)


def test_replay_measures_the_host_side_of_the_kinds_it_measures_unless_told_not_to(monkeypatch):
    import graph_harness.capture.round.replays as R
    from graph_harness.capture.round.params import RoundParams

    asked = []
    trials = pd.DataFrame(columns=HOST_TRIAL_COLUMNS)
    monkeypatch.setattr(R, "measure_chains", lambda kinds, settings, **kw: (trials, trials))
    monkeypatch.setattr(R, "environment", lambda device: {"device": "stand-in"})

    def host(kinds, **kw):
        asked.append(list(kinds))
        return trials, H.host_fits(trials)

    monkeypatch.setattr(R, "measure_host_launch", host)
    p = RoundParams(stages=1)
    got = R.run_replays(p, [], kinds=["torch-add", "memcpy"])
    assert asked == [["torch-add"]] and got.host_fits is not None
    assert R.run_replays(p, [], kinds=["memcpy"]).host_fits is None  # no kind of its own
    assert R.run_replays(p, [], kinds=["torch-add"], host=False).host_trials is None
    assert asked == [["torch-add"]], "not measured where not asked for"


def test_count_replays_a_steps_graph_only_where_it_can_take_replays(clock):
    from graph_harness.capture.state.steps import Repeatability

    graph = StandIn(clock, 100)
    # not watched: nothing known of the step's state, so nothing replayed
    us, why = H.captured_launch_us(graph, "t", step=lambda: None, repeatability=None)
    assert us is None and "not watched" in why and graph.launches == 0
    # a step whose state advances at every call, with no reset: refused, in its own words
    advances = Repeatability(warmups=2, reset=False, repeatable=False)
    us, why = H.captured_launch_us(graph, "t", step=lambda: None, repeatability=advances)
    assert us is None and why.startswith("not measured: ") and graph.launches == 0
    assert why.removeprefix("not measured: ") == advances.refusal("t")
    # with a reset: reset before every trial's launches and once at the end
    resets = []

    def step():
        pass

    step.reset = lambda: resets.append(graph.launches)
    ok = Repeatability(warmups=2, reset=True, repeatable=True)
    us, why = H.captured_launch_us(graph, "t", step=step, repeatability=ok, trials=4, launches=3)
    assert why is None and us == pytest.approx(4.0 + 0.05 * 100)
    assert graph.launches == 1 + 4 * 3, "one warm-up, then trials x launches: no more"
    assert resets == [0, 1, 4, 7, 10, 13], "before the warm-up, each trial, and at the end"
    # our own graph (no step): replayed as it is
    us, why = H.captured_launch_us(StandIn(clock, 10), "round", trials=2, launches=3)
    assert why is None and us == pytest.approx(4.5)
