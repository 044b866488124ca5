"""One process's session file (capture/record/process.py writes it) read into a recording:
the process, its graphs, and what became of each (replays, release, check verdict)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graph_harness.capture.export.documents import ExportError, Fields, made_printable
from graph_harness.capture.record.graphs import GraphRecord
from graph_harness.capture.record.verdict import GraphVerdict
from graph_harness.capture.text import printable

if TYPE_CHECKING:
    from graph_harness.capture.record.recording import Recording


@dataclass(kw_only=True)
class ProcessInfo:
    """One process of the program that imported torch with the recorder loaded."""

    pid: int
    ppid: int | None = None
    argv: list[str] = field(default_factory=list)
    forked: bool = False
    exited: bool = False  # its exit handlers ran: its replay counts are final
    failed: str | None = None  # why the recorder could not start in it
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "ppid": self.ppid,
            "argv": self.argv,
            "forked": self.forked,
            "exited": self.exited,
            "failed": self.failed,
            "notes": self.notes,
        }


def read_process(path: Path, rec: Recording) -> None:
    """One process's file into `rec` (its graphs with the replay counts of its exit line,
    else of its last flush); a partial last line (a process killed mid-write) is left
    out and said."""
    lines = path.read_bytes().split(b"\n")
    partial = lines.pop() if lines and lines[-1] else b""
    info: ProcessInfo | None = None
    graphs: list[GraphRecord] = []
    counts: dict | None = None
    f = Fields(path.name)
    for n, raw in enumerate(lines):
        if not raw:
            continue
        try:
            line = _parsed(raw)
        except ValueError:
            rec.notes.append(f"{path.name}: line {n + 1} is not JSON; left out")
            continue
        event = line.get("event") if isinstance(line, dict) else None
        try:
            if event == "process":
                info = ProcessInfo(
                    pid=int(line["pid"]),
                    ppid=line.get("ppid"),
                    argv=[printable(str(a)) for a in line.get("argv", [])],
                    forked=bool(line.get("forked", False)),
                    notes=list(line.get("notes", [])),
                )
            elif event == "graph":
                graphs.append(GraphRecord.from_dict(line["record"], f, f"line {n + 1}"))
            elif event == "exit":
                counts = line.get("replays")
                if info is not None:
                    info.exited = True
                    info.notes += [x for x in line.get("notes", []) if x not in info.notes]
            elif event == "failed":
                info = ProcessInfo(
                    pid=int(line.get("pid", 0)),
                    argv=[printable(str(a)) for a in line.get("argv", [])],
                    failed=printable(str(line.get("why"))),
                )
        except (ExportError, KeyError, TypeError, ValueError) as e:
            rec.notes.append(f"{path.name}: line {n + 1} could not be read ({e}); left out")
    if partial:
        rec.notes.append(
            f"{path.name}: its last line was cut off (the process ended while writing it); left out"
        )
    if info is None:
        return
    if counts is None:
        snapshot = path.with_suffix(".replays.json")
        try:
            counts = json.loads(snapshot.read_text()) if snapshot.exists() else None
        except (OSError, ValueError):
            counts = None
    for g in graphs:
        c = (counts or {}).get(str(g.index))
        if isinstance(c, dict):
            _what_became(g, c, f, rec)
    rec.processes.append(info)
    rec.graphs.extend(graphs)


def _parsed(raw: bytes) -> Any:
    """One line's JSON, every string in it printable (capture/text.py)."""
    text = raw.decode("utf-8", "replace")
    return made_printable(json.loads(text), text)


def _what_became(g: GraphRecord, c: dict, f: Fields, rec: Recording) -> None:
    """A graph's replays, release and check verdict, as its process last wrote them."""
    r = c.get("replays")
    if isinstance(r, int) and not isinstance(r, bool) and r >= 0:
        g.replays = r
    if c.get("released") in ("reset", "collected"):
        g.released = c["released"]
    if isinstance(c.get("check"), dict):
        try:
            g.check = GraphVerdict.from_dict(c["check"], f, f"graph {g.index}'s check")
        except ExportError as e:
            rec.notes.append(f"{f.where}: a check verdict could not be read ({e})")
