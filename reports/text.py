"""Names from documents, models and kernels, made printable as they are.

A name can hold anything a JSON document or a user's `scope("...")` can: rich markup
(`[/]`), an emoji code, a `$` (matplotlib's math), or a lone surrogate (from a `\\udc80`
escape), which no UTF-8 stream can take. The consoles print text as text
(reports/cli/console.py), and everything shown passes through `printable` first
(capture/text.py, where names coming in are made text), so a table measures the same
characters it prints.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from graph_harness.capture.text import plural as plural  # re-exported: reports count too
from graph_harness.capture.text import printable

if TYPE_CHECKING:
    import pandas as pd


def plot_label(text: object) -> str:
    """A label for matplotlib: printable, and a `$` shown as one, never as math."""
    return printable(str(text)).replace("$", r"\$")


# What one counted item of an export is, by its source: a graph's node, or on the CPU an
# operation dispatched (the counting route: capture/graph/dispatch.py). The one source of
# that word for labels and titles.
COUNTED = {"cuda-graph": "nodes", "cpu-dispatch": "dispatches"}


def counted(source: str) -> str:
    """The plural word for what an export of `source` counts: "nodes" or "dispatches"."""
    return COUNTED[source]


def markdown_table(df: pd.DataFrame, floatfmt: str = ".4g", *, none: str | None = None) -> str:
    """A markdown table of `df`; `none`: what to say instead when it has no row (a table
    of the rows that differ, where none does), rather than a header over nothing."""
    if none is not None and df.empty:
        return none
    cols = list(df.columns)
    lines = ["| " + " | ".join(map(str, cols)) + " |", "|" + "---|" * len(cols)]
    for row in df.itertuples(index=False):
        cells = [format(v, floatfmt) if isinstance(v, float) else str(v) for v in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
