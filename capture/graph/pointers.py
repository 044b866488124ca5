"""Which nodes of a graph point into a tensor's bytes: the addresses in each node's
parameters (every 8-byte word of a kernel's arguments, as cuFuncGetParamInfo lays them
out; a memset's or memcpy's destination, a certain write), read while the graph exists,
matched against a byte range later. A kernel's arguments never say whether it reads or
writes what they point to (docs/record.md, "The node that writes it"). Needs CUDA and
cuda-bindings to read; the matching is plain Python."""

from __future__ import annotations

import ctypes
import struct
from dataclasses import dataclass, field
from typing import Any

from graph_harness.capture.graph.reader import RawNode, _bindings, _ok, memcpy_params

_WORD = 8
_MIN_ADDRESS = 1 << 16  # below this no device allocation lives: small integers, not pointers
_LAUNCH_PARAM_END, _LAUNCH_PARAM_BUFFER_POINTER, _LAUNCH_PARAM_BUFFER_SIZE = 0, 1, 2
_MAX_ARGS = 4096  # CUDA caps a kernel's arguments at 32 KiB: never more than this many


@dataclass(frozen=True)
class NodePointers:
    """One node's possible addresses (`words`), and the byte ranges it writes for certain
    (`writes`, [start, end): a memset's or memcpy's destination)."""

    words: frozenset[int] = field(default_factory=frozenset)
    writes: tuple[tuple[int, int], ...] = ()

    def points_into(self, lo: int, hi: int) -> bool:
        return any(lo <= w < hi for w in self.words)

    def writes_into(self, lo: int, hi: int) -> bool:
        return any(a < hi and lo < b for a, b in self.writes)


def words_of(buf: bytes, offset: int = 0) -> set[int]:
    """The 8-byte little-endian words of `buf` at 8-aligned addresses (`offset` is the
    buffer's own offset in the argument layout), that could be addresses."""
    out = set()
    start = (-offset) % _WORD
    for i in range(start, len(buf) - _WORD + 1, _WORD):
        (w,) = struct.unpack_from("<Q", buf, i)
        if w >= _MIN_ADDRESS:
            out.add(w)
    return out


@dataclass(frozen=True)
class Touch:
    """A node that points into (or writes) a tensor's bytes."""

    index: int  # the node's index in the export (raw order)
    writes: bool  # for certain (memset, memcpy destination); False: points into


def touching(pointers: list[NodePointers | None], lo: int, hi: int) -> list[Touch]:
    """The nodes, in graph order, whose addresses fall in [lo, hi)."""
    out = []
    for i, p in enumerate(pointers):
        if p is None:
            continue
        if p.writes_into(lo, hi):
            out.append(Touch(i, True))
        elif p.points_into(lo, hi):
            out.append(Touch(i, False))
    return out


def first_writer(touches: list[Touch]) -> Touch | None:
    """The first node that writes for certain, else the first that points in."""
    for t in touches:
        if t.writes:
            return t
    return touches[0] if touches else None


def read_pointers(raw: list[RawNode]) -> list[NodePointers | None]:
    """Each node's addresses, read while its graph exists (None: a node whose parameters
    could not be read, or that has none worth reading)."""
    rt, drv = _bindings()
    out: list[NodePointers | None] = []
    layouts: dict[int, list[tuple[int, int]]] = {}  # a kernel's argument layout, read once
    for n in raw:
        try:
            if n.kind == "kernel":
                words = _kernel_words(drv, n.handle, layouts)
                out.append(NodePointers(frozenset(words)))
            elif n.kind == "memset":
                out.append(_memset(rt, n.handle))
            elif n.kind == "memcpy":
                c = memcpy_params(n.handle)
                out.append(NodePointers(frozenset({c.src}), ((c.dst, c.dst + c.nbytes),)))
            else:
                out.append(None)
        except Exception:  # one unreadable node is unknown, not the end of the reading
            out.append(None)
    return out


def _kernel_words(drv: Any, handle: int, layouts: dict[int, list[tuple[int, int]]]) -> set[int]:
    (p,) = _ok(drv.cuGraphKernelNodeGetParams(handle), "cuGraphKernelNodeGetParams")
    if int(p.kernelParams):
        return _argument_words(drv, p, int(p.kernelParams), layouts)
    if int(p.extra):
        return _extra_words(int(p.extra))
    return set()


def _argument_words(
    drv: Any, p: Any, params: int, layouts: dict[int, list[tuple[int, int]]] | None = None
) -> set[int]:
    """Each argument's bytes, as cuFuncGetParamInfo (cuKernelGetParamInfo) lays them out
    (`layouts`: each function's layout, kept across one graph's nodes)."""
    key = int(p.func) or int(p.kern)
    layout = None if layouts is None else layouts.get(key)
    if layout is None:
        layout = _layout(drv, p)
        if layouts is not None:
            layouts[key] = layout
    out: set[int] = set()
    for i, (offset, size) in enumerate(layout):
        value = ctypes.c_void_p.from_address(params + i * _WORD).value
        if value and size:
            out |= words_of(ctypes.string_at(value, size), offset)
    return out


def _layout(drv: Any, p: Any) -> list[tuple[int, int]]:
    """A kernel's arguments' (offset, size), in order."""
    if int(p.func):
        info = lambda i: drv.cuFuncGetParamInfo(p.func, i)
    else:
        info = lambda i: drv.cuKernelGetParamInfo(p.kern, i)
    out = []
    for i in range(_MAX_ARGS):
        err, offset, size = info(i)
        if int(err) != 0:  # past the last argument
            break
        out.append((int(offset), int(size)))
    return out


def _extra_words(extra: int) -> set[int]:
    """The arguments of a node launched with `extra` (one packed buffer and its size)."""
    buf = size = None
    for i in range(0, 64, 2):  # pairs: (key, value), ended by CU_LAUNCH_PARAM_END
        key = ctypes.c_void_p.from_address(extra + i * _WORD).value or 0
        if key == _LAUNCH_PARAM_END:
            break
        value = ctypes.c_void_p.from_address(extra + (i + 1) * _WORD).value
        if key == _LAUNCH_PARAM_BUFFER_POINTER:
            buf = value
        elif key == _LAUNCH_PARAM_BUFFER_SIZE and value:
            size = ctypes.c_size_t.from_address(value).value
    if not buf or not size:
        return set()
    return words_of(ctypes.string_at(buf, size))


def _memset(rt: Any, handle: int) -> NodePointers:
    try:
        got = rt.cudaGraphMemsetNodeGetParams(handle)
    except TypeError:  # a binding that wants its handle type, not an int
        got = rt.cudaGraphMemsetNodeGetParams(rt.cudaGraphNode_t(handle))
    (m,) = _ok(got, "cudaGraphMemsetNodeGetParams")
    dst, width, height = int(m.dst), int(m.width), max(1, int(m.height))
    end = dst + int(m.pitch) * (height - 1) + width * int(m.elementSize)
    return NodePointers(frozenset(), ((dst, end),))
