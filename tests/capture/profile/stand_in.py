"""The profile's GPU path with the GPU parts stood in for: a graph whose replays under
CUPTI give a serial schedule of its export's nodes, the calibration a profiler's excess
gives, and `_stand_in_for_the_gpu`, which patches capture/profile/run.py to use them
(rounds of variants A and B, see variants.py)."""

import pandas as pd

from tests.capture.profile.synthetic import export_of, run_serially
from tests.capture.profile.variants import A, B, _trials, _variant


class _FakeGraph:
    """Stands in for a captured graph: 'replaying' it under CUPTI gives a serial schedule
    of its export's nodes with the durations `dur` (gaps 0.5 us)."""

    def __init__(self, export, dur):
        self.export, self.dur = export, dur
        self.replays = 0

    def replay(self):
        self.replays += 1


LAUNCH_EARLY = 100.0  # us: each stand-in launch call returns this long before the GPU runs dry


def _fake_record(graph, replays, warmup=5, what="", outside=None, launched=None):
    from graph_harness.capture.profile.activities import Launch

    graph = getattr(graph, "graph", graph)  # a Replayer's graph
    nodes = graph.export.nodes
    order = [n["index"] for n in nodes if n["type"] in ("kernel", "memcpy", "memset")]
    gap = dict.fromkeys(order, 0.5)
    t, out = 0.0, []
    for r in range(replays):
        end = t - LAUNCH_EARLY  # the launch call returns before the replay before it ends
        acts, t = run_serially(nodes, order, graph.dur, gap, t, correlation=r)
        out.append(acts)
        if launched is not None:
            launched.append(Launch(r, end - 4.0, end))
    return out


STAND_IN_HOST_US = 4.0  # the stand-in's host launch time of its first graph, us
STAND_IN_EXCESS = 0.1  # us per node: what the stand-in's profiler adds to every gap


def _stand_in_calibration(types, rounds, *, progress=None):
    """measure_excess on the stand-in: calibration rows whose chains run STAND_IN_EXCESS
    per node (plus a fixed 2 us per replay) longer profiled than timed, through the real
    arithmetic (excess_per_node)."""
    from graph_harness.capture.profile.calibration import (
        CALIBRATED_TYPES,
        CHAIN_NODES,
        excess_per_node,
    )

    rows = [
        dict(type=t, round=r, nodes=n, timed_us=n * 1.0, period_us=n * (1.0 + STAND_IN_EXCESS) + 2)
        for t in CALIBRATED_TYPES
        if t in types
        for r in range(rounds)
        for n in CHAIN_NODES
    ]
    return excess_per_node(pd.DataFrame(rows))


def _stand_in_for_the_gpu(monkeypatch):
    from types import SimpleNamespace

    import graph_harness.capture.profile.run as R
    import graph_harness.capture.round.profile as RP

    exports = {
        "shipped": export_of(_variant("shipped", A).export.nodes, "decode-round"),
        "fused": export_of(_variant("fused", B).export.nodes, "decode-round"),
    }
    durs = {"shipped": {i: c for i, (_, _, c) in enumerate(A)}}
    durs["fused"] = {i: c for i, (_, _, c) in enumerate(B)}
    seen = []

    def measure_rounds(params, variants, settings, *, pdl=False, after_build=None):
        for build in range(settings.builds):
            rounds = {
                v: SimpleNamespace(
                    export=exports[v],
                    captured=SimpleNamespace(graph=_FakeGraph(exports[v], durs[v])),
                )
                for v in variants
            }
            after_build(build, rounds)
            seen.append(build)
        # timed without the profiler: each node's gap STAND_IN_EXCESS shorter
        cost = {v: sum(durs[v].values()) + (0.5 - STAND_IN_EXCESS) * len(durs[v]) for v in variants}
        trials = _trials(cost["shipped"], cost["fused"], settings.builds, settings.trials, 0.001)
        return trials.assign(
            variant=lambda d: d.variant.map({"a": "shipped", "b": "fused"})
        ), exports

    def time_replays_us(graphs, *, replays, trials, warmup):
        return {n: [10.0 + i] * trials for i, n in enumerate(graphs)}

    monkeypatch.setattr(RP, "measure_rounds", measure_rounds)
    monkeypatch.setattr(R, "record_replays", _fake_record)
    monkeypatch.setattr(R, "local_ids", lambda graph, export: None)
    monkeypatch.setattr(R, "time_replays_us", time_replays_us)

    def time_launches_us(graphs, *, trials, launches, warmup):
        for g in graphs.values():  # its warm-up and each launch a replay, as on the GPU
            for _ in range(max(warmup, 1) + trials * launches):
                g.replay()
        return {n: [STAND_IN_HOST_US + i] * trials for i, n in enumerate(graphs)}

    monkeypatch.setattr(R, "time_launches_us", time_launches_us)
    for module in (R, RP):
        monkeypatch.setattr(module, "environment", lambda device: {"device": "stand-in"})
    monkeypatch.setattr(R, "measure_excess", _stand_in_calibration)
    return exports, durs, seen
