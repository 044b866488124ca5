"""One recorded graph: what a capture made (its node export, as `count` makes it), where
and under what key it was captured, its pool, and what became of it (replays, release).

A record is written once per capture and read back checked (`from_dict`), like every
document graph-harness reads: a recording can come from another machine.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, get_args

from graph_harness.capture.export.documents import Fields
from graph_harness.capture.export.nodes import NodeExport
from graph_harness.capture.record.sites import CaptureSite
from graph_harness.capture.record.verdict import GraphVerdict

if TYPE_CHECKING:  # the recorder's start-up imports no torch: capture/graph/capture.py does
    from graph_harness.capture.graph.capture import CaptureErrorMode

KEY_SOURCES = ("engine", "inductor", "shapes", "arguments", "order")
# captured: read whole; failed: the program's capture raised (its graph, where it could be
# read, is kept); unread: captured, but graph-harness could not read it (error says why)
CaptureStatus = Literal["captured", "failed", "unread"]
STATUSES: tuple[str, ...] = get_args(CaptureStatus)
RELEASES = ("reset", "collected")

_KEYS = (
    "index", "pid", "rank", "key", "key_source", "key_note", "inductor", "site", "device",
    "stream", "capture_mode", "pool", "pool_reserved", "pool_allocated", "pool_segments",
    "keep_graph", "status", "error", "export", "capture_s", "record_s", "at_s", "replays",
    "released",
)  # fmt: skip
# check: written by record --check only; reads: where the region's reads were looked at
_OPTIONAL = ("check", "reads")


@dataclass(kw_only=True, eq=False)
class GraphRecord:
    """A graph the program captured (see the module's notes). `export` is None only for
    a failed capture whose graph could not be read; `replays` counts its replays from
    capture to the end of the recording (or the process's last flush: the recording says
    whether each process exited cleanly)."""

    index: int  # capture order in its process, from 0 (failed captures included)
    pid: int
    rank: int | None  # the process's rank in torch.distributed (or $RANK), where it has one
    key: str  # what tells it from its siblings (capture/record/sites.py)
    key_source: str  # one of KEY_SOURCES
    key_note: str | None = None  # what a key adapter did wrong, if it did
    # what the captured region read and never wrote, `[8] int64` (capture/record/reads.py);
    # None: not looked at (an engine's or Inductor's key named it)
    reads: list[str] | None = None
    inductor: dict[str, Any] | None = None  # where Inductor's cudagraph tree recorded it
    site: CaptureSite
    device: int | None = None
    stream: int | None = None  # the capture stream's handle
    capture_mode: CaptureErrorMode | None = None
    pool: tuple[int, int] | None = None  # the memory pool's id (shared pools share it)
    pool_reserved: int | None = None  # the pool's bytes just after this capture
    pool_allocated: int | None = None
    pool_segments: int | None = None
    keep_graph: bool | None = None  # the program's own keep_graph setting
    status: CaptureStatus = "captured"
    error: str | None = None  # why the capture failed
    export: NodeExport | None = None
    capture_s: float = 0.0  # capture_begin to capture_end, the recorder's own time included
    record_s: float = 0.0  # the recorder's own time in this capture
    at_s: float = 0.0  # when capture began, in seconds since the process's recording began
    replays: int = 0
    released: str | None = None  # one of RELEASES, or None: alive at the end
    check: GraphVerdict | None = None  # record --check's verdict on it (None: not asked for)
    live: Any = None  # record --check's checked replays, in the process that captured it

    @property
    def nodes(self) -> int:
        """The graph's nodes (launching ones: the figure every table counts); 0 failed."""
        return self.export.total if self.export is not None else 0

    @property
    def captured(self) -> bool:
        """Whether the program's capture succeeded (read or not)."""
        return self.status != "failed"

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "pid": self.pid,
            "rank": self.rank,
            "key": self.key,
            "key_source": self.key_source,
            "key_note": self.key_note,
            "inductor": self.inductor,
            "site": self.site.to_dict(),
            "device": self.device,
            "stream": self.stream,
            "capture_mode": self.capture_mode,
            "pool": None if self.pool is None else list(self.pool),
            "pool_reserved": self.pool_reserved,
            "pool_allocated": self.pool_allocated,
            "pool_segments": self.pool_segments,
            "keep_graph": self.keep_graph,
            "status": self.status,
            "error": self.error,
            "export": None if self.export is None else self.export.to_dict(),
            "capture_s": self.capture_s,
            "record_s": self.record_s,
            "at_s": self.at_s,
            "replays": self.replays,
            "released": self.released,
            **({} if self.reads is None else {"reads": list(self.reads)}),
            **({} if self.check is None else {"check": self.check.to_dict()}),
        }

    @classmethod
    def from_dict(
        cls,
        doc: Any,
        f: Fields,
        path: str,
        export_of: Callable[[Any], NodeExport | None] | None = None,
    ) -> GraphRecord:
        """A record read back, every field checked (ExportError naming `path`).
        `export_of`: reads the `export` field (a recording's file name); default: the
        export itself, inline."""
        f.obj(path, doc)
        f.keys(path, doc, _KEYS, _OPTIONAL)
        p = path + "."
        site, stack = _site(f, p, doc["site"])
        pool = _pool(f, p, doc["pool"])
        inductor = _inductor(f, p, doc["inductor"])
        keep = doc["keep_graph"]
        if keep is not None and not isinstance(keep, bool):
            f.expected(p + "keep_graph", "a bool or null", keep)
        export = _export(f, path, doc["export"], export_of)
        status = f.string(p + "status", doc["status"], choices=STATUSES)
        if export is None and status == "captured":
            f.expected(p + "export", "the graph's node export (it was captured)", export)
        for k in ("capture_s", "record_s", "at_s"):
            if f.number(p + k, doc[k], finite=True) < 0:
                f.expected(p + k, "a number >= 0", doc[k])
        return cls(
            index=f.integer(p + "index", doc["index"], lo=0),
            pid=f.integer(p + "pid", doc["pid"], lo=0),
            rank=f.integer(p + "rank", doc["rank"], lo=0, none=True),
            key=f.string(p + "key", doc["key"]),
            key_source=f.string(p + "key_source", doc["key_source"], choices=KEY_SOURCES),
            key_note=f.string(p + "key_note", doc["key_note"], none=True),
            reads=_reads(f, p, doc.get("reads")),
            inductor=inductor,
            site=CaptureSite(
                user=f.string(p + "site.user", site["user"], none=True),
                library=f.string(p + "site.library", site["library"], none=True),
                stack=tuple(stack),
            ),
            device=f.integer(p + "device", doc["device"], lo=0, none=True),
            stream=f.integer(p + "stream", doc["stream"], lo=0, none=True),
            capture_mode=f.string(p + "capture_mode", doc["capture_mode"], none=True),
            pool=None if pool is None else (pool[0], pool[1]),
            pool_reserved=f.integer(p + "pool_reserved", doc["pool_reserved"], lo=0, none=True),
            pool_allocated=f.integer(p + "pool_allocated", doc["pool_allocated"], lo=0, none=True),
            pool_segments=f.integer(p + "pool_segments", doc["pool_segments"], lo=0, none=True),
            keep_graph=keep,
            status=status,
            error=f.string(p + "error", doc["error"], none=True),
            export=export,
            capture_s=doc["capture_s"],
            record_s=doc["record_s"],
            at_s=doc["at_s"],
            replays=f.integer(p + "replays", doc["replays"], lo=0),
            released=f.string(p + "released", doc["released"], none=True, choices=RELEASES),
            check=None
            if doc.get("check") is None
            else GraphVerdict.from_dict(doc["check"], f, p + "check"),
        )


