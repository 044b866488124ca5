"""One process's session file (capture/record/process.py writes it) read into a recording:
the process, its graphs, and what became of each (replays, release, check verdict)."""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graph_harness.capture.export.documents import ExportError, Fields, made_printable
from graph_harness.capture.record.graphs import GraphRecord
from graph_harness.capture.record.verdict import GraphVerdict
from graph_harness.capture.text import printable

SAID = 5  # lines of a file that are not JSON, each named; the rest counted

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
    out and said. A link or a pipe the program made there is left out: a FIFO would block
    the read for good (a folder fails to read, with its reason, to the caller)."""
    if not _plain_or_folder(path):
        rec.notes.append(
            f"{printable(path.name)} is not a file the recorder wrote (a link or a pipe the "
            "program made there); left out"
        )
        return
    f = Fields(path.name)
    got = _read_lines(path, f, rec)
    info = got.info
    if info is None:
        return
    counts = got.counts if got.counts is not None else _flushed_counts(path)
    for g in got.graphs:
        c = (counts or {}).get(str(g.index))
        if isinstance(c, dict):
            _what_became(g, c, f, rec)
    rec.processes.append(info)
    rec.graphs.extend(got.graphs)


def _read_lines(path: Path, f: Fields, rec: Recording) -> _Lines:
    """The file's lines taken in order; what could not be, said in `rec`'s notes."""
    lines = path.read_bytes().split(b"\n")
    partial = lines.pop() if lines and lines[-1] else b""
    got = _Lines()
    bad = 0  # lines that are not JSON: the first SAID named
    for n, raw in enumerate(lines):
        if not raw:
            continue
        try:
            line = _parsed(raw)
        except (ValueError, RecursionError):  # nested past the parser's depth: not ours
            bad += 1
            if bad <= SAID:
                rec.notes.append(f"{path.name}: line {n + 1} is not JSON; left out")
            continue
        try:
            got.take(line, f, f"line {n + 1}")
        except (ExportError, KeyError, TypeError, ValueError) as e:
            rec.notes.append(f"{path.name}: line {n + 1} could not be read ({e}); left out")
    if bad > SAID:
        rec.notes.append(f"{path.name}: {bad - SAID} more lines are not JSON; left out")
    if partial:
        rec.notes.append(
            f"{path.name}: its last line was cut off (the process ended while writing it); left out"
        )
    return got


def _plain_or_folder(path: Path) -> bool:
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return True  # the read says why
    return stat.S_ISREG(mode) or stat.S_ISDIR(mode)


@dataclass
class _Lines:
    """What a process's lines said so far: the process, its graphs, and the replay
    counts its exit line gave."""

    info: ProcessInfo | None = None
    graphs: list[GraphRecord] = field(default_factory=list)
    counts: dict | None = None

    def take(self, line: Any, f: Fields, where: str) -> None:
        """One line's event taken in (ExportError, KeyError, TypeError or ValueError: it
        could not be read)."""
        event = line.get("event") if isinstance(line, dict) else None
        if event == "process":
            self.info = ProcessInfo(
                pid=int(line["pid"]),
                ppid=line.get("ppid"),
                argv=[printable(str(a)) for a in line.get("argv", [])],
                forked=bool(line.get("forked", False)),
                notes=list(line.get("notes", [])),
            )
        elif event == "graph":
            self.graphs.append(GraphRecord.from_dict(line["record"], f, where))
        elif event == "exit":
            self.counts = line.get("replays")
            if self.info is not None:
                self.info.exited = True
                self.info.notes += [x for x in line.get("notes", []) if x not in self.info.notes]
        elif event == "failed":
            self.info = ProcessInfo(
                pid=int(line.get("pid", 0)),
                argv=[printable(str(a)) for a in line.get("argv", [])],
                failed=printable(str(line.get("why"))),
            )


def _flushed_counts(path: Path) -> dict | None:
    """The replay counts of the process's last flush (its .replays.json), for a process
    whose exit line gave none; None where there is none to read."""
    snapshot = path.with_suffix(".replays.json")
    try:
        return json.loads(snapshot.read_text()) if snapshot.exists() else None
    except (OSError, ValueError):
        return None


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
