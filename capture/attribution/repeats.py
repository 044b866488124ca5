"""Repeated layers, folded: a model's blocks (`layers.0` ... `layers.31`) are the same work
N times, so a table shows one row times N where they agree. Two sources: module scopes
whose last name is an index and whose subtrees agree row for row (`fold_scopes`), and the
longest block of nodes repeated back to back in a graph no one scoped
(`repeating_block`). Nothing is merged that differs. In full: docs/your-model.md,
"capture/attribution/repeats.py".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

_INDEXED = re.compile(r"^(?P<stem>(?:.*\.)?)(?P<index>\d+)$")  # `layers.3`: an index
MAX_PERIOD = 20_000  # the longest block looked for (a layer of a real model is far shorter)
MAX_WORK = 200_000_000  # periods tried times nodes: a million-node graph tries blocks to 200


def fold_scopes(tree: pd.DataFrame, values: Sequence[str]) -> pd.DataFrame:
    """A scope tree (`depth`, `scope` and the `values` columns, in tree order) with runs
    of sibling layers (names ending in `.N`, consecutive N) whose subtrees agree row for
    row folded into the first of them, renamed `layers.{0..3}`, with `times` (4) on each
    folded row (1 elsewhere); a fold inside a fold keeps the outer name
    (`layers.{0..3}.experts.{0..7}`, times the inner count). The values stay per block.
    Linear in the rows times the tree's depth."""
    df = tree.reset_index(drop=True)
    scopes = list(df["scope"])
    t = _Subtrees(scopes, [int(d) for d in df["depth"]], df[list(values)].to_numpy().tolist())
    n = len(df)
    names, times, dropped = list(scopes), [1] * n, [False] * n
    for p in [-1, *range(n)]:  # parents in tree order: an outer fold before an inner one
        if p >= 0 and dropped[p]:
            continue
        indexed = []
        for i in t.children.get(p, ()):
            m = _INDEXED.match(scopes[i])
            if m is not None:
                indexed.append((i, m))
        for run in _runs(indexed, t.signature):
            if len(run) > 1:
                _fold(run, t.end, names, times, dropped)
    out = df.assign(scope=names, times=times)
    return out[[not d for d in dropped]].reset_index(drop=True)


class _Subtrees:
    """A scope tree's rows (in tree order) as subtrees: where each row's subtree ends,
    each row's children, and each subtree's signature (its rows' names below its root and
    their values), what siblings must share to fold."""

    def __init__(self, scopes: list[str], depth: list[int], vals: list[list]) -> None:
        self.scopes, self.vals = scopes, vals
        n = len(scopes)
        self.end, parent, open_rows = [n] * n, [-1] * n, []
        for i in range(n):
            while open_rows and depth[open_rows[-1]] >= depth[i]:
                self.end[open_rows.pop()] = i
            parent[i] = open_rows[-1] if open_rows else -1
            open_rows.append(i)
        self.children: dict[int, list[int]] = {}
        for i in range(n):
            self.children.setdefault(parent[i], []).append(i)
        self.sigs: dict[int, tuple] = {}

    def signature(self, i: int) -> tuple:
        """Row i's subtree as names below it and values, memoized."""
        if i not in self.sigs:
            root = len(self.scopes[i])
            rows = range(i, self.end[i])
            self.sigs[i] = tuple((self.scopes[j][root:], *self.vals[j]) for j in rows)
        return self.sigs[i]


Indexed = tuple[int, re.Match]  # a row whose name ends in an index, and that match


def _runs(indexed: list[Indexed], signature: Callable[[int], tuple]) -> Iterator[list[Indexed]]:
    """Siblings in order, as runs: consecutive indices of one stem whose subtrees agree
    (a run of one where the next differs)."""
    k = 0
    while k < len(indexed):
        run = [indexed[k]]
        while k + len(run) < len(indexed):
            j, mj = indexed[k + len(run)]
            prev = run[-1][1]
            if mj["stem"] != prev["stem"] or int(mj["index"]) != int(prev["index"]) + 1:
                break
            if signature(j) != signature(run[0][0]):
                break
            run.append((j, mj))
        yield run
        k += len(run)


def _fold(
    run: list[Indexed], end: list[int], names: list[str], times: list[int], dropped: list[bool]
) -> None:
    """A run folded into its first: its subtree renamed `layers.{0..3}` with `times` on
    each row, the others' subtrees dropped."""
    i, m = run[0]
    cur = names[i]
    new = f"{cur[: len(cur) - len(m['index'])]}{{{m['index']}..{run[-1][1]['index']}}}"
    for j in range(i, end[i]):
        names[j] = new + names[j][len(cur) :]
        times[j] = len(run)
    for j, _ in run[1:]:
        for x in range(j, end[j]):
            dropped[x] = True


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
