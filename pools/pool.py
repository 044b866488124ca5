"""GraphBufferPool: static, named, aligned views carved from shared device chunks.

A captured CUDA graph bakes buffer addresses into its nodes, so every buffer it touches
must outlive the graph and never move: the pool takes one allocation per chunk and hands
out typed views at a cursor; after `freeze()` nothing more may be carved. Alignment is of
the address itself (a chunk taken `alignment - 1` bytes larger where needed, counted in
`bytes_reserved` and the budget); a zero-byte view reserves nothing. Shapes and dtypes
accepted, and why: docs/builtin-round.md, "The buffer pool"."""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass

import torch

# A tensor's size in bytes must fit torch's int64 sizes.
MAX_BYTES = 2**63 - 1
_QUANTIZED = tuple(
    getattr(torch, n)
    for n in ("qint8", "quint8", "qint32", "quint4x2", "quint2x4")
    if hasattr(torch, n)
)


class PoolExhausted(RuntimeError):
    """A carve would take the pool past its byte budget."""


class PoolFrozen(RuntimeError):
    """A carve was asked of a frozen pool."""


@dataclass(frozen=True)
class Region:
    """Where one carved view lives: chunk index, byte offset in the chunk, and its layout.
    A view of zero bytes lives in no chunk (`chunk` None, `offset` 0)."""

    name: str
    chunk: int | None
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
    bytes_lost_to_alignment: int  # padding before views inside chunks (chunk starts too)


def _poison_(view: torch.Tensor) -> None:
    # NaN for floats; all-ones bits for integers (-1 when signed): an unwritten
    # buffer then shows in any exact comparison.
    if view.numel() == 0:
        return
    if view.dtype.is_floating_point or view.dtype.is_complex:
        try:
            view.fill_(float("nan"))
            return
        except (RuntimeError, NotImplementedError):  # no fill for it (float4): all-ones bits
            pass
    elif view.dtype == torch.bool:
        view.fill_(True)
        return
    view.view(-1).view(torch.uint8).fill_(0xFF)


def _check_shape(name: str, shape: object) -> tuple[int, ...]:
    """The shape as a tuple of Python ints, or a TypeError/ValueError naming the region."""
    seq = isinstance(shape, tuple | list)  # torch.Size is a tuple
    what = "an int" if seq else "an int or a tuple/list of ints"
    out = []
    for i, d in enumerate(shape if seq else [shape]):
        where = f"shape[{i}] of {name!r}" if seq else f"shape of {name!r}"
        try:
            if isinstance(d, bool | torch.Tensor):  # both have __index__; neither is meant
                raise TypeError
            v = operator.index(d)  # Python and numpy integers
        except TypeError:
            raise TypeError(f"{where} must be {what}, got {d!r} ({type(d).__name__})") from None
        if v < 0:
            raise ValueError(f"{where} must be >= 0, got {v}")
        out.append(v)
    return tuple(out)


def _check_dtype(name: str, dtype: object) -> int:
    """The dtype's element size, or a TypeError naming the region."""
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"dtype of {name!r} must be a torch.dtype, got {dtype!r}")
    if dtype in _QUANTIZED:
        raise TypeError(
            f"dtype {dtype} of {name!r} is quantized: a view of raw bytes would have no scale "
            "or zero point; carve its integer storage (torch.int8, torch.uint8 or "
            "torch.int32) and quantize from that"
        )
    try:
        torch.empty(0, dtype=torch.uint8).view(dtype)
    except (RuntimeError, TypeError) as e:
        raise TypeError(
            f"dtype {dtype} of {name!r} cannot be carved: torch cannot view bytes as it ({e})"
        ) from None
    return dtype.itemsize


