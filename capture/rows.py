"""Wide records as frozen dataclasses: their fields are their columns, in order, so a
table's columns are written once (as Node's are, capture/attribution/node.py).

    @dataclass(frozen=True)
    class Saving:
        a: str

    SAVING_COLUMNS = columns(Saving)
    frame(rows, Saving)  # one row per record, those columns, also when there are none"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from operator import attrgetter
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd


def columns(cls: type) -> list[str]:
    """A record class's fields, in order: its table's columns."""
    return [f.name for f in dataclasses.fields(cls)]


def frame(rows: Iterable[Any], cls: type, *, counts: bool = False) -> pd.DataFrame:
    """The records (instances of `cls`) as a table with `cls`'s columns, each value as the
    record holds it (not copied: a profile's samples run to 10^5 rows); with `counts`,
    each field declared `int | None` is pandas' nullable Int64 (a missing count is not
    a float's NaN)."""
    import pandas as pd

    names = columns(cls)
    get = attrgetter(*names)
    values = [get(r) for r in rows] if len(names) > 1 else [(get(r),) for r in rows]
    out = pd.DataFrame(values, columns=names)
    if not counts:
        return out
    ints = [f.name for f in dataclasses.fields(cls) if f.type in ("int | None", int | None)]
    return out.astype({c: "Int64" for c in ints})
