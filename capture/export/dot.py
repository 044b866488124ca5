"""Graphviz DOT of an export's launching nodes. Every name is quoted and escaped, so a
quote or backslash in a kernel or scope name stays text (and cannot inject DOT)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from graph_harness.capture.graph.node_types import NON_LAUNCHING

if TYPE_CHECKING:
    from graph_harness.capture.export.nodes import NodeExport  # cyclic: it imports this


def to_dot(export: NodeExport) -> str:
    lines = ["digraph G {", "  rankdir=TB; node [shape=box, fontsize=9];"]
    for n in export.nodes:
        if n["type"] in NON_LAUNCHING:
            continue
        where = "" if n["stage"] is None else f"stage{n['stage']}/"
        label = "\\n".join(
            [
                f"{n['index']}: {_dot(n['type'])}",
                _dot((n["kernel"] or "")[:48]),
                _dot(where + n["step"]),
            ]
        )
        lines.append(f'  n{int(n["index"])} [label="{label}"];')
        for d in n["deps"]:
            lines.append(f"  n{int(d)} -> n{int(n['index'])};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _dot(s: str) -> str:
    """`s` as text inside a DOT double-quoted string: backslashes and quotes escaped,
    line breaks as DOT's own."""
    s = s.replace("\\", "\\\\").replace('"', '\\"')
    return s.replace("\r\n", "\\n").replace("\n", "\\n").replace("\r", "\\n")
