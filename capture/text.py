"""Names as text: every string graph-harness takes in (a user's `scope("...")`, a module's
name, a document's field) holds only what UTF-8 can encode.

A lone surrogate (a `\\udc80` JSON escape makes one; so does a path or argument Python
decoded with surrogateescape) is a str no stream, file or Arrow-backed pandas column can
take: writing or framing it fails far from where it came in. Each is kept as its
backslash escape instead, at the point it enters, so the data that flows on is text.
And `plural`, for every count put into words (progress lines here, tables in reports).
"""

from __future__ import annotations

from typing import Any


def printable(text: str) -> str:
    """`text` with each lone surrogate as its backslash escape (`\\udc80`)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def printable_all(value: Any) -> Any:
    """`value` (JSON-like: str, list, dict, scalars) with `printable` applied to every
    string in it, keys included."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, list):
        return [printable_all(x) for x in value]
    if isinstance(value, dict):
        return {printable_all(k): printable_all(x) for k, x in value.items()}
    return value


def plural(n: int, word: str, words: str | None = None) -> str:
    """`n` and the word, singular for one: "1 export", "5 exports"."""
    return f"{n} {word if n == 1 else (words or word + 's')}"
