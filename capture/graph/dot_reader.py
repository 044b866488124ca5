"""A CUDA graph read back from the DOT file `cudaGraphDebugDotPrint` writes (torch's
`CUDAGraph.debug_dump`, TensorRT-LLM's and any C++ engine's dumps): the same `RawNode`s
capture/graph/reader.py reads from a live graph, so a dump is counted as a capture is.

A dump holds a `subgraph cluster_N` per graph and child graph, a node statement per node
(its type first; a kernel's mangled symbol and launch geometry in verbose mode), an edge
per dependency (docs/compare.md, "What a dump holds"). Parsed as data (dot_syntax.py):
whatever does not read as a graph dump is one `DotDumpError` naming the file and line;
no partial count is ever returned.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from graph_harness.capture.graph.dot_labels import kernel_of, label_text, leaves, record_fields
from graph_harness.capture.graph.dot_syntax import DotGraph, DotSyntaxError, parse
from graph_harness.capture.graph.reader import RawNode
from graph_harness.capture.paths import InputPathError, read_text_input

MAX_NODES = 1_000_000  # nodes after child graphs are expanded: far above any real step

# the dump's name of each node type -> the export's (capture/graph/reader.py's _NODE_KINDS).
# Seen in real dumps (benchmarks/experiments/dot_probe.py on the H200): KERNEL (verbose),
# MEMCPY, MEMSET, EMPTY, EVENT_RECORD, EVENT_WAIT, MEM_ALLOC, MEM_FREE. Not yet seen, named
# as the driver's flags name them: HOST, EXT_SEMAS_SIGNAL, EXT_SEMAS_WAIT, CONDITIONAL. A
# kernel outside verbose mode is an octagon named by its symbol alone, a child graph node
# names the graph it holds (`graph_N`); a word not here is refused, never guessed.
DOT_KINDS = {
    "KERNEL": "kernel",
    "MEMCPY": "memcpy",
    "MEMSET": "memset",
    "EMPTY": "empty",
    "EVENT_RECORD": "event_record",
    "EVENT_WAIT": "wait_event",
    "MEM_ALLOC": "mem_alloc",
    "MEM_FREE": "mem_free",
    "HOST": "host",
    "EXT_SEMAS_SIGNAL": "ext_semaphore_signal",
    "EXT_SEMAS_WAIT": "ext_semaphore_wait",
    "CONDITIONAL": "conditional",
}

_CLUSTER_LABEL = re.compile(r"^graph_(\d+)$")


class DotDumpError(DotSyntaxError):
    """A file that does not read as a CUDA graph dump; the message names it."""


@dataclass(frozen=True)
class DotDump:
    """A dump read back: its nodes as a live read gives them (child graphs' after their
    parent), the flags it was evidently written with, and what it held."""

    nodes: list[RawNode]
    verbose: bool  # kernel launch geometry was in the dump
    graphs: int  # clusters (the graph and each child graph)


@dataclass
class _Node:
    id: str
    graph: str  # the cluster's graph name, graph_N
    kind: str
    kernel: str = ""
    grid: tuple[int, int, int] | None = None
    block: tuple[int, int, int] | None = None
    child: str | None = None  # the graph a child-graph node holds


def read_dump(path: str | Path) -> DotDump:
    """The graph dumped at `path`; DotDumpError (one line, naming the file) otherwise."""
    try:
        text = read_text_input(path, "graph dump")  # a regular file only, bounded, UTF-8
    except InputPathError as e:
        raise DotDumpError(str(e)) from None
    text = text.removeprefix("\ufeff")  # the byte-order mark an editor may write first
    if not text.strip():
        raise DotDumpError(
            f"cannot read graph dump {path}: the file is empty, not a DOT graph (a dump "
            "starts with `digraph`: give the file cudaGraphDebugDotPrint wrote)"
        )
    try:
        return dump_of(text)
    except DotSyntaxError as e:
        raise DotDumpError(f"cannot read graph dump {path}: {e}") from None


def dump_of(text: str) -> DotDump:
    """The dump in `text`: its nodes by graph, their dependencies, the one root graph with
    its children expanded; DotSyntaxError for whatever does not read as a dump."""
    g = parse(text)
    nodes, graph_of = _by_graph(g)
    deps = _dependencies(g, graph_of)
    for name, members in nodes.items():
        _acyclic(name, members, deps)
    root = _root(nodes)
    total = _expanded_size(root, nodes)
    if total > MAX_NODES:
        raise DotSyntaxError(f"its child graphs expand to {total:,} nodes, past {MAX_NODES:,}")
    reached = _reached(root, nodes)
    if len(reached) != len(nodes):
        lost = ", ".join(sorted(set(nodes) - reached)[:5])
        raise DotSyntaxError(f"graphs no graph of the dump holds, reached from none: {lost}")
    out = _expand(root, nodes, deps)
    verbose = any(n.grid is not None for ns in nodes.values() for n in ns)
    return DotDump(out, verbose, len(nodes))


def _by_graph(g: DotGraph) -> tuple[dict[str, list[_Node]], dict[str, str]]:
    """Each graph's nodes (graph name -> its nodes, in the dump's order), and each node's
    graph (node id -> graph name): a node belongs to the cluster nearest above it."""
    clusters = _clusters(g)
    nodes: dict[str, list[_Node]] = {name: [] for name in clusters.values()}
    graph_of: dict[str, str] = {}
    for nid, attrs in g.nodes.items():
        sub = g.node_subgraph[nid]
        while sub is not None and sub not in clusters:
            sub = g.subgraphs[sub].parent
        if sub is None:
            raise DotSyntaxError(f"line {g.node_line[nid]}: node {nid!r} is in no graph's cluster")
        graph_of[nid] = clusters[sub]
        nodes[clusters[sub]].append(_node(nid, clusters[sub], attrs, g.node_line[nid]))
    return nodes, graph_of


def _dependencies(g: DotGraph, graph_of: dict[str, str]) -> dict[str, list[str]]:
    """Node id -> the ids it depends on, from the edges: each joins two nodes of one graph;
    an edge written twice is one dependency."""
    deps: dict[str, list[str]] = {}
    for a, b, _, line in g.edges:
        for end in (a, b):
            if end not in graph_of:
                raise DotSyntaxError(f"line {line}: an edge names {end[:60]!r}, which is no node")
        if a == b:
            raise DotSyntaxError(f"line {line}: node {a[:60]!r} depends on itself")
        if graph_of[a] != graph_of[b]:  # a dependency joins two nodes of one graph
            raise DotSyntaxError(
                f"line {line}: an edge from {graph_of[a]} to {graph_of[b]} (a dependency is "
                "within one graph)"
            )
        if a not in deps.setdefault(b, []):  # an edge written twice is one dependency
            deps[b].append(a)
    return deps


def _root(nodes: dict[str, list[_Node]]) -> str:
    """The one graph no child graph node holds (every child graph it names in the dump)."""
    held_by = [n for ns in nodes.values() for n in ns if n.child is not None]
    for n in held_by:
        if n.child not in nodes:
            raise DotSyntaxError(f"child graph node {n.id!r} holds {n.child}, which the dump lacks")
    held = {n.child for n in held_by}
    roots = [name for name in nodes if name not in held]
    if len(roots) != 1:
        which = ", ".join(roots) if roots else "none (every graph is held by another)"
        conditional = any(n.kind == "conditional" for ns in nodes.values() for n in ns)
        hint = (
            "; a conditional node's body graphs are not read yet (none has been seen in a "
            "real dump)"
            if conditional
            else ""
        )
        raise DotSyntaxError(
            f"a dump holds one graph with its children; this has roots {which}{hint}"
        )
    return roots[0]


def _acyclic(graph: str, members: list[_Node], deps: dict[str, list[str]]) -> None:
    """Refuse a graph whose dependencies loop (Kahn's order: a graph is a DAG)."""
    ids = {n.id for n in members}
    waiting = {n.id: len(deps.get(n.id, ())) for n in members}
    users: dict[str, list[str]] = {}
    for n in members:
        for d in deps.get(n.id, ()):
            users.setdefault(d, []).append(n.id)
    ready = [i for i, k in waiting.items() if k == 0]
    done = 0
    while ready:
        i = ready.pop()
        done += 1
        for u in users.get(i, ()):
            waiting[u] -= 1
            if waiting[u] == 0:
                ready.append(u)
    if done != len(ids):
        raise DotSyntaxError(f"the dependencies of {graph} loop (a graph has no cycle)")


def _reached(root: str, nodes: dict[str, list[_Node]]) -> set[str]:
    seen, stack = {root}, [root]
    while stack:
        for n in nodes[stack.pop()]:
            if n.child is not None and n.child not in seen:
                seen.add(n.child)
                stack.append(n.child)
    return seen


def _clusters(g: DotGraph) -> dict[int, str]:
    """Subgraph index -> graph name, for each graph cluster (`label="graph_N"`)."""
    out: dict[int, str] = {}
    seen: set[str] = set()
    for i, sub in enumerate(g.subgraphs):
        label = sub.attrs.get("label", "")
        if _CLUSTER_LABEL.match(label):
            if label in seen:
                raise DotSyntaxError(f"two clusters are labelled {label}")
            seen.add(label)
            out[i] = label
    if not out:
        raise DotSyntaxError(
            'no graph cluster (`subgraph cluster_N { label="graph_N" ... }`): not a dump '
            "cudaGraphDebugDotPrint wrote (graph-harness's own graph-NAME.dot is a drawing: "
            "read its nodes-NAME.json)"
        )
    return out


_INDEX = re.compile(r"^\d+( \(topoId: \d+\))?$")  # a node's ID line or field


def _node(nid: str, graph: str, attrs: dict[str, str], line: int) -> _Node:
    """One node statement read, by its shape: a record (verbose flags:
    `{TYPE | {ID | n | name...}}`), an octagon (a kernel outside verbose mode), or lines
    (`n`, then the type or the child graph, then details)."""
    label = attrs.get("label")
    if label is None:
        raise DotSyntaxError(f"line {line}: node {nid!r} has no label (its type)")
    where = f"line {line}: node {nid!r}"
    if attrs.get("shape") == "record":
        return _record_node(nid, graph, label, where)
    lines = [x.strip() for x in label_text(label).split("\n")]
    lines = [x for x in lines if x]
    if len(lines) < 2 or not _INDEX.match(lines[0]):
        raise DotSyntaxError(f"{where}: its label is not `n`, then its type or kernel")
    read = _octagon_node if attrs.get("shape") == "octagon" else _lines_node
    return read(nid, graph, lines, where)


def _record_node(nid: str, graph: str, label: str, where: str) -> _Node:
    """A record's node: its type first; a kernel's symbol and geometry after `ID | n`."""
    try:
        texts = leaves(record_fields(label))
    except DotSyntaxError as e:
        raise DotSyntaxError(f"{where}: {e}") from None
    word = texts[0] if texts else ""
    kind = DOT_KINDS.get(word)
    if kind is None:
        raise DotSyntaxError(f"{where}: {word[:40]!r} is no node type this reader knows")
    node = _Node(nid, graph, kind)
    if kind == "kernel":
        at = next((i for i, t in enumerate(texts) if t == "ID"), None)
        if at is None or at + 2 >= len(texts) or not _INDEX.match(texts[at + 1]):
            raise DotSyntaxError(f"{where}: a kernel record without {{ID | n | name}}")
        node.kernel, node.grid, node.block = kernel_of(texts[at + 2], where)
    return node


def _octagon_node(nid: str, graph: str, lines: list[str], where: str) -> _Node:
    """A kernel outside verbose mode: its symbol, then perhaps `<<<...>>>`."""
    node = _Node(nid, graph, "kernel")
    geometry = next((x for x in lines[2:] if x.startswith("<<<")), "")
    node.kernel, node.grid, node.block = kernel_of(lines[1] + geometry, where)
    return node


def _lines_node(nid: str, graph: str, lines: list[str], where: str) -> _Node:
    """A node of lines: a child graph node (`graph_N`), or one of a type's word."""
    second = lines[1]
    if _CLUSTER_LABEL.match(second):
        return _Node(nid, graph, "graph", child=second)
    kind = DOT_KINDS.get(second)
    if kind is None or kind == "kernel":
        raise DotSyntaxError(f"{where}: {second[:40]!r} is no node type this reader knows")
    return _Node(nid, graph, kind)


def _expanded_size(root: str, nodes: dict[str, list[_Node]]) -> int:
    """The nodes the root expands to, each child graph counted once per node holding it,
    without recursion; a graph that holds itself is refused."""
    size: dict[str, int] = {}
    on_path: set[str] = set()
    stack: list[tuple[str, bool]] = [(root, False)]
    while stack:
        name, done = stack.pop()
        if done:
            on_path.discard(name)
            size[name] = len(nodes[name]) + sum(
                size[n.child] for n in nodes[name] if n.kind == "graph" and n.child
            )
            continue
        if name in size:
            continue
        if name in on_path:
            raise DotSyntaxError(f"{name} holds itself through its child graphs")
        on_path.add(name)
        stack.append((name, True))
        for n in nodes[name]:
            if n.kind == "graph" and n.child:
                if n.child in on_path:
                    raise DotSyntaxError(f"{n.child} holds itself through its child graphs")
                if n.child not in size:
                    stack.append((n.child, False))
    return size[root]


def _expand(root: str, nodes: dict[str, list[_Node]], deps: dict[str, list[str]]) -> list[RawNode]:
    """The root graph's nodes, each child-graph node followed by its graph's nodes (a
    child held twice, twice), without recursion and with the total bounded."""
    out: list[RawNode] = []
    handle = iter(range(1, 1 << 62))
    # each frame: (graph name, position in it, handles of this expansion's nodes, parent)
    stack: list[tuple[str, int, dict[str, int], int | None]] = [(root, 0, {}, None)]
    while stack:
        name, pos, handles, parent = stack.pop()
        members = nodes[name]
        if pos == 0:
            for n in members:
                handles[n.id] = next(handle)
        while pos < len(members):
            n = members[pos]
            pos += 1
            rec = RawNode(handles[n.id], n.kind, n.kernel, n.grid, n.block, parent=parent)
            rec.deps = [handles[d] for d in deps.get(n.id, ()) if d in handles]
            out.append(rec)
            if n.kind == "graph" and n.child is not None:
                stack.append((name, pos, handles, parent))
                stack.append((n.child, 0, {}, rec.handle))
                break
    return out
