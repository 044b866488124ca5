"""What a node's label in a graph dump says, read as text (capture/graph/dot_reader.py
reads the nodes): a record label's fields (`{KERNEL | {ID | 0 | name}}`, verbose flags),
a plain label's lines (`0`, then the type or the kernel), and a kernel's symbol with its
launch geometry (`name<<<grid,block,smem>>>`). Braces nest at most MAX_DEPTH deep; no
recursion."""

from __future__ import annotations

import re
from typing import Any

from graph_harness.capture.graph.dot_syntax import MAX_DEPTH, DotSyntaxError
from graph_harness.capture.text import printable

_GEOMETRY = re.compile(r"^(?P<name>.*?)<<<(?P<geometry>[^<>]*)>>>$", re.S)

# A record label: fields split by '|', nested in braces, with the label escapes \{ \} \|
# \< \> \\ and line breaks \n \l \r (and raw line breaks) read as text.
_LABEL_ESCAPES = {"n": "\n", "l": "\n", "r": "\n"}


def record_fields(label: str) -> list:
    """A record label's fields as nested lists of stripped strings:
    `{KERNEL | {ID | 0 | k}}` is `[["KERNEL", ["ID", "0", "k"]]]`. Text outside a record
    is one field. Unbalanced braces raise DotSyntaxError."""
    root: list = []
    stack = [root]
    grouped = [False]  # per level: its last field was a {group} (no text field after it)
    buf: list[str] = []

    def end_field() -> None:
        text = "".join(buf).strip()
        if text or not grouped[-1]:
            stack[-1].append(text)
        buf.clear()
        grouped[-1] = False

    i, n = 0, len(label)
    while i < n:
        c = label[i]
        if c == "\\" and i + 1 < n:
            buf.append(_LABEL_ESCAPES.get(label[i + 1], label[i + 1]))
            i += 2
            continue
        if c == "{":
            if len(stack) > MAX_DEPTH:
                raise DotSyntaxError(f"a record label nested more than {MAX_DEPTH} deep")
            if "".join(buf).strip():
                end_field()
            buf.clear()
            group: list = []
            stack[-1].append(group)
            stack.append(group)
            grouped.append(False)
        elif c == "}":
            if len(stack) == 1:
                raise DotSyntaxError("a record label closes a '}' it never opened")
            end_field()
            stack.pop()
            grouped.pop()
            grouped[-1] = True
        elif c == "|":
            end_field()
        else:
            buf.append(c)
        i += 1
    if len(stack) != 1:
        raise DotSyntaxError("a record label leaves a '{' open")
    if "".join(buf).strip() or not root:
        end_field()
    return root


def leaves(fields: list) -> list[str]:
    """Every text of a record's fields, in order, empty ones dropped (no recursion)."""
    out: list[str] = []
    stack = [iter(fields)]
    while stack:
        for f in stack[-1]:
            if isinstance(f, list):
                stack.append(iter(f))
                break
            if f:
                out.append(f)
        else:
            stack.pop()
    return out


def label_text(label: str) -> str:
    """A label's text with DOT's escapes read: \\n, \\l, \\r line breaks, any other
    escaped character itself."""
    return re.sub(r"\\(.)", lambda m: "\n" if m[1] in "nlr" else m[1], label, flags=re.S)


def kernel_of(text: str, where: str) -> tuple[str, Any, Any]:
    """`name` or `name<<<grid,block,smem>>>`: the symbol, and the grid and block where
    given."""
    m = _GEOMETRY.match(text)
    if m is None:
        if "<<<" in text or not text.strip():
            raise DotSyntaxError(f"{where}: kernel {text[:60]!r} is not name<<<grid,block,smem>>>")
        return printable(text.strip()), None, None
    try:
        grid, block = _geometry(m["geometry"])
    except ValueError:
        raise DotSyntaxError(
            f"{where}: launch geometry <<<{m['geometry'][:40]}>>> is not <<<grid,block,smem>>>"
        ) from None
    name = m["name"].strip()
    if not name:
        raise DotSyntaxError(f"{where}: a kernel without a name")
    return printable(name), grid, block


def _geometry(text: str) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """`{16,10,4},128,0` (grid, block, shared memory; a dimension of one alone) as grid
    and block."""
    parts, depth, cur = [], 0, ""
    for c in text:
        depth += (c == "{") - (c == "}")
        if c == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += c
    parts.append(cur)
    if len(parts) != 3 or not parts[2].strip().isdigit():
        raise ValueError(text)
    return _dims(parts[0]), _dims(parts[1])


def _dims(text: str) -> tuple[int, int, int]:
    """`1`, `{16,10,4}` or `{32,4}` as three dimensions."""
    parts = [p.strip() for p in text.strip().strip("{}").split(",")]
    if not 1 <= len(parts) <= 3 or not all(p.isdigit() for p in parts):
        raise ValueError(text)
    dims = [int(p) for p in parts] + [1] * (3 - len(parts))
    return dims[0], dims[1], dims[2]
