"""Where a priced saving comes from (`pair_breakdown`): two profiles' node costs set side
by side by group, type and kernel."""

from __future__ import annotations

import numpy as np
import pandas as pd

from graph_harness.capture.profile.nodes import VariantProfile

BREAKDOWN_COLUMNS = ["a", "b", "part", "group", "type", "kernel", "nodes_a", "nodes_b"]
BREAKDOWN_COLUMNS += ["cost_a_us", "cost_b_us", "saving_us"]


def pair_breakdown(a: VariantProfile, b: VariantProfile) -> pd.DataFrame:
    """Where a saving A -> B comes from, by group and kernel (mean costs per replay): nodes
    only A has (`removed`), only B has (`added`), and nodes both have (`common`: the k-th
    node of one group, type and kernel in A against the k-th in B). A change that only
    removed nodes would show common rows near zero; the common rows that are not are the
    nodes whose cost the change moved. Rows sum to the mean-based predicted saving;
    sorted by |saving|."""
    sides = []
    for p in (a, b):
        s = p.nodes.assign(cost=p.nodes.dur_mean + p.nodes.gap_mean)
        s["kernel"] = s["kernel"].fillna("")
        s["k"] = s.groupby(["group", "type", "kernel"]).cumcount()
        sides.append(s.set_index(["group", "type", "kernel", "k"]).cost)
    both = pd.concat(sides, axis=1, keys=["a", "b"])
    both["part"] = np.where(
        both.a.notna() & both.b.notna(), "common", np.where(both.a.notna(), "removed", "added")
    )
    both = both.reset_index()
    out = (
        both.groupby(["part", "group", "type", "kernel"])
        .agg(
            nodes_a=("a", "count"),
            nodes_b=("b", "count"),
            cost_a_us=("a", "sum"),
            cost_b_us=("b", "sum"),
        )
        .reset_index()
    )
    out["saving_us"] = out.cost_a_us - out.cost_b_us
    out.insert(0, "b", b.name)
    out.insert(0, "a", a.name)
    out = out.reindex(out.saving_us.abs().sort_values(ascending=False).index)
    return out[BREAKDOWN_COLUMNS].reset_index(drop=True)
