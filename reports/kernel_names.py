"""Kernel names a person can read: demangled to C++, then shortened for tables.

The driver names a kernel by its mangled symbol (`_ZN2at6native29vectorized_elementwise...`).
Files keep that full name; tables show `short_names`: demangled (torch's own demangler),
the return type and outer argument list dropped, namespaces and `operator()() const`
removed, lambdas as `λ3` (their number kept: it is what tells two dtypes' kernels apart),
and cut in the middle when still long. Names that still collide get a short hash of the
full name, so no two rows of a table read the same.
"""

from __future__ import annotations

import re
import zlib
from collections import Counter
from collections.abc import Iterable

from graph_harness.capture.graph.reader import demangle

_LAMBDA = re.compile(r"\{lambda\([^{}]*?\)#(\d+)\}")
_NAMESPACE = re.compile(r"\b(?:[A-Za-z_]\w*::)+(?=[A-Za-z_~λ])")


def _strip_trailing_args(s: str) -> str:
    """Drop the outermost trailing `(...)` (the kernel's parameter list)."""
    if not s.endswith(")"):
        return s
    depth = 0
    for i in range(len(s) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(s[i], 0)
        if depth == 0:
            return s[:i]
    return s


def readable(name: str) -> str:
    """The demangled name without what every kernel shares."""
    s = _strip_trailing_args(demangle(name))
    s = re.sub(r"^void ", "", s)
    s = _LAMBDA.sub(lambda m: f"λ{m.group(1)}", s)
    s = s.replace("::operator()() const", "").replace("(anonymous namespace)::", "")
    s = _NAMESPACE.sub("", s)  # first: a function's own name ends at its "("
    prev = None
    while prev != s:  # inner argument lists, innermost first
        prev, s = s, re.sub(r"\([^()]*\)", "", s)
    return re.sub(r"\s+>", ">", s)


def _cut(s: str, width: int) -> str:
    if len(s) <= width:
        return s
    head = width * 3 // 5
    return s[:head] + "…" + s[-(width - head - 1) :]


def short_names(names: Iterable[str | None], width: int = 72) -> dict[str, str]:
    """Full name -> the name to show, unique among `names`."""
    full = sorted({n for n in names if n})
    short = {n: _cut(readable(n), width) for n in full}
    seen = Counter(short.values())
    for n in full:
        if seen[short[n]] > 1:
            tag = f" #{zlib.crc32(n.encode()):08x}"  # 8 hex digits: 1 in 4e9 to collide
            short[n] = _cut(readable(n), width - len(tag)) + tag
    return short
