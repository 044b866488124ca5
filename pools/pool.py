"""GraphBufferPool: static, named, aligned views carved from shared device chunks.

A captured CUDA graph bakes buffer addresses into its nodes, so every buffer it
touches must outlive the graph and never move. The pool takes one allocation per
chunk and hands out typed views at a cursor, so many small buffers share one
storage at fixed addresses. After `freeze()` nothing more may be carved: a graph
captured on these addresses must not see the pool grow under it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


class PoolExhausted(RuntimeError):
    """A carve would take the pool past its byte budget."""


class PoolFrozen(RuntimeError):
    """A carve was asked of a frozen pool."""


@dataclass(frozen=True)
class Region:
    """Where one carved view lives: chunk index, byte offset in the chunk, and its layout."""

    name: str
    chunk: int
    offset: int
    nbytes: int
    dtype: torch.dtype
    shape: tuple[int, ...]

    @property
    def end(self) -> int:
        return self.offset + self.nbytes


@dataclass(frozen=True)
class PoolStats:
    chunks: int
    bytes_reserved: int  # device bytes held by all chunks
    bytes_used: int  # bytes inside carved views
    bytes_lost_to_alignment: int  # padding between views inside chunks


def _poison_(view: torch.Tensor) -> None:
    # NaN for floats; all-ones bits for integers (-1 when signed): an unwritten
    # buffer then shows in any exact comparison.
    if view.numel() == 0:
        return
    if view.dtype.is_floating_point or view.dtype.is_complex:
        view.fill_(float("nan"))
    elif view.dtype == torch.bool:
        view.fill_(True)
    else:
        view.view(-1).view(torch.uint8).fill_(0xFF)


class GraphBufferPool:
    """Carves disjoint, aligned, named views from shared device chunks.

    Args:
        device: where the chunks live.
        chunk_bytes: size of each chunk; a request larger than that gets a chunk of its own.
        alignment: every view starts at a multiple of this many bytes (a power of two).
        budget_bytes: optional cap on the bytes the pool reserves from the device.
        poison: fill each new view with NaN (floats) or all-ones bits (integers).
    """

    def __init__(
        self,
        device: torch.device | str | int,
        chunk_bytes: int = 16 << 20,
        alignment: int = 256,
        *,
        budget_bytes: int | None = None,
        poison: bool = False,
    ) -> None:
        if not isinstance(chunk_bytes, int) or chunk_bytes < 1:
            raise ValueError(f"chunk_bytes must be a positive int, got {chunk_bytes!r}")
        if not isinstance(alignment, int) or alignment < 1 or alignment & (alignment - 1):
            raise ValueError(f"alignment must be a power of two >= 1, got {alignment!r}")
        if budget_bytes is not None and (not isinstance(budget_bytes, int) or budget_bytes < 0):
            raise ValueError(f"budget_bytes must be None or an int >= 0, got {budget_bytes!r}")
        self.device = torch.device(device)
        if self.device.type == "cuda" and self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        self.chunk_bytes = chunk_bytes
        self.alignment = alignment
        self.budget_bytes = budget_bytes
        self.poison = poison
        self._chunks: list[torch.Tensor] = []  # uint8 [chunk_nbytes] each
        self._cursor = 0  # byte offset of the next free byte in the last chunk
        self._regions: dict[str, Region] = {}
        self._lost = 0
        self._frozen = False

    # -- carving -----------------------------------------------------------

    def carve(self, name: str, shape: tuple[int, ...] | list[int] | int, dtype: torch.dtype):
        """A contiguous view `[*shape]` of `dtype`, at the cursor rounded up to `alignment`."""
        if self._frozen:
            raise PoolFrozen(
                f"cannot carve {name!r}: the pool is frozen (a graph may already be captured on "
                "its addresses); carve every buffer before freeze()"
            )
        if not isinstance(name, str) or not name:
            raise ValueError(f"a region needs a non-empty str name, got {name!r}")
        if name in self._regions:
            raise ValueError(f"a region named {name!r} exists already: {self._regions[name]}")
        if not isinstance(dtype, torch.dtype):
            raise TypeError(f"dtype must be a torch.dtype, got {dtype!r}")
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        if any(not isinstance(s, int) or s < 0 for s in shape):
            raise ValueError(f"shape must be non-negative ints, got {shape!r} for {name!r}")
        itemsize = torch.empty((), dtype=dtype).element_size()
        if self.alignment % itemsize and itemsize % self.alignment:
            raise ValueError(f"alignment {self.alignment} does not suit {dtype} ({itemsize} B)")
        nbytes = math.prod(shape) * itemsize
        align = max(self.alignment, itemsize)

        start = _round_up(self._cursor, align)
        if not self._chunks or start + nbytes > self._chunks[-1].numel():
            self._open_chunk(name, nbytes)
            start = 0
        else:
            self._lost += start - self._cursor
        chunk = self._chunks[-1]
        view = chunk[start : start + nbytes].view(dtype).view(shape)
        self._cursor = start + nbytes
        self._regions[name] = Region(name, len(self._chunks) - 1, start, nbytes, dtype, shape)
        if self.poison:
            _poison_(view)
        return view

    def _open_chunk(self, name: str, nbytes: int) -> None:
        size = max(self.chunk_bytes, nbytes)
        if self.budget_bytes is not None:
            left = self.budget_bytes - self.bytes_reserved
            if nbytes > left:
                raise PoolExhausted(
                    f"carving {name!r} needs {nbytes} B in a new chunk, but only {left} B of the "
                    f"{self.budget_bytes} B budget are left ({self.bytes_reserved} B reserved in "
                    f"{len(self._chunks)} chunks); raise budget_bytes or carve less"
                )
            size = min(size, left)
        # The tail of the chunk we leave is not counted as alignment loss: it was never used.
        self._chunks.append(torch.empty(max(size, 1), dtype=torch.uint8, device=self.device))
        self._cursor = 0

    # -- state -------------------------------------------------------------

    def freeze(self) -> None:
        """Forbid further carves: graphs may now be captured on these addresses."""
        self._frozen = True

    @property
    def frozen(self) -> bool:
        return self._frozen

    @property
    def bytes_reserved(self) -> int:
        return sum(c.numel() for c in self._chunks)

    def regions(self) -> list[Region]:
        """Every carved region, in carve order."""
        return list(self._regions.values())

    def region(self, name: str) -> Region:
        try:
            return self._regions[name]
        except KeyError:
            raise KeyError(f"no region named {name!r}; carved: {sorted(self._regions)}") from None

    def chunk(self, index: int) -> torch.Tensor:
        """The uint8 storage of chunk `index` (for tests and reports; do not carve by hand)."""
        return self._chunks[index]

    def stats(self) -> PoolStats:
        used = sum(r.nbytes for r in self._regions.values())
        return PoolStats(len(self._chunks), self.bytes_reserved, used, self._lost)

    def __repr__(self) -> str:
        s = self.stats()
        return (
            f"GraphBufferPool(device={self.device}, regions={len(self._regions)}, "
            f"chunks={s.chunks}, reserved={s.bytes_reserved} B, used={s.bytes_used} B, "
            f"frozen={self._frozen})"
        )


def _round_up(x: int, a: int) -> int:
    return (x + a - 1) // a * a
