"""Scope totals rolled up by prefix: nodes per module (or scope) at any depth.

A node's place in the scope tree comes from its `scope_path`: each label adds the parts
it extends its enclosing label by (`layers.3` inside nothing adds `layers`, `3`;
`layers.3.attention` inside `layers.3` adds `attention`; a label that does not extend its
parent, such as a user's `sample` inside `layers.3`, adds itself whole). So a ModuleList
that is never called itself (`layers`) is still a level, as its qualified name says, and
`layers.3` is at depth 2 however the scopes were opened.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import pandas as pd

from graph_harness.capture.attribution.labels import natural, natural_parts
from graph_harness.capture.rows import frame as record_frame  # `frame` names a parameter here
from graph_harness.capture.scopes.names import UNSCOPED


def tree_parts(path: Iterable[str]) -> tuple[str, ...]:
    """The scope-tree position of a node whose enclosing scopes are `path`."""
    parts: list[str] = []
    prev = None
    for label in path:
        if label == prev:  # a compiled wrapper and the module inside it: one level
            continue
        if prev is not None and label.startswith(prev + "."):
            parts.extend(label[len(prev) + 1 :].split("."))
        elif "/" in label:  # the built-in round's stageN/step: one part
            parts.append(label)
        else:
            parts.extend(label.split("."))
        prev = label
    return tuple(parts)


def tree_label(parts: tuple[str, ...]) -> str:
    return ".".join(parts) if parts else UNSCOPED


def at_depth(frame: pd.DataFrame, depth: int | None) -> pd.Series:
    """Each node's scope cut to `depth` parts (None: its full position), as a label."""
    return frame["scope_path"].map(
        lambda p: tree_label(tree_parts(p)[: None if depth is None else depth])
    )


def per_scope(frame: pd.DataFrame, depth: int | None = None) -> pd.Series:
    """Nodes per scope cut to `depth`; sums to the frame's nodes at every depth."""
    return at_depth(frame, depth).value_counts().sort_index().rename("nodes")


def deeper_than(frame: pd.DataFrame, depth: int | None) -> int:
    """How many nodes sit deeper in the scope tree than `depth` (a table cut there counts
    them in their depth-`depth` ancestor's `own`); 0 for None (every level)."""
    if depth is None:
        return 0
    return int(frame["scope_path"].map(lambda p: len(tree_parts(p)) > depth).sum())


ROOT = "(all)"  # the scope tree's root: every node; its `own` are the unscoped ones


@dataclass(frozen=True, kw_only=True)
class ScopeNodes:
    """One position of the scope tree and its nodes (scope_tree)."""

    scope: str  # its label; the root is ROOT
    depth: int
    nodes: int  # all nodes under it, itself included
    own: int  # nodes in it and in no child
    fused: int  # of the own, compiled kernels fused from several modules


def scope_tree(frame: pd.DataFrame, depth: int | None = None) -> pd.DataFrame:
    """Every position of the scope tree down to `depth` (ScopeNodes; a fused kernel sits in
    its modules' deepest common one), in tree order. Rows at one depth sum, with
    shallower `own`s, to the total."""
    parts = frame["scope_path"].map(tree_parts)
    fused_of = (
        frame["fused_modules"].notna()
        if "fused_modules" in frame
        else pd.Series(False, index=frame.index)
    )
    counts = pd.DataFrame({"p": parts, "f": fused_of}).groupby("p")["f"].agg(["size", "sum"])
    total: dict[tuple[str, ...], int] = {}
    own: dict[tuple[str, ...], int] = {}
    fused: dict[tuple[str, ...], int] = {}
    for p, n, f in zip(counts.index, counts["size"], counts["sum"]):
        cut = p[: None if depth is None else depth]
        own[cut] = own.get(cut, 0) + int(n)
        # a fusion inside a scope the table cuts away is no fusion across this level's
        fused[cut] = fused.get(cut, 0) + (int(f) if len(cut) == len(p) else 0)
        for d in range(len(cut) + 1):
            total[cut[:d]] = total.get(cut[:d], 0) + int(n)
    rows = [
        ScopeNodes(
            scope=tree_label(p) if p else ROOT,
            depth=len(p),
            nodes=total[p],
            own=own.get(p, 0),
            fused=fused.get(p, 0),
        )
        for p in sorted(total, key=natural_parts)
    ]
    return record_frame(rows, ScopeNodes)


def tree_order(label: str) -> list:
    """A sort key putting scope labels in tree order (parents first, layers.2 < layers.10:
    attribution/labels.py's natural order), the root and unscoped first."""
    return [] if label in (UNSCOPED, ROOT) else natural(label)
