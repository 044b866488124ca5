"""Names as text: every string graph-harness takes in (a user's `scope("...")`, a module's
name, a document's field) holds only what UTF-8 can encode, and nothing a terminal obeys.
A lone surrogate or a control character is kept as its backslash escape, at the point it
enters (and again wherever text is shown). Why each matters: docs/output.md, "Names as
text". And `plural`, for every count put into words (progress lines, tables in reports)."""

from __future__ import annotations

import re
from typing import Any

# C0 controls, DEL, C1 controls, and the bidirectional embeddings, overrides and isolates
# (which reorder what a terminal shows: "Trojan Source")
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printable(text: str, *, keep: str = "") -> str:
    """`text` with each lone surrogate and each control character (but those in `keep`:
    the consoles keep our own newlines) as its backslash escape (`\\udc80`, `\\x1b`)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    if _CONTROL.search(text) is None:
        return text
    return _CONTROL.sub(lambda m: m[0] if m[0] in keep else ascii(m[0])[1:-1], text)


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


def a_type(value: object) -> str:
    """ "a list", "an int": the article and the name of `value`'s type, for messages."""
    name = type(value).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def plural(n: int, word: str, words: str | None = None) -> str:
    """`n` and the word, singular for one: "1 export", "5 exports"."""
    return f"{n} {word if n == 1 else (words or word + 's')}"
