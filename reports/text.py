"""Names from documents, models and kernels, made printable as they are.

A name can hold anything a JSON document or a user's `scope("...")` can: rich markup
(`[/]`), an emoji code, a `$` (matplotlib's math), or a lone surrogate (from a `\\udc80`
escape), which no UTF-8 stream can take. The consoles print text as text
(reports/cli/console.py), and everything shown passes through `printable` first, so
a table measures the same characters it prints.
"""

from __future__ import annotations


def printable(text: str) -> str:
    """`text` with each lone surrogate as its backslash escape (`\\udc80`)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def plot_label(text: object) -> str:
    """A label for matplotlib: printable, and a `$` shown as one, never as math."""
    return printable(str(text)).replace("$", r"\$")


def plural(n: int, word: str, words: str | None = None) -> str:
    """`n` and the word, singular for one: "1 export", "5 exports"."""
    return f"{n} {word if n == 1 else (words or word + 's')}"


# What one counted item of an export is, by its source: a graph's node, or on the CPU an
# operation dispatched (the counting route: capture/graph/dispatch.py). The one source of
# that word for labels and titles.
COUNTED = {"cuda-graph": "nodes", "cpu-dispatch": "dispatches"}


def counted(source: str) -> str:
    """The plural word for what an export of `source` counts: "nodes" or "dispatches"."""
    return COUNTED[source]
