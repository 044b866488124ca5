"""What a captured region read that it did not itself write, and the key it names a graph
by (`reads [8] int64`): a serving engineer reads graphs by batch size. The region's inputs
are the tensors it read whose storage (a view is its buffer) it never wrote, in place or
as an output, and that are not weights (`nn.Parameter`s and their views): a KV cache
updated in place is state. Distinct, in the order first read (docs/record.md, "Keys").
Plain Python, no torch: tested on the CPU with records made by hand."""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

KEY_SHAPES = 3  # inputs named in a key; the rest counted (`(+2)`)
MAX_READS = 8  # inputs kept in a graph's record (`reads`)


class Touch(NamedTuple):
    """One tensor an operator touched: its `storage` (device index and the storage's data
    pointer: views of one buffer share it), the `shape` and `dtype` it was read as (a read
    only: `()` and `""` for a write or an output) and whether it is a `weight` (an
    `nn.Parameter`). A tuple: one is made per tensor of every operator a region runs."""

    storage: tuple[int, int]
    shape: tuple[int, ...]
    dtype: str
    weight: bool = False


def shape_text(shape: tuple[int, ...], dtype: str) -> str:
    """`[8, 1] int64`: a tensor as a key names it."""
    return "[" + ", ".join(str(s) for s in shape) + "] " + dtype


class RegionReads:
    """The reads and writes of one region, operator by operator (see the module's notes)."""

    def __init__(self) -> None:
        self.ops = 0  # operators told
        self.last_input = 0  # the operator (1-based) that first read the latest input yet
        self._reads: dict[tuple, None] = {}  # (storage, shape, dtype), first read first
        self._written: set[tuple[int, int]] = set()
        self._weights: set[tuple[int, int]] = set()

    def view(self, touched: Iterable[Touch]) -> None:
        """A view operator (`slice`, `t`): it reads no data and writes none; a weight
        among its arguments marks its storage (the transposed weight a matmul reads)."""
        self._weights.update(t[0] for t in touched if t[3])

    def op(self, reads: Iterable[Touch], writes: Iterable[Touch], outputs: Iterable[Touch]) -> None:
        """An operator that read `reads`, wrote `writes` in place and returned `outputs`:
        an output on a storage none of its arguments has is one it allocated (written);
        one on an argument's storage is that argument (an alias), not a write."""
        self.ops += 1
        args = set()
        for storage, shape, dtype, weight in reads:  # Touch's fields, by place: per tensor
            args.add(storage)
            if weight:
                self._weights.add(storage)
            elif (storage, shape, dtype) not in self._reads:
                self._reads[storage, shape, dtype] = None
                if storage not in self._written and storage not in self._weights:
                    self.last_input = self.ops
        for t in writes:
            args.add(t[0])
            self._written.add(t[0])
        self._written.update(t[0] for t in outputs if t[0] not in args)

    def inputs(self) -> list[str]:
        """The region's inputs (the module's notes), each `[shape] dtype`, distinct, in
        the order first read."""
        out: dict[str, None] = {}
        for storage, shape, dtype in self._reads:
            if storage not in self._written and storage not in self._weights:
                out.setdefault(shape_text(shape, dtype))
        return list(out)


def shapes_key(inputs: list[str]) -> str | None:
    """A graph's key from its region's inputs: `reads [8] int64, [8, 64] float32`, the
    first KEY_SHAPES of them and how many more (`(+2)`); None where it read none."""
    if not inputs:
        return None
    more = len(inputs) - KEY_SHAPES
    return "reads " + ", ".join(inputs[:KEY_SHAPES]) + (f" (+{more})" if more > 0 else "")
