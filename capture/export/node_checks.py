"""A node export's nodes and options checked as its document is read back
(capture/export/nodes.py NodeExport.from_dict): each field of its type, each node a fresh
record, a version-1 node given the scope columns of its flat (stage, step) scope."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from graph_harness.capture.attribution.node import COLUMNS, NODE_OPTIONAL, Node
from graph_harness.capture.export.documents import Fields, show
from graph_harness.capture.scopes.modules import EVERY_LEVEL
from graph_harness.capture.scopes.recorder import UNSCOPED, ScopeKey

_V1_MISSING = ("scope", "scope_path")


def _bool(f: Fields, where: str, value: object) -> None:
    if not isinstance(value, bool):
        f.expected(where, "a bool", value)


def _string(f: Fields, where: str, value: object) -> None:
    f.string(where, value)


# The options graph-harness itself writes, in the order they are checked, each with its
# check (others: any scalar).
_OPTIONS: tuple[tuple[str, Callable[[Fields, str, Any], object]], ...] = (
    ("compiled", _bool),
    ("pdl", _bool),
    ("distributed", _bool),
    ("compiled_attribution", _string),
    ("target", _string),
    ("cudagraphs", _string),
    ("site", _string),
    ("graphs", lambda f, w, v: f.integer(w, v, lo=1)),
    ("recorded", _bool),
    ("warmup", lambda f, w, v: f.integer(w, v, lo=0)),
    ("blocks", lambda f, w, v: f.string(w, v, none=True)),
    ("block_depth", lambda f, w, v: f.integer(w, v, lo=1, none=True)),
)


def check_options(f: Fields, options: dict) -> None:
    """The options graph-harness itself writes, each of its type (others: any scalar)."""
    for key, check in _OPTIONS:
        if key in options:
            check(f, f"options.{key}", options[key])
    depth = options.get("module_depth")
    if depth is not None and depth != EVERY_LEVEL:
        if not isinstance(depth, int) or isinstance(depth, bool):
            f.expected("options.module_depth", f"an int >= 1, {EVERY_LEVEL!r} or null", depth)
        f.integer("options.module_depth", depth, lo=1)


def check_node(f: Fields, i: int, n: object, count: int, version: int) -> Node:
    """Node `i` of `count`, checked; a fresh dict (the document's lists are not shared).
    A version-1 node gets the scope columns of its flat (stage, step) scope."""
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
    _check_dims(f, p, n)
    f.integer(f"{p}.stage", n["stage"], lo=0, none=True)
    f.string(f"{p}.step", n["step"])
    if version == 1:
        n = {**n, **_v1_scope(n["stage"], n["step"])}
    path = _check_scope(f, p, n)
    node = {k: n[k] for k in COLUMNS}
    node["scope_path"] = list(path)
    if "fused_modules" in n:
        node["fused_modules"] = _strings(f, f"{p}.fused_modules", n["fused_modules"])
    if "graph" in n:
        node["graph"] = f.integer(f"{p}.graph", n["graph"], lo=0)
    for key in ("deps", *[k for k in ("programmatic_deps", "launch_after") if k in n]):
        node[key] = _refs(f, f"{p}.{key}", n[key], i, count)
    f.integer(f"{p}.parent", n["parent"], lo=0, hi=count, none=True)
    if n["parent"] == i:
        f.expected(f"{p}.parent", "another node's index or null", n["parent"])
    for key in ("grid", "block"):
        node[key] = None if n[key] is None else list(n[key])
    return node


def _check_dims(f: Fields, p: str, n: dict[str, Any]) -> None:
    """A node's grid and block: each null or 1 to 3 ints."""
    for key in ("grid", "block"):
        if n[key] is not None:
            dims = f.array(f"{p}.{key}", n[key])
            if not 1 <= len(dims) <= 3:
                f.expected(f"{p}.{key}", "null or a list of 1 to 3 ints", n[key])
            for j, d in enumerate(dims):
                f.integer(f"{p}.{key}[{j}]", d, lo=0, hi=2**32)


def _check_scope(f: Fields, p: str, n: dict[str, Any]) -> list[str]:
    """A node's scope and its path, the scope last in it (unscoped: an empty path); the
    path."""
    f.string(f"{p}.scope", n["scope"])
    path = f.array(f"{p}.scope_path", n["scope_path"])
    for j, label in enumerate(path):
        f.string(f"{p}.scope_path[{j}]", label)
    if (path[-1] if path else UNSCOPED) != n["scope"]:
        want = f"{show(n['scope'])} last (the innermost scope)" if path else "[] (unscoped)"
        f.expected(f"{p}.scope_path", want, path)
    return path


def _strings(f: Fields, where: str, value: object) -> list[str]:
    """A list of strings, checked; a fresh list."""
    items = f.array(where, value)
    for j, m in enumerate(items):
        f.string(f"{where}[{j}]", m)
    return list(items)


def _refs(f: Fields, where: str, value: object, i: int, count: int) -> list[int]:
    """Node i's references to other nodes (indices below `count`, never its own),
    checked; a fresh list."""
    refs = f.array(where, value)
    for j, d in enumerate(refs):
        f.integer(f"{where}[{j}]", d, lo=0, hi=count)
        if d == i:
            f.expected(f"{where}[{j}]", "another node's index", d)
    return list(refs)


def _v1_scope(stage: int | None, step: str) -> dict[str, Any]:
    if step == UNSCOPED and stage is None:
        return {"scope": UNSCOPED, "scope_path": []}
    label = ScopeKey(stage, step).label
    return {"scope": label, "scope_path": [label]}