class GraphBufferPool:
    """Carves disjoint, aligned, named views from shared device chunks.

    Args:
        device: where the chunks live.
        chunk_bytes: size of each chunk; a request larger than that gets a chunk of its own.
        alignment: every view's address is a multiple of this many bytes (a power of two).
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
        if not _is_int(chunk_bytes) or chunk_bytes < 1:
            raise ValueError(f"chunk_bytes must be a positive int, got {chunk_bytes!r}")
        if not _is_int(alignment) or alignment < 1 or alignment & (alignment - 1):
            raise ValueError(f"alignment must be a power of two >= 1, got {alignment!r}")
        if budget_bytes is not None and (not _is_int(budget_bytes) or budget_bytes < 0):
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

    def carve(
        self, name: str, shape: tuple[int, ...] | list[int] | int, dtype: torch.dtype
    ) -> torch.Tensor:
        """A contiguous view `[*shape]` of `dtype` whose address is a multiple of
        `alignment` (and of the element size), at the cursor or in a new chunk."""
        if self._frozen:
            raise PoolFrozen(
                f"cannot carve {name!r}: the pool is frozen (a graph may already be captured on "
                "its addresses); carve every buffer before freeze()"
            )
        if not isinstance(name, str) or not name:
            raise ValueError(f"a region needs a non-empty str name, got {name!r}")
        if name in self._regions:
            raise ValueError(f"a region named {name!r} exists already: {self._regions[name]}")
        itemsize = _check_dtype(name, dtype)
        shape = _check_shape(name, shape)
        # Every dim counts toward torch's size limit, even beside a zero.
        span = math.prod(d for d in shape if d) * itemsize
        if span > MAX_BYTES:
            raise ValueError(
                f"shape {shape} of {name!r} spans {span} B of {dtype}: more than a tensor can "
                "address (2**63 - 1 B)"
            )
        if self.alignment % itemsize and itemsize % self.alignment:
            raise ValueError(f"alignment {self.alignment} does not suit {dtype} ({itemsize} B)")
        nbytes = math.prod(shape) * itemsize
        if nbytes == 0:
            # Nothing to hold: an empty tensor of its own reserves nothing, moves no cursor.
            view = torch.empty(shape, dtype=dtype, device=self.device)
            self._regions[name] = Region(name, None, 0, 0, dtype, shape)
            return view
        align = max(self.alignment, itemsize)

        start = None
        if self._chunks:
            base = self._chunks[-1].data_ptr()
            start = _round_up(base + self._cursor, align) - base  # aligned address
            if start + nbytes > self._chunks[-1].numel():
                start = None
            else:
                self._lost += start - self._cursor
        if start is None:
            start = self._open_chunk(name, nbytes, align)
        chunk = self._chunks[-1]
        view = chunk[start : start + nbytes].view(dtype).view(shape)
        self._cursor = start + nbytes
        self._regions[name] = Region(name, len(self._chunks) - 1, start, nbytes, dtype, shape)
        if self.poison:
            _poison_(view)
        return view

    def _open_chunk(self, name: str, nbytes: int, align: int) -> int:
        """Open a chunk with room for `nbytes` at an `align`-ed address; return that offset.

        Room to align the first view wherever the allocator puts the chunk: `align - 1`
        bytes more than the view when the view alone sizes the chunk."""
        size = max(self.chunk_bytes, nbytes + align - 1)
        if self.budget_bytes is not None:
            left = self.budget_bytes - self.bytes_reserved
            if nbytes > left:
                raise PoolExhausted(
                    f"carving {name!r} needs {nbytes} B in a new chunk, but only {left} B of the "
                    f"{self.budget_bytes} B budget are left ({self.bytes_reserved} B reserved in "
                    f"{len(self._chunks)} chunks); raise budget_bytes or carve less"
                )
            size = min(size, left)
        chunk = torch.empty(size, dtype=torch.uint8, device=self.device)
        start = -chunk.data_ptr() % align
        if start + nbytes > size:  # only under a budget: too few bytes left to align
            del chunk
            raise PoolExhausted(
                f"carving {name!r} needs {nbytes} B at a {align}-byte aligned address; the "
                f"{size} B left of the {self.budget_bytes} B budget landed {start} B before "
                f"one; raise budget_bytes by {align - 1} B (or carve less)"
            )
        # The tail of the chunk we leave is not counted as alignment loss: it was never used.
        self._chunks.append(chunk)
        self._lost += start
        return start

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


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _round_up(x: int, a: int) -> int:
    return (x + a - 1) // a * a
