"""One node of an export checked, and an export's options: every field of its type and
range, references between nodes in the graph, and a message naming the first wrong one
(capture/export/nodes.py's `NodeExport.from_dict` reads each node through `check_node`).

A node written by graph-harness itself is right field by field, and a recording reads
thousands of them: `check_node` takes such a node on a plain test of every field at once,
and checks field by field, with its messages, only a node that fails it (or a version-1
node, whose scope columns are made)."""

from __future__ import annotations

from typing import Any

from graph_harness.capture.attribution.node import COLUMNS, NODE_OPTIONAL, Node
from graph_harness.capture.export.documents import Fields, show
from graph_harness.capture.scopes.names import EVERY_LEVEL, UNSCOPED, ScopeKey

_V1_MISSING = ("scope", "scope_path")
_REQUIRED = frozenset(COLUMNS)
_ALLOWED = _REQUIRED | frozenset(NODE_OPTIONAL)
_REFS = ("deps", "programmatic_deps", "launch_after")  # each a list of other nodes' indices


def check_node(f: Fields, i: int, n: object, count: int, version: int) -> Node:
    """Node `i` of `count`, checked; a fresh dict (the document's lists are not shared).
    A version-1 node gets the scope columns of its flat (stage, step) scope."""
    node = _plain(n, i, count) if version > 1 else None
    return node if node is not None else _checked(f, i, n, count, version)


def _plain(n: Any, i: int, count: int) -> Node | None:
    """Node `i` as `_checked` makes it, where every field is plainly right (of its exact
    type: a str, an int, a list, or a tuple as a recorded graph's records hold them:
    made a list here); None where one may not be, for `_checked` to say which."""
    if type(n) is not dict or not _REQUIRED <= n.keys() <= _ALLOWED or not _fields_plain(n, i):
        return None
    refs = [k for k in _REFS if k in n]
    if not all(_refs_plain(n[k], i, count) for k in refs):
        return None
    parent = n["parent"]
    if parent is not None and not _refs_plain([parent], i, count):
        return None
    mods, graph = n.get("fused_modules", []), n.get("graph", 0)
    if not _strs(mods) or type(graph) is not int or graph < 0:
        return None
    node = {k: n[k] for k in COLUMNS}
    node["scope_path"] = list(n["scope_path"])
    if "fused_modules" in n:
        node["fused_modules"] = list(mods)
    if "graph" in n:
        node["graph"] = graph
    for k in refs:
        node[k] = list(n[k])
    for k in ("grid", "block"):
        node[k] = None if n[k] is None else list(n[k])
    return node  # type: ignore[return-value]


_STAGES = 2**63  # the stage column is int64: a stage past it cannot be framed


def _fields_plain(n: dict, i: int) -> bool:
    """Whether a node's own fields (all but its references) are plainly right."""
    kind, kernel, stage, path = n["type"], n["kernel"], n["stage"], n["scope_path"]
    return (
        type(n["index"]) is int
        and n["index"] == i
        and type(kind) is str
        and kind != ""
        and (kernel is None or type(kernel) is str)
        and all(_dims_plain(n[k]) for k in ("grid", "block"))
        and (stage is None or (type(stage) is int and 0 <= stage < _STAGES))
        and type(n["step"]) is str
        and type(n["scope"]) is str
        and _strs(path)
        and (path[-1] if path else UNSCOPED) == n["scope"]
    )


def _dims_plain(dims: object) -> bool:
    """A launch shape: null, or 1 to 3 ints in [0, 2**32)."""
    if dims is None:
        return True
    return (
        type(dims) in _SEQUENCE
        and 1 <= len(dims) <= 3
        and all(type(d) is int and 0 <= d < 2**32 for d in dims)
    )


def _refs_plain(refs: object, i: int, count: int) -> bool:
    """A list of other nodes' indices, each in [0, count) and not `i`."""
    return type(refs) in _SEQUENCE and all(
        type(d) is int and 0 <= d < count and d != i for d in refs
    )


def _strs(values: object) -> bool:
    return type(values) in _SEQUENCE and all(type(v) is str for v in values)


_SEQUENCE = (list, tuple)  # a document's lists; a recorded graph's tuples (record/kept.py)


# The options graph-harness itself writes, in the order they are checked: (key, type, the
# least an int may be, whether null is allowed). Others may hold any scalar.
_OPTIONS: tuple[tuple[str, type, int | None, bool], ...] = (
    ("compiled", bool, None, False),
    ("pdl", bool, None, False),
    ("distributed", bool, None, False),
    ("compiled_attribution", str, None, False),
    ("target", str, None, False),
    ("cudagraphs", str, None, False),
    ("site", str, None, False),
    ("graphs", int, 1, False),
    ("recorded", bool, None, False),
    ("warmup", int, 0, False),
    ("blocks", str, None, True),
    ("block_depth", int, 1, True),
)


