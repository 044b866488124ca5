"""Repeated layers, folded: a model's blocks (`layers.0` ... `layers.31`) are the same work
N times, so a table shows one row times N where they agree. Two sources:

- **module scopes**: sibling scopes whose last name is an index (`layers.3`) and whose
  subtrees agree row for row (`fold_scopes`);
- **the node sequence** of a graph no one scoped (a dump): the longest run of one block of
  nodes repeated back to back, by type and kernel in capture order (`repeating_block`).

Nothing is merged that differs: a layer that is not like its neighbours keeps its own
rows, and a sequence with no block repeated at least twice has none.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

_INDEXED = re.compile(r"^(?P<stem>.*?)(?P<index>\d+)$")
MAX_PERIOD = 20_000  # the longest block looked for (a layer of a real model is far shorter)
MAX_WORK = 200_000_000  # periods tried times nodes: a million-node graph tries blocks to 200


def fold_scopes(tree: pd.DataFrame, values: Sequence[str]) -> pd.DataFrame:
    """A scope tree (`depth`, `scope` and the `values` columns, in tree order) with runs
    of indexed siblings whose subtrees agree (same relative scopes, same values) folded
    into the first of them, renamed `layers.{0..3}`, with `times` (4) on each folded row
    (1 elsewhere). The values stay per block."""
    df = tree.reset_index(drop=True)
    scopes = list(df["scope"])
    children: dict[str, list[int]] = {}
    for i, s in enumerate(scopes):
        parent = s.rsplit(".", 1)[0] if "." in s else ""
        children.setdefault(parent, []).append(i)

    def subtree(i: int) -> list[int]:
        root = scopes[i]
        return [
            j
            for j in range(i, len(scopes))
            if scopes[j] == root or scopes[j].startswith(root + ".")
        ]

    def signature(i: int) -> tuple:
        root = scopes[i]
        return tuple((scopes[j][len(root) :], *(df.at[j, c] for c in values)) for j in subtree(i))

    rename: dict[int, tuple[str, str, int]] = {}  # first row of a run -> (old, new, times)
    drop: set[int] = set()
    for rows in children.values():
        indexed = [(i, _INDEXED.match(scopes[i].rsplit(".", 1)[-1])) for i in rows]
        indexed = [(i, m) for i, m in indexed if m is not None]
        k = 0
        while k < len(indexed):
            i, m = indexed[k]
            sig, run = signature(i), [(i, m)]
            while k + len(run) < len(indexed):
                j, mj = indexed[k + len(run)]
                if mj["stem"] != m["stem"] or int(mj["index"]) != int(run[-1][1]["index"]) + 1:
                    break
                if signature(j) != sig:
                    break
                run.append((j, mj))
            if len(run) > 1:
                first, last = int(m["index"]), int(run[-1][1]["index"])
                name = scopes[i]
                folded = f"{name[: len(name) - len(m['index'])]}{{{first}..{last}}}"
                rename[i] = (name, folded, len(run))
                for j, _ in run[1:]:
                    drop.update(subtree(j))
            k += len(run)
    out = df.copy()
    out["times"] = 1
    for i, (old, new, times) in rename.items():
        for j in subtree(i):
            out.at[j, "scope"] = new + scopes[j][len(old) :]
            out.at[j, "times"] = times
    return out.drop(index=sorted(drop)).reset_index(drop=True)


@dataclass(frozen=True)
class Repeat:
    """`times` copies of a block of `period` nodes, back to back from node `start`."""

    start: int
    period: int
    times: int

    @property
    def nodes(self) -> int:
        return self.period * self.times


def repeating_block(keys: Sequence[Hashable], *, min_times: int = 2) -> Repeat | None:
    """The block repeated back to back that covers the most of `keys` (each node's type
    and kernel, in capture order), the shortest such block where several cover as much;
    None where no block of two or more nodes (not all one node) repeats `min_times`
    times."""
    import numpy as np

    n = len(keys)
    if n < 2 * min_times:
        return None
    codes: dict[Hashable, int] = {}
    arr = np.fromiter((codes.setdefault(k, len(codes)) for k in keys), dtype=np.int64, count=n)
    best: Repeat | None = None
    for p in range(2, min(n // min_times, MAX_PERIOD, MAX_WORK // n) + 1):
        same = arr[:-p] == arr[p:]  # same[i]: node i is node i + p
        if not same.any():
            continue
        # the longest run of True: positions where runs start and end
        padded = np.concatenate(([False], same, [False]))
        edges = np.flatnonzero(padded[1:] != padded[:-1])
        starts, ends = edges[::2], edges[1::2]
        lengths = ends - starts
        k = int(lengths.argmax())
        times = int(lengths[k]) // p + 1
        if times < min_times:
            continue
        cover, at = times * p, int(starts[k])
        if (arr[at : at + p] == arr[at]).all():
            continue  # one node repeated is a run of it, not a block
        if best is None or cover > best.nodes:
            best = Repeat(at, p, times)
    return best
