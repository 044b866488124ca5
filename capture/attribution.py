"""Node records with their scopes: from a captured graph (by capture frontiers) or from
dispatched operations (by the scope each ran in)."""

from __future__ import annotations

from typing import Any

from graph_harness.capture.dispatch import NON_LAUNCHING, Dispatched
from graph_harness.capture.graph_reader import RawNode, ancestors
from graph_harness.capture.scopes import ScopeMark


def nodes_from_graph(raw: list[RawNode], marks: list[ScopeMark]) -> list[dict[str, Any]]:
    """Node records with scopes: a scope's nodes are the ancestors of its end frontier
    minus the ancestors of its begin frontier. Child-graph nodes take their parent's."""
    index = {n.handle: i for i, n in enumerate(raw)}
    top = [n for n in raw if n.parent is None]
    parents = {n.handle: n.deps for n in top}
    scope_of: dict[int, tuple[int | None, str]] = {}
    for m in marks:
        for h in ancestors(m.end, parents) - ancestors(m.begin, parents):
            if h in scope_of:
                raise RuntimeError(f"node {h:#x} falls in two scopes; scopes must not overlap")
            scope_of[h] = (m.key.stage, m.key.step)
    out = []
    for i, n in enumerate(raw):
        owner = n.handle if n.parent is None else _top_parent(n, raw, index)
        stage, step = scope_of.get(owner, (None, "unscoped"))
        out.append(
            {
                "index": i,
                "type": n.kind,
                "kernel": n.kernel,
                "grid": list(n.grid) if n.grid else None,
                "block": list(n.block) if n.block else None,
                "stage": stage,
                "step": step,
                "deps": sorted(index[d] for d in n.deps),
                "parent": None if n.parent is None else index[n.parent],
                **(
                    {"programmatic_deps": [index[d] for d in n.programmatic_deps]}
                    if n.programmatic_deps
                    else {}
                ),
            }
        )
    return out


def _top_parent(n: RawNode, raw: list[RawNode], index: dict[int, int]) -> int:
    while n.parent is not None:
        n = raw[index[n.parent]]
    return n.handle


def nodes_from_dispatch(records: list[Dispatched]) -> list[dict[str, Any]]:
    """Node records from dispatched ops, in dispatch order; each depends on the previous
    launching one (one stream: program order)."""
    out, last = [], None
    for i, r in enumerate(records):
        out.append(
            {
                "index": i,
                "type": r.type,
                "kernel": r.name,
                "grid": None,
                "block": None,
                "stage": r.stage,
                "step": r.step if r.step is not None else "unscoped",
                "deps": [] if last is None else [last],
                "parent": None,
            }
        )
        if r.type not in NON_LAUNCHING:
            last = i
    return out