def check_options(f: Fields, options: dict) -> None:
    """The options graph-harness itself writes, each of its type (others: any scalar)."""
    for key, kind, lo, none in _OPTIONS:
        if key not in options:
            continue
        value, path = options[key], f"options.{key}"
        if kind is bool and not isinstance(value, bool):
            f.expected(path, "a bool", value)
        elif kind is str:
            f.string(path, value, none=none)
        elif kind is int:
            f.integer(path, value, lo=lo, none=none)
    depth = options.get("module_depth")
    if depth is not None and depth != EVERY_LEVEL:
        if not isinstance(depth, int) or isinstance(depth, bool):
            f.expected("options.module_depth", f"an int >= 1, {EVERY_LEVEL!r} or null", depth)
        f.integer("options.module_depth", depth, lo=1)


def _checked(f: Fields, i: int, n: object, count: int, version: int) -> Node:
    """check_node's field by field: each field checked, and the first that is wrong said."""
    p = f"nodes[{i}]"
    f.obj(p, n)
    listed = [c for c in COLUMNS if version > 1 or c not in _V1_MISSING]
    f.keys(p, n, tuple(listed), NODE_OPTIONAL)
    if f.integer(f"{p}.index", n["index"]) != i:
        f.expected(f"{p}.index", f"{i} (the node's position)", n["index"])
    f.string(f"{p}.type", n["type"])
    if not n["type"]:
        f.expected(f"{p}.type", "a non-empty str", n["type"])
    f.string(f"{p}.kernel", n["kernel"], none=True)
    _checked_dims(f, p, n)
    f.integer(f"{p}.stage", n["stage"], lo=0, hi=_STAGES, none=True)
    f.string(f"{p}.step", n["step"])
    if version == 1:
        n = {**n, **_v1_scope(n["stage"], n["step"])}
    node = {k: n[k] for k in COLUMNS}
    node["scope_path"] = _checked_scope(f, p, n)
    if "fused_modules" in n:
        mods = f.array(f"{p}.fused_modules", n["fused_modules"])
        for j, m in enumerate(mods):
            f.string(f"{p}.fused_modules[{j}]", m)
        node["fused_modules"] = list(mods)
    if "graph" in n:
        node["graph"] = f.integer(f"{p}.graph", n["graph"], lo=0)
    for key in ("deps", *[k for k in ("programmatic_deps", "launch_after") if k in n]):
        node[key] = _checked_refs(f, f"{p}.{key}", n[key], i, count)
    f.integer(f"{p}.parent", n["parent"], lo=0, hi=count, none=True)
    if n["parent"] == i:
        f.expected(f"{p}.parent", "another node's index or null", n["parent"])
    for key in ("grid", "block"):
        node[key] = None if n[key] is None else list(n[key])
    return node  # type: ignore[return-value]


def _checked_dims(f: Fields, p: str, n: dict) -> None:
    for key in ("grid", "block"):
        if n[key] is not None:
            dims = f.array(f"{p}.{key}", n[key])
            if not 1 <= len(dims) <= 3:
                f.expected(f"{p}.{key}", "null or a list of 1 to 3 ints", n[key])
            for j, d in enumerate(dims):
                f.integer(f"{p}.{key}[{j}]", d, lo=0, hi=2**32)


def _checked_scope(f: Fields, p: str, n: dict) -> list[str]:
    """The node's scope and its path (a fresh list), which must end with it."""
    f.string(f"{p}.scope", n["scope"])
    path = f.array(f"{p}.scope_path", n["scope_path"])
    for j, label in enumerate(path):
        f.string(f"{p}.scope_path[{j}]", label)
    if (path[-1] if path else UNSCOPED) != n["scope"]:
        want = f"{show(n['scope'])} last (the innermost scope)" if path else "[] (unscoped)"
        f.expected(f"{p}.scope_path", want, path)
    return list(path)


def _checked_refs(f: Fields, path: str, value: object, i: int, count: int) -> list[int]:
    """Other nodes' indices (a fresh list): each in [0, count), none node `i` itself."""
    refs = f.array(path, value)
    for j, d in enumerate(refs):
        f.integer(f"{path}[{j}]", d, lo=0, hi=count)
        if d == i:
            f.expected(f"{path}[{j}]", "another node's index", d)
    return list(refs)


def _v1_scope(stage: int | None, step: str) -> dict[str, Any]:
    if step == UNSCOPED and stage is None:
        return {"scope": UNSCOPED, "scope_path": []}
    label = ScopeKey(stage, step).label
    return {"scope": label, "scope_path": [label]}
