"""The shape of one node record, as every export holds it (capture/export/nodes.py reads
and checks it; capture/attribution/records.py makes it): a TypedDict, so the records stay
plain dicts (JSON as they are) with their keys declared. Their sequences are lists, or
tuples in a recorded graph's records (capture/record/kept.py); `plain` gives the lists."""

from __future__ import annotations

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


def plain(node: Node) -> Node:
    """A node record with every sequence a list, as a document reads back: a recorded
    graph's records (tuples) and a count's compare equal through it."""
    return {k: list(v) if type(v) is tuple else v for k, v in node.items()}  # type: ignore[return-value]
