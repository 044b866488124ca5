"""Synthetic graphs and what CUPTI would record of them: nodes and exports, serial chains,
one replay's activities on one stream, profile windows of replays; a model step's scope
paths (MODEL_PATHS) and its profile with times drawn as CUPTI gives them. The right
answer of every matching and costing test is known from these."""

import random

import torch

from graph_harness.capture.export.nodes import NodeExport
from graph_harness.capture.profile.activities import Activity
from graph_harness.capture.profile.nodes import Window, profile_windows


def node(i, type_="kernel", kernel="k", deps=(), scope_path=(), parent=None, stage=None):
    path = list(scope_path)
    return dict(
        index=i,
        type=type_,
        kernel=kernel if type_ == "kernel" else "",
        grid=None,
        block=None,
        stage=stage,
        step=path[-1].split("/")[-1] if path else "unscoped",
        scope=path[-1] if path else "unscoped",
        scope_path=path,
        deps=list(deps),
        parent=parent,
    )


def export_of(nodes, workload="callable:step"):
    return NodeExport(
        source="cuda-graph", workload=workload, variant=None, params=None, nodes=nodes
    )


def chain(names, scopes=None):
    """A serial graph: node i depends on node i - 1."""
    scopes = scopes or [()] * len(names)
    return [
        node(i, "kernel", k, [i - 1] if i else [], s) for i, (k, s) in enumerate(zip(names, scopes))
    ]


def cupti_name(n) -> str:
    if n["type"] == "kernel":
        return torch._C._demangle(n["kernel"]) if n["kernel"].startswith("_Z") else n["kernel"]
    return {"memcpy": "Memcpy DtoD (Device -> Device)", "memset": "Memset (Device)"}[n["type"]]


def run_serially(nodes, order, dur, gap, t0=0.0, correlation=None, names=None):
    """One replay on one stream: the nodes of `order` one after another, node n starting
    gap[n] after the previous activity ended and lasting dur[n]. Returns the activities
    and the time the replay ended."""
    acts, t = [], t0
    kinds = {"kernel": "kernel", "memcpy": "memcpy", "memset": "memset"}
    for n in order:
        s = t + gap[n]
        name = (names or {}).get(n, cupti_name(nodes[n]))
        kind = "kernel" if name == "memcpy32_post" else kinds[nodes[n]["type"]]
        acts.append(Activity(kind, name, s, s + dur[n], stream=7, correlation=correlation))
        t = s + dur[n]
    return acts, t


def windows_of(nodes, order, dur, gap, *, replays=5, windows=2, names=None):
    out = []
    for w in range(windows):
        t, reps = 1000.0 * w, []
        for r in range(replays + 1):
            acts, t = run_serially(nodes, order, dur, gap, t, correlation=r, names=names)
            reps.append(acts)
        out.append(Window(0, w, reps))
    return out


# A model step's scope paths, node by node (also the trace tests' step).
MODEL_PATHS = [
    (),
    ("layers.0", "layers.0.attention"),
    ("layers.0", "layers.0.attention"),
    ("layers.0", "layers.0.feed_forward"),
    ("layers.0",),
    ("layers.1", "layers.1.attention"),
    ("layers.1", "layers.1.feed_forward"),
    ("layers.1", "layers.1.feed_forward", "sample"),  # a user's scope inside a module
    ("norm",),
]


def _times(n):
    """Durations and gaps as CUPTI gives them (ns or finer, not on any grid)."""
    dur = {i: random.uniform(0.5, 40.0) for i in range(n)}
    gap = {i: random.uniform(0.2, 6.0) for i in range(n)}
    return dur, gap


def _windows(nodes, dur, gap, replays=5, windows=2):
    """Windows of back-to-back serial replays, each starting at an odd time (a CUPTI
    clock reads anything); returns them and each window's origin (its lead-in's end)."""
    out, origins = [], []
    order = [n["index"] for n in nodes]
    for w in range(windows):
        t, reps = random.uniform(1e6, 5e6), []
        for r in range(replays + 1):
            acts, t = run_serially(nodes, order, dur, gap, t, correlation=r)
            reps.append(acts)
            if r == 0:
                origins.append(t)
        out.append(Window(0, w, reps))
    return out, origins


def _model(kernels=None):
    """A serial step of MODEL_PATHS' scopes, profiled from synthetic CUPTI activities; returns
    the profile, its windows, their origins and the simulated durations and gaps."""
    nodes = chain(kernels or [f"k{i}" for i in range(len(MODEL_PATHS))], MODEL_PATHS)
    dur, gap = _times(len(nodes))
    ws, origins = _windows(nodes, dur, gap)
    return profile_windows("model", export_of(nodes), ws), ws, origins, dur, gap
