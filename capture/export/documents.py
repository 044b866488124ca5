"""The versioned JSON documents graph-harness writes (node exports, replays, profiles):
read back checked, and their tables written as plain JSON values (`records`).

A document read back is checked field by field, type and range, before anything uses it:
whatever is wrong raises one `ExportError` (a ValueError) whose message names the file
and the field, e.g. `nodes-x.json: nodes[3].step: expected a str, got null`, so the CLI
can print it as one line and exit 2. Nothing here recurses into a document, so no
nesting depth can exhaust the stack; parsing itself is guarded for that too.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graph_harness.capture.errors import UsageError
from graph_harness.capture.paths import InputPathError, read_text_input
from graph_harness.capture.text import printable_all

if TYPE_CHECKING:
    import pandas as pd


def plain(v: Any) -> Any:
    """A value as plain JSON: numpy scalars as Python ones at full precision (to_json
    would round to 15 digits), lists and tuples as lists of plain values, and a missing
    value (None, NaN, an infinity, pandas' NA) as null, which every JSON parser reads
    (bare NaN is not JSON)."""
    v = v.item() if hasattr(v, "item") else v
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, list | tuple):
        return [plain(x) for x in v]
    pandas = sys.modules.get("pandas")  # a frame's NA: pandas is loaded if there is one
    if pandas is not None and v is pandas.NA:
        return None
    return v


def frame_records(frame: pd.DataFrame | None) -> list[dict[str, Any]] | None:
    """A DataFrame's rows as plain JSON objects (None for no frame); every table of a
    document goes out through here."""
    if frame is None:
        return None
    return [{k: plain(v) for k, v in r.items()} for r in frame.to_dict(orient="records")]


class ExportError(UsageError, ValueError):
    """A document that cannot be read (unreadable, not JSON, wrong schema, version or
    content); the message names the file and the field."""


def load_json(path: str | Path, what: str, error: type[ExportError] = ExportError) -> Any:
    """Parse `path` as UTF-8 JSON; any failure is `error` naming the file and the cause."""
    prefix = f"cannot read {what} {path}"
    try:
        text = read_text_input(path, what)  # a regular file only, bounded, UTF-8
    except InputPathError as e:
        raise error(str(e)) from None
    try:
        return made_printable(json.loads(text), text)
    except json.JSONDecodeError as e:
        raise error(f"{prefix}: not JSON ({e.msg} at line {e.lineno} column {e.colno})") from None
    except RecursionError:
        raise error(f"{prefix}: nested too deeply to read") from None
    except ValueError as e:
        if "digits" in str(e):  # an integer past Python's limit for str -> int
            raise error(
                f"{prefix}: a number has more digits than Python converts "
                f"({sys.get_int_max_str_digits()})"
            ) from None
        raise error(f"{prefix}: {e}") from None


# JSON escapes that make a lone surrogate or a control character, and the raw
# bidirectional controls (capture/text.py): a document holding none needs no pass
_UNPRINTABLE = re.compile(
    r"\\u[dD][89a-fA-F]|\\u00[01]|\\u007[fF]|\\u00[89]|\\u202[a-eA-E]|\\u206[6-9]|\\[bfnrt]"
    # raw: DEL and the C1 controls (JSON allows them unescaped; U+009B is a CSI to a
    # terminal that reads 8-bit controls) and the bidirectional overrides
    "|[\x7f-\x9f\u202a-\u202e\u2066-\u2069]"
)


def made_printable(doc: Any, text: str) -> Any:
    """`doc`, parsed from the JSON `text`, with `printable` applied to every string in it:
    no real name holds a lone surrogate or a control character, and one from an escape (or
    a raw bidirectional override) is kept as its escape, never obeyed when shown. A text
    holding none (every document graph-harness writes of its own) needs no pass."""
    if text.isascii() and "\\" not in text and "\x7f" not in text:
        return doc  # no escape, no raw control: what the search below finds is absent
    return printable_all(doc) if _UNPRINTABLE.search(text) else doc


def show(v: object) -> str:
    """A short JSON-like rendering of a value for an error message."""
    if v is None or isinstance(v, bool):
        return json.dumps(v)
    if isinstance(v, int):
        # str() of a huge int raises past Python's digit limit: give its size instead.
        return str(v) if v.bit_length() <= 128 else f"an integer of {v.bit_length()} bits"
    if isinstance(v, float):
        return json.dumps(v)
    if isinstance(v, str):
        s = json.dumps(v)
        return s if len(s) <= 50 else s[:46] + '..."'
    if isinstance(v, list):
        return f"a list of {len(v)}"
    if isinstance(v, dict):
        return "an object"
    return f"a {type(v).__name__}"


class Fields:
    """Checks of one document's fields; every failure names `where` and the field path."""

    def __init__(self, where: str, error: type[ExportError] = ExportError) -> None:
        self.where = where
        self.error = error

    def fail(self, path: str, message: str) -> None:
        raise self.error(f"{self.where}: {path}: {message}" if path else f"{self.where}: {message}")

    def expected(self, path: str, what: str, v: object) -> None:
        self.fail(path, f"expected {what}, got {show(v)}")

    def keys(
        self, path: str, d: dict, required: tuple[str, ...], optional: tuple[str, ...] = ()
    ) -> None:
        for k in required:
            if k not in d:
                self.fail(path, f"missing key {k!r}")
        unknown = [k for k in d if k not in required and k not in optional]
        if unknown:
            self.fail(
                path,
                f"unknown key {show(unknown[0])} (expected keys: {', '.join(required + optional)})",
            )

    def obj(self, path: str, v: object, *, none: bool = False) -> dict | None:
        if v is None and none:
            return None
        if not isinstance(v, dict):
            self.expected(path, "an object" + (" or null" if none else ""), v)
        return v

    def array(self, path: str, v: object) -> list:
        if not isinstance(v, list):
            self.expected(path, "a list", v)
        return v

    def string(
        self,
        path: str,
        v: object,
        *,
        none: bool = False,
        choices: Collection[str] | None = None,
    ) -> str | None:
        if v is None and none:
            return None
        if not isinstance(v, str):
            self.expected(path, "a str" + (" or null" if none else ""), v)
        if choices is not None and v not in choices:
            self.expected(path, "one of " + ", ".join(map(show, choices)), v)
        return v

    def integer(
        self,
        path: str,
        v: object,
        *,
        lo: int | None = None,
        hi: int | None = None,
        none: bool = False,
    ) -> int | None:
        """An int (not a bool, not a float however whole) in [lo, hi)."""
        if v is None and none:
            return None
        what = "an int"
        if lo is not None and hi is not None:
            what = f"an int in [{lo}, {hi})"
        elif lo is not None:
            what = f"an int >= {lo}"
        if none:
            what += " or null"
        if isinstance(v, bool) or not isinstance(v, int):
            self.expected(path, what, v)
        if (lo is not None and v < lo) or (hi is not None and v >= hi):
            self.expected(path, what, v)
        if v.bit_length() > 63:  # past int64: no column or tensor could hold it
            self.expected(path, what + " within 64 bits", v)
        return v

    def number(self, path: str, v: object, *, finite: bool = False) -> float:
        """An int or float (not a bool); NaN and infinities unless `finite`."""
        if isinstance(v, bool) or not isinstance(v, int | float):
            self.expected(path, "a number", v)
        if isinstance(v, int) and v.bit_length() > 1023:
            self.expected(path, "a number in float range", v)
        if finite and not math.isfinite(v):
            self.expected(path, "a finite number", v)
        return v

    def scalars(self, path: str, v: object, *, none: bool = False) -> dict | None:
        """An object of str keys to JSON scalars (str, number, bool, null)."""
        d = self.obj(path, v, none=none)
        if d is None:
            return None
        for k, x in d.items():
            if isinstance(x, int) and not isinstance(x, bool):
                self.integer(f"{path}.{k}", x)
            elif isinstance(x, float):  # Python's json reads NaN: no JSON printer would
                self.number(f"{path}.{k}", x, finite=True)
            elif not isinstance(x, str | bool | type(None)):
                self.expected(f"{path}.{k}", "a str, number, bool or null", x)
        return d

    def ints(self, path: str, v: object, *, none: bool = False) -> dict | None:
        """An object of str keys to ints (round parameters)."""
        d = self.obj(path, v, none=none)
        if d is None:
            return None
        for k, x in d.items():
            self.integer(f"{path}.{k}", x)
        return d
