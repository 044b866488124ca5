"""Two round-like variants priced against each other, A (a pack of two nodes) and B (the
pack fused into one): each a synthetic profile over builds; and timed trials of a pair."""

import numpy as np
import pandas as pd

from graph_harness.capture.profile.nodes import profile_windows
from tests.capture.profile.synthetic import export_of, node, windows_of


def _variant(name, costs, builds=3, shift=None):
    """A round-like profile: a chain of kernels whose durations are `costs` (us), gaps 0.5,
    over `builds` builds, build b shifted by shift[b] us on its first node."""
    nodes = [
        node(i, "kernel", k, [i - 1] if i else [], [f"stage0/{s}"], stage=0)
        for i, (k, s, _) in enumerate(costs)
    ]
    ws = []
    for b in range(builds):
        dur = {i: c + (shift[b] if shift and i == 0 else 0) for i, (_, _, c) in enumerate(costs)}
        for w in windows_of(nodes, range(len(costs)), dur, dict.fromkeys(range(len(costs)), 0.5)):
            w.build = b
            ws.append(w)
    return profile_windows(name, export_of(nodes, "decode-round"), ws)


A = [("topk", "topk", 70.0), ("fill", "pack", 1.0), ("where", "pack", 1.0), ("copy_", "copy", 1.2)]
B = [("topk", "topk", 70.0), ("fused", "pack", 1.1), ("copy_", "copy", 1.5)]


def _trials(a_us, b_us, builds=3, n=20, noise=0.05, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        [
            dict(variant=v, build=bi, trial=t, us=m + rng.normal(0, noise))
            for v, m in (("a", a_us), ("b", b_us))
            for bi in range(builds)
            for t in range(n)
        ]
    )
