"""Inductor provenance kept for reuse: a compiled graph's provenance, recorded when it was
compiled inside `module_scopes`, is offered again to every later capture that runs the
same compiled code, so a second capture compiles nothing and still attributes by module.

A record is bound to the Dynamo cache entry that runs it, offered only while that entry is
still in Dynamo's cache and only to a capture whose model the frame belongs to, so it is
never paired with another graph. Anything unexpected degrades to "not kept", never to an
error. How it is keyed: docs/your-model.md, "capture/scopes/provenance_cache.py".
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass, field
from types import CodeType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from graph_harness.capture.scopes.provenance import CompiledGraph

MAX_KEPT = 512  # records kept process-wide (the oldest go first)
RESUME = "torch_dynamo_resume_in_"  # Dynamo's names for the code after a graph break


def entries_of(code: CodeType | None) -> list[Any]:
    if code is None:
        return []
    try:
        from torch._dynamo.eval_frame import _debug_get_cache_entry_list

        return list(_debug_get_cache_entry_list(code))
    except Exception:
        return []


def current_frame() -> tuple[CodeType | None, Any]:
    """The code object Dynamo is compiling and the compile id (None where unknown); called
    from inside a compile."""
    code = cid = None
    try:
        from torch._dynamo.symbolic_convert import InstructionTranslator

        code = InstructionTranslator.current_tx().f_code
    except Exception:
        code = None
    try:
        from torch._guards import CompileContext

        cid = CompileContext.current_compile_id()
    except Exception:
        cid = None
    return code, cid


@dataclass
class Pending:
    """A compile seen, not yet bound to its cache entry."""

    graph: Any  # provenance.CompiledGraph
    frame: CodeType | None
    compile_id: Any
    before: list[CodeType] = field(default_factory=list)  # the frame's entries before it


@dataclass
class Kept:
    graph: Any  # provenance.CompiledGraph, or None with `reason`
    frame: weakref.ref
    entry_code: weakref.ref | None
    reason: str | None = None

    def live(self) -> bool:
        frame = self.frame()
        code = self.entry_code() if self.entry_code is not None else None
        return code is not None and any(e.code is code for e in entries_of(frame))


_lock = threading.Lock()
_kept: list[Kept] = []


def pending(graph: CompiledGraph, frame: CodeType | None, compile_id: object) -> Pending:
    return Pending(graph, frame, compile_id, [e.code for e in entries_of(frame)])


def bind(p: Pending) -> str | None:
    """Keep `p` for reuse, bound to its cache entry; None, or why it cannot be kept."""
    if p.frame is None:
        return "Dynamo's compiling frame could not be read"
    entries = entries_of(p.frame)
    with _lock:
        taken = {id(k.entry_code()) for k in _kept if k.entry_code is not None}
    if entries and hasattr(entries[0], "compile_id") and p.compile_id is not None:
        mine = [e for e in entries if same_compile_id(e.compile_id, p.compile_id)]
    else:
        mine = [e for e in entries if all(e.code is not b for b in p.before)]
    mine = [e for e in mine if id(e.code) not in taken]
    reason = None
    if len(mine) != 1:
        reason = (
            "Dynamo kept no cache entry for it"
            if not mine
            else "its Dynamo cache entry could not be told apart"
        )
    try:
        record = Kept(
            p.graph if reason is None else None,
            weakref.ref(p.frame),
            weakref.ref(mine[0].code) if reason is None else None,
            reason,
        )
    except TypeError:  # a code object that takes no weak reference
        return "its code takes no weak reference"
    with _lock:
        _kept.append(record)
        del _kept[:-MAX_KEPT]
    return reason


def same_compile_id(a: object, b: object) -> bool:
    try:
        return a == b or str(a) == str(b)
    except Exception:
        return False


def _belongs(frame: CodeType | None, codes: set[CodeType]) -> bool:
    if frame is None:
        return False
    if frame in codes:
        return True
    return frame.co_name.startswith(RESUME) and frame.co_filename in {c.co_filename for c in codes}


@dataclass(frozen=True)
class Offered:
    graphs: list  # provenance.CompiledGraph, live, of the given code
    unkept: list[str]  # why some compiles of that code were not kept


def offered(codes: set[CodeType], exclude: list | None = None) -> Offered:
    """The kept graphs of frames in `codes` whose cache entries still run, newest first,
    less `exclude` (graphs already in hand); and the reasons of records not kept."""
    with _lock:
        _kept[:] = [k for k in _kept if k.frame() is not None]
        records = list(_kept)
    skip = {id(g) for g in exclude or ()}
    graphs, unkept = [], []
    for k in reversed(records):
        if not _belongs(k.frame(), codes):
            continue
        if k.graph is None:
            unkept.append(k.reason)
        elif id(k.graph) not in skip and k.live():
            graphs.append(k.graph)
    return Offered(graphs, unkept)


def forget() -> None:
    """Drop every record (tests; a fresh process starts empty)."""
    with _lock:
        _kept.clear()
