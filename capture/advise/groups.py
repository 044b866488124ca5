"""Candidates grouped and priced: identical candidates (capture/advise/candidates.py) form a
group, each group's saving per replay of the export's graph, the groups ranked by it. Not
the measured side (capture/advise/measured.py) nor the document (capture/advise/advice.py).

Identical: the same scope with stage and layer indices stripped and the same kernels in
order. Each removed node is priced at its type's chain slope (capture/advise/costs.py), or
at the slope of a chain that replays the candidate's own nodes, work included, where a
workload registers one (hooks.py). docs/advise.md, "Groups and prices".
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass
from typing import Any

from graph_harness.capture.advise.candidates import Candidate, Kind, find_candidates, node_role
from graph_harness.capture.advise.costs import Costs
from graph_harness.capture.advise.hooks import step_chains
from graph_harness.capture.attribution.labels import generalize
from graph_harness.capture.export.nodes import NodeExport
from graph_harness.capture.graph.node_types import NON_LAUNCHING
from graph_harness.capture.replay.kinds import TYPE_CHAIN

# The node type a removed node of each role is priced as, where its own type has no chain
# (the CPU source's ATen ops).
_ROLE_PRICE = {"kernel": "kernel", "library": "kernel", "copy": "memcpy", "set": "memset"}


@dataclass(frozen=True)
class Group:
    """Identical candidates (same kind, scope pattern and kernels), priced together."""

    rank: int
    kind: Kind
    scope: str  # the run's scope pattern (`stage*/pack`); the innermost label
    scope_path: tuple[str, ...]  # the pattern of its whole scope path
    kernels: tuple[str, ...]  # the run's kernels in order (a copy or set: its type)
    types: tuple[str, ...]  # the run's node types in order
    anchor_kernel: str | None  # copies-after-kernel: the kernel they follow
    anchor_scope: str | None  # and its scope pattern
    occurrences: int
    nodes_now: int  # per occurrence, the kernel the copies follow included
    nodes_after: int  # per occurrence: 1
    removed_by_type: dict[str, int]  # all occurrences
    us_per_node: float  # the price of one removed node (their mean)
    priced_by: str  # which chain's slope, and why
    saving_us: float  # all occurrences, per replay of the graph
    saving_by_type_us: float  # the same nodes priced by type alone
    steps: tuple[str, ...]  # the built-in round's steps its nodes (and anchor) are in
    scopes: tuple[str, ...]  # the scope labels it occurs in
    nodes: tuple[tuple[int, ...], ...]  # node indices per occurrence, anchor first
    kept: tuple[int, ...]  # per occurrence, the node that stays
    own_chain: str | None  # the chain that priced every occurrence, if one did

    @property
    def removed_nodes(self) -> int:
        return sum(self.removed_by_type.values())


def _type_price(costs: Costs, node_type: str) -> tuple[str, float]:
    """(chain kind, us/node) pricing one removed node of `node_type` by type; a type
    whose chain is missing from the costs is priced as a kernel node."""
    kind = TYPE_CHAIN.get(node_type, TYPE_CHAIN["kernel"])
    if costs.slope(kind) is None:
        kind = TYPE_CHAIN["kernel"]
    return kind, costs.slope(kind)


def _price_type(node: dict[str, Any]) -> str:
    """The node type a removed node is priced as: its own on a graph; on the CPU source
    copies as memcpy, sets as memset, every other op as a kernel."""
    if node["type"] in TYPE_CHAIN:
        return node["type"]
    return _ROLE_PRICE.get(node_role(node) or "kernel", "kernel")


def _own_chains(export: NodeExport, cands: list[Candidate], costs: Costs) -> list[str | None]:
    """For each candidate, the chain kind that replays exactly its nodes with their real
    shapes, if the costs hold one: where a workload registered which chain replays a step's
    call (capture/advise/hooks.py), a candidate that is a whole step's call (on the
    built-in round: the shipped pack's ten kernels, the allocating compaction's two
    copies). None elsewhere."""
    chain_of = step_chains(export)
    if chain_of is None:
        return [None] * len(cands)
    nodes = export.nodes
    calls: dict[tuple, list[int]] = defaultdict(list)  # (stage, step) -> its nodes
    for i, n in enumerate(nodes):
        if n["type"] not in NON_LAUNCHING:
            calls[(n["stage"], n["step"])].append(i)
    out = []
    for c in cands:
        first = nodes[c.run[0]]
        kind = None
        if tuple(calls[(first["stage"], first["step"])]) == c.run:
            kind = chain_of(first["step"])
        out.append(kind if kind is not None and costs.slope(kind) is not None else None)
    return out


def _label(node: dict[str, Any]) -> str:
    return node["kernel"] or node["type"]


def rank_groups(export: NodeExport, costs: Costs) -> list[Group]:
    """Every candidate of `export` in its group, the groups priced with `costs` and ranked
    by saving per replay of its graph (then nodes removed, then position), best first."""
    nodes = export.nodes
    cands = find_candidates(export)
    chains = dict(zip(cands, _own_chains(export, cands, costs)))
    by_key: dict[tuple, list[Candidate]] = defaultdict(list)
    for c in cands:
        run = [nodes[i] for i in c.run]
        anchor = nodes[c.anchor] if c.anchor is not None else None
        key = (
            c.kind,
            tuple(generalize(s) for s in run[0]["scope_path"]),
            tuple((n["type"], n["kernel"] or "") for n in run),
            None if anchor is None else (_label(anchor), generalize(anchor["scope"])),
        )
        by_key[key].append(c)
    groups = [_group(export, costs, key, group, chains) for key, group in by_key.items()]
    groups.sort(key=lambda g: (-g.saving_us, -g.removed_nodes, g.nodes[0][0]))
    return [_with_rank(g, r) for r, g in enumerate(groups, 1)]


def _with_rank(g: Group, rank: int) -> Group:
    return Group(**{**asdict(g), "rank": rank})


def _group(
    export: NodeExport,
    costs: Costs,
    key: tuple,
    cands: list[Candidate],
    chains: dict[Candidate, str | None],
) -> Group:
    kind, path, kernels, anchor = key
    nodes = export.nodes
    removed_by_type: dict[str, int] = defaultdict(int)
    saving = by_type = 0.0
    own = {chains[c] for c in cands}
    for c in cands:
        chain = chains[c]
        for i in c.removed:
            removed_by_type[nodes[i]["type"]] += 1
            _, typed = _type_price(costs, _price_type(nodes[i]))
            by_type += typed
            saving += typed if chain is None else costs.slope(chain)
    removed = sum(removed_by_type.values())
    if own == {None}:
        used = sorted({_type_price(costs, _price_type(nodes[i])) for c in cands for i in c.removed})
        priced_by = "by node type: " + ", ".join(f"{k} {us:.3f}" for k, us in used)
    elif None not in own and len(own) == 1:
        (chain,) = own
        priced_by = f"its own chain: {chain} {costs.slope(chain):.3f}"
    else:
        priced_by = "partly its own chain, partly by node type"
    steps = sorted({nodes[i]["step"] for c in cands for i in c.nodes})
    scopes = []
    for c in cands:
        if nodes[c.run[0]]["scope"] not in scopes:
            scopes.append(nodes[c.run[0]]["scope"])
    return Group(
        rank=0,
        kind=kind,
        scope=path[-1] if path else "unscoped",
        scope_path=path,
        kernels=tuple(k or t for t, k in kernels),
        types=tuple(t for t, _ in kernels),
        anchor_kernel=None if anchor is None else anchor[0],
        anchor_scope=None if anchor is None else anchor[1],
        occurrences=len(cands),
        nodes_now=len(cands[0].nodes),
        nodes_after=1,
        removed_by_type=dict(removed_by_type),
        us_per_node=saving / removed,
        priced_by=priced_by,
        saving_us=saving,
        saving_by_type_us=by_type,
        steps=tuple(steps),
        scopes=tuple(scopes),
        nodes=tuple(c.nodes for c in cands),
        kept=tuple(c.kept for c in cands),
        own_chain=next(iter(own)) if len(own) == 1 else None,
    )
