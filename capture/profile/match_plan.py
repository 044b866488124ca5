"""The matching plan of an export's nodes (capture/profile/matching.py matches activities
by it): its activity nodes (kernel, memcpy, memset: each one device activity per replay),
the key each is matched by, and the activity nodes each waits for, through the nodes that
run no activity (events, empty and host nodes, child-graph containers)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from graph_harness.capture.attribution.node import Node
from graph_harness.capture.graph.reader import demangle

ACTIVITY_TYPES = ("kernel", "memcpy", "memset")


Key = tuple[str, str]  # (node type, demangled kernel name or "")


@dataclass(frozen=True)
class MatchPlan:
    """The activity nodes of an export (indices, in index order), the key each is matched
    by, and for each the activity nodes it waits for (through non-activity nodes)."""

    nodes: tuple[int, ...]
    key: dict[int, Key]
    deps: dict[int, frozenset[int]]
    dependents: dict[int, tuple[int, ...]] = field(default_factory=dict)
    nested: bool = False  # some activity node sits in a child graph (no id route)


def node_key(node: Node) -> Key:
    return (node["type"], demangle(node["kernel"] or "") if node["type"] == "kernel" else "")


def plan_of(nodes: Sequence[Node]) -> MatchPlan:
    """The matching plan of an export's node records (NodeExport.nodes).

    A node's effective dependencies are the activity nodes among its dependencies; through
    a non-activity dependency, that node's own; through a child-graph node, every activity
    node inside it; a root node inside a child graph waits for what its parent waits for."""
    walk = _Waits(nodes)
    by_index = walk.by_index
    acts = tuple(n["index"] for n in nodes if n["type"] in ACTIVITY_TYPES)
    deps = {i: walk.waits(i) for i in acts}
    dependents: dict[int, list[int]] = defaultdict(list)
    for i in acts:
        for d in sorted(deps[i]):
            dependents[d].append(i)
    return MatchPlan(
        nodes=acts,
        key={i: node_key(by_index[i]) for i in acts},
        deps=deps,
        dependents={d: tuple(v) for d, v in dependents.items()},
        nested=any(by_index[i]["parent"] is not None for i in acts),
    )


class _Waits:
    """Each node's effective dependencies (plan_of's docstring), memoized."""

    def __init__(self, nodes: Sequence[Node]) -> None:
        self.by_index = {n["index"]: n for n in nodes}
        self.children: dict[int, list[int]] = defaultdict(list)
        for n in nodes:
            if n["parent"] is not None:
                self.children[n["parent"]].append(n["index"])
        self.memo: dict[int, frozenset[int]] = {}

    def inside(self, g: int) -> set[int]:
        """Every activity node inside child-graph node g."""
        out: set[int] = set()
        for c in self.children[g]:
            out |= {c} if self.by_index[c]["type"] in ACTIVITY_TYPES else self.inside(c)
        return out

    def before(self, d: int) -> set[int]:
        """The activity nodes that are done once d is."""
        t = self.by_index[d]["type"]
        if t in ACTIVITY_TYPES:
            return {d}
        if t == "graph":
            return self.inside(d) or set(self.waits(d))
        return set(self.waits(d))

    def waits(self, i: int) -> frozenset[int]:
        """The activity nodes node i waits for."""
        if i in self.memo:
            return self.memo[i]
        n = self.by_index[i]
        out: set[int] = set()
        for d in (*n["deps"], *n.get("launch_after", ())):  # launch order too (several graphs)
            out |= self.before(d)
        if not n["deps"] and n["parent"] is not None:
            out |= self.waits(n["parent"])
        self.memo[i] = frozenset(out)
        return self.memo[i]
