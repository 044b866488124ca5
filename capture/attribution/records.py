"""Node records with their scopes: from a captured graph (by capture frontiers) or from
dispatched operations (by the scopes open as each ran).

Every record carries `stage` and `step` (of its innermost scope: the built-in round's
columns), `scope` (the innermost scope's label, "unscoped" outside all) and `scope_path`
(the labels of the enclosing scopes, outermost first; [] outside all)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from graph_harness.capture.attribution.node import Node
from graph_harness.capture.graph.node_types import NON_LAUNCHING
from graph_harness.capture.scopes.names import UNSCOPED, ScopeKey

# Types only: a recorded process makes its graphs' records without the CPU's dispatch
# count, which brings graph-harness's kernels and Triton (a quarter second and more)
if TYPE_CHECKING:
    from graph_harness.capture.graph.dispatch import Dispatched
    from graph_harness.capture.graph.reader import RawNode
    from graph_harness.capture.scopes.recorder import ScopeMark


def scope_fields(stack: tuple[ScopeKey, ...]) -> dict[str, Any]:
    """The scope columns of a node that ran with `stack` open (outermost first)."""
    if not stack:
        return {"stage": None, "step": UNSCOPED, "scope": UNSCOPED, "scope_path": []}
    inner = stack[-1]
    return {
        "stage": inner.stage,
        "step": inner.step,
        "scope": inner.label,
        "scope_path": [k.label for k in stack],
    }


def first_seen(marks: list[ScopeMark], parents: dict[int, list[int]]) -> dict[int, int]:
    """For each node reachable from a boundary's frontier, the first boundary (index in
    `marks`) that has it as an ancestor: the node was captured in the interval ending there.

    One walk over the whole graph, stopping at nodes already seen: linear in nodes and
    edges however many scopes there are. Equal to "the ancestors of a scope's end minus
    those of its begin" because a capture stream's frontiers only grow."""
    seen: dict[int, int] = {}
    for i, m in enumerate(marks):
        stack = [h for h in m.frontier if h not in seen]
        while stack:
            h = stack.pop()
            if h in seen:
                continue
            seen[h] = i
            stack.extend(p for p in parents.get(h, ()) if p not in seen)
    return seen


def nodes_from_graph(
    raw: list[RawNode], marks: list[ScopeMark], *, frozen: bool = False
) -> list[Node]:
    """Node records with scopes (see `first_seen`); nodes after the last boundary are
    outside every scope. Child-graph nodes take their parent's. `frozen`: each sequence a
    tuple (a record a recording keeps for good: capture/record/kept.py), else a list."""
    seq = tuple if frozen else list
    index = {n.handle: i for i, n in enumerate(raw)}
    top = [n for n in raw if n.parent is None]
    parents = {n.handle: n.deps for n in top}
    when = first_seen(marks, parents)
    fields_of = [scope_fields(m.stack) for m in marks]
    outside = scope_fields(())
    if frozen:  # one tuple a scope, shared by its nodes: nothing can change it
        for f in (*fields_of, outside):
            f["scope_path"] = tuple(f["scope_path"])
    out = []
    top_of: dict[int, int] = {}  # a node's top-level owner, each found once (deep nesting)
    for i, n in enumerate(raw):
        owner = n.handle if n.parent is None else _top_parent(n, raw, index, top_of)
        at = when.get(owner)
        scoped = outside if at is None else fields_of[at]
        out.append(
            {
                "index": i,
                "type": n.kind,
                "kernel": n.kernel,
                "grid": seq(n.grid) if n.grid else None,
                "block": seq(n.block) if n.block else None,
                **scoped,
                "scope_path": scoped["scope_path"] if frozen else list(scoped["scope_path"]),
                "deps": seq(sorted([index[d] for d in n.deps])),
                "parent": None if n.parent is None else index[n.parent],
                **(
                    {"programmatic_deps": seq([index[d] for d in n.programmatic_deps])}
                    if n.programmatic_deps
                    else {}
                ),
            }
        )
    return out


def _top_parent(
    n: RawNode, raw: list[RawNode], index: dict[int, int], known: dict[int, int]
) -> int:
    """The top-level node a child graph's node is under (its parents' owners memoized
    in `known`: a parent's owner is its own, found once)."""
    path = []
    while n.parent is not None and n.parent not in known:
        path.append(n.parent)
        n = raw[index[n.parent]]
    top = known[n.parent] if n.parent is not None else n.handle
    for h in path:
        known[h] = top
    return top


def nodes_from_dispatch(records: list[Dispatched]) -> list[Node]:
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
                **scope_fields(r.stack),
                "deps": [] if last is None else [last],
                "parent": None,
            }
        )
        if r.type not in NON_LAUNCHING:
            last = i
    return out
