"""The shape of one node record, as every export holds it (capture/export/nodes.py reads
and checks it; capture/attribution/records.py makes it): a TypedDict, so the records stay
plain dicts (JSON as they are) with their keys declared. Their sequences are lists, or
tuples in a recorded graph's records (`settle`)."""

from __future__ import annotations

import gc
from typing import TypedDict


class NodeColumns(TypedDict):
    """The keys every node has, in the export's column order."""

    index: int  # its position in the graph's node list (or in dispatch order on the CPU)
    type: str  # "kernel", "memcpy", "memset", ...; on the CPU "aten", "triton", ...
    kernel: str | None  # the kernel's (mangled) name, or the op's; None for other types
    grid: list[int] | None  # launch dimensions of a kernel node
    block: list[int] | None
    stage: int | None  # the innermost scope's stage (the built-in round's column)
    step: str  # the innermost scope's step ("unscoped" outside all)
    scope: str  # the innermost scope's label ("unscoped" outside all)
    scope_path: list[str]  # the enclosing scopes' labels, outermost first
    deps: list[int]  # the nodes it waits for, by index
    parent: int | None  # the node whose child graph holds it, if any


class Node(NodeColumns, total=False):
    """A node record: the columns, and the keys only some nodes have."""

    programmatic_deps: list[int]  # edges of programmatic dependent launch
    fused_modules: list[str]  # the modules a compiled kernel fused across
    graph: int  # in a step that runs as several graphs, the place of its graph among them
    # a step's graphs launched one after another: a first node of one lists the last nodes
    # of the one before (no edge of any graph; capture/record/steps.py `chained`)
    launch_after: list[int]


COLUMNS = list(NodeColumns.__annotations__)
NODE_OPTIONAL = tuple(k for k in Node.__annotations__ if k not in NodeColumns.__annotations__)
SEQUENCES = ("grid", "block", "scope_path", "deps", "programmatic_deps", "fused_modules")
SEQUENCES += ("launch_after",)


def settle(nodes: list[Node]) -> list[Node]:
    """`nodes` made final in place: each list field a tuple, each record a fresh dict.
    A recorded graph's records live as long as the program, and a list stays in the
    garbage collector's lists for good (five a node: a 64-graph ladder of 200-node graphs
    kept 64,000 objects that each full pass walked, and whose growth brought full passes
    on). A tuple of ints or strings leaves them at the next young pass, run here where the
    program leaves the collector on; a dict made after its values left is never in them.
    Equal to the list form once both are normalized (`plain`)."""
    for n in nodes:
        for k in SEQUENCES:
            v = n.get(k)
            if type(v) is list:
                n[k] = tuple(v)  # type: ignore[literal-required]
    if gc.isenabled():  # a program that turned it off runs no pass of ours either
        gc.collect(0)
        nodes[:] = [dict(n.items()) for n in nodes]  # type: ignore[misc]
    return nodes


def plain(node: Node) -> Node:
    """A node record with every sequence a list, as a document reads back: settled and
    unsettled records compare equal through it."""
    return {k: list(v) if type(v) is tuple else v for k, v in node.items()}  # type: ignore[return-value]
