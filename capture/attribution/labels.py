"""Scope labels: one meaning of a label with its repeats generalised, and one natural order.

Generalised, every part (split at `.` or `/`) that is a whole number becomes `*`, and a
round stage `stageN` before a `/` becomes `stage*`: the same work at every layer, block
and stage has one name. Natural order compares labels part by part, numbers by value
(`layers.2` before `layers.10`). Examples and who uses it: docs/your-model.md,
"capture/attribution/labels.py".
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# A whole-number part (bounded by the label's ends, `.` or `/`), and a round stage before `/`.
_NUMBER = re.compile(r"(?<![^./])\d+(?![^./])")
_STAGE = re.compile(r"(?<![^./])stage\d+(?=/)")
_DIGITS = re.compile(r"(\d+)")


def generalize(label: str) -> str:
    """`layers.3.attention` -> `layers.*.attention`, `stage3/pack` -> `stage*/pack`,
    `blocks/3/attn` -> `blocks/*/attn`; `layers.3a` and `stage3` stay as they are."""
    return _NUMBER.sub("*", _STAGE.sub("stage*", label))


def natural_parts(parts: Iterable[str]) -> list:
    """A sort key for a scope-tree position (its parts): numbers by value within each
    part, and a position before the positions under it."""
    return [
        [(0, int(x), "") if x.isdigit() else (1, 0, x) for x in _DIGITS.split(part)]
        for part in parts
    ]


def natural(label: str) -> list:
    """A sort key putting labels in natural order (see the module docstring)."""
    return natural_parts(label.split("."))