def _site(f: Fields, p: str, site: Any) -> tuple[dict[str, Any], list[str]]:
    """The capture site's object checked, and its stack's lines (its other fields are
    read where the record is made)."""
    site = f.obj(p + "site", site)
    f.keys(p + "site", site, ("user", "library", "stack"))
    stack = f.array(p + "site.stack", site["stack"])
    for j, s in enumerate(stack):
        f.string(f"{p}site.stack[{j}]", s)
    return site, stack


def _reads(f: Fields, p: str, reads: Any) -> list[str] | None:
    """What the region read checked: null (or absent), or a list of shapes."""
    if reads is None:
        return None
    return [f.string(f"{p}reads[{j}]", r) for j, r in enumerate(f.array(p + "reads", reads))]


def _pool(f: Fields, p: str, pool: Any) -> list[int] | None:
    """The graph's memory pool checked: null, or its two ids."""
    if pool is not None:
        f.array(p + "pool", pool)
        if len(pool) != 2:
            f.expected(p + "pool", "null or a list of 2 ints", pool)
        for j, x in enumerate(pool):
            f.integer(f"{p}pool[{j}]", x, lo=0)
    return pool


def _inductor(f: Fields, p: str, inductor: Any) -> dict[str, Any] | None:
    """What Inductor said of the graph checked: null, or its compile, function, graph and
    ints."""
    inductor = f.obj(p + "inductor", inductor, none=True)
    if inductor is not None:
        f.keys(p + "inductor", inductor, ("compile_id", "function", "graph", "ints"))
        f.string(p + "inductor.compile_id", inductor["compile_id"], none=True)
        f.integer(p + "inductor.function", inductor["function"], none=True)
        f.integer(p + "inductor.graph", inductor["graph"], none=True)
        for j, x in enumerate(f.array(p + "inductor.ints", inductor["ints"])):
            f.integer(f"{p}inductor.ints[{j}]", x)
    return inductor


def _export(
    f: Fields, path: str, raw: Any, export_of: Callable[[Any], NodeExport | None] | None
) -> NodeExport | None:
    """The graph's node export read back: inline, or through `export_of`."""
    if export_of is None:
        where = f"{f.where} {path}"
        return None if raw is None else NodeExport.from_dict(raw, where=where)
    return export_of(raw)
