"""A recording: every graph a program's processes captured, with its processes, as one
document (`recording.json`) and one node export per graph beside it
(`graph-<n>.json`, n its place in the recording, each readable by `delta` and `advise` as
any export).

Built from a session folder the processes wrote (capture/record/process.py), or from one
process's records in memory; read back checked, field by field, like every document.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graph_harness.capture.environment import now
from graph_harness.capture.export.documents import ExportError, Fields, load_json, show
from graph_harness.capture.export.kinds import RECORDING, RECORDING_DOCUMENT
from graph_harness.capture.export.kinds import RECORDING_SCHEMA_VERSION as SCHEMA_VERSION
from graph_harness.capture.export.nodes import NodeExport
from graph_harness.capture.export.recording_output import GRAPH_FILE
from graph_harness.capture.files import write_atomic
from graph_harness.capture.paths import os_reason
from graph_harness.capture.record.graphs import GraphRecord
from graph_harness.capture.record.process import RecordOptions
from graph_harness.capture.record.process_file import ProcessInfo, read_process
from graph_harness.capture.text import printable

if TYPE_CHECKING:
    import pandas as pd

SCHEMA = RECORDING
DOCUMENT = RECORDING_DOCUMENT


@dataclass(kw_only=True)
class Recording:
    """What a program captured: its `graphs` (GraphRecord, in process then capture
    order), its `processes`, how it was recorded (`options`), and what the program was
    (`program`, its arguments; None for a block of Python code) with its `exit_code`."""

    graphs: list[GraphRecord] = field(default_factory=list)
    processes: list[ProcessInfo] = field(default_factory=list)
    options: RecordOptions = field(default_factory=RecordOptions)
    program: list[str] | None = None
    exit_code: int | None = None
    wall_s: float | None = None  # the program's run, start to exit
    created: str = field(default_factory=now)
    notes: list[str] = field(default_factory=list)

    # --- what tables read -------------------------------------------------------------

    @property
    def total(self) -> int:
        return sum(g.nodes for g in self.graphs)

    def names(self) -> list[str]:
        """Each graph's name: its key, with ` #n` where one process captured several
        under one key (n: its place among them)."""
        seen: dict[tuple[int, str], int] = {}
        dup: dict[tuple[int, str], int] = {}
        for g in self.graphs:
            dup[(g.pid, g.key)] = dup.get((g.pid, g.key), 0) + 1
        out = []
        for g in self.graphs:
            k = (g.pid, g.key)
            seen[k] = seen.get(k, 0) + 1
            out.append(g.key if dup[k] == 1 else f"{g.key} #{seen[k]}")
        return out

    def shared_keys(self) -> list[list[GraphRecord]]:
        """The captures one process made under one key, each group (2 or more) in capture
        order: graphs the key does not tell apart (two shapes read alike, an engine that
        captured a key again), which names() numbers `KEY #1`, `KEY #2`."""
        groups: dict[tuple[int, str], list[GraphRecord]] = {}
        for g in self.graphs:
            groups.setdefault((g.pid, g.key), []).append(g)
        return [gs for gs in groups.values() if len(gs) > 1]

    def process_label(self, g: GraphRecord) -> str:
        """Where a graph was captured, as tables show it: `rank R` where ranks are known,
        else `pid P` (only one process: "main")."""
        pids = {x.pid for x in self.graphs}
        if g.rank is not None:
            return f"rank {g.rank}"
        return "main" if len(pids) == 1 else f"pid {g.pid}"

    def never_replayed(self) -> list[GraphRecord]:
        """Graphs captured (with nodes) and never replayed."""
        return [g for g in self.graphs if g.captured and g.replays == 0 and g.nodes > 0]

    def frame(self) -> pd.DataFrame:
        """Every graph's launching nodes in one frame, each row with its graph's `name`,
        `process` and `replays` (the export frames' columns otherwise)."""
        import pandas as pd

        from graph_harness.capture.attribution.node import COLUMNS

        parts = []
        for g, name in zip(self.graphs, self.names()):
            if g.export is None or not g.export.nodes:
                continue
            df = g.export.frame()
            df["name"], df["process"], df["replays"] = name, self.process_label(g), g.replays
            parts.append(df)
        if not parts:
            cols = [*COLUMNS, "name", "process", "replays"]
            return pd.DataFrame(columns=cols)
        return pd.concat(parts, ignore_index=True)

    def by_module(self, depth: int | None) -> pd.DataFrame:
        """Per scope cut to `depth` (capture/attribution/rollup.py: "unscoped" outside
        every module), over every graph: `graphs` holding nodes there, `nodes` (summed
        over graphs) and `launches` (nodes times their graph's replays: the node launches
        the program made), most launches first."""
        import pandas as pd

        from graph_harness.capture.attribution.rollup import at_depth

        df = self.frame()
        if df.empty:
            return pd.DataFrame(columns=["scope", "graphs", "nodes", "launches"])
        df["scope_at"] = at_depth(df, depth).to_numpy()
        out = df.groupby("scope_at").agg(
            graphs=("name", "nunique"), nodes=("type", "size"), launches=("replays", "sum")
        )
        out = out.reset_index().rename(columns={"scope_at": "scope"})
        return out.sort_values(["launches", "nodes", "scope"], ascending=[False, False, True])

    def files(self) -> list[str]:
        """Each graph's export file, by its place in the recording (a pid can come twice:
        a process that exec'd Python again, or a pid reused)."""
        return [f"graph-{i}.json" for i in range(len(self.graphs))]

    # --- the document -----------------------------------------------------------------

    def _options_doc(self) -> dict[str, Any]:
        """The options as the document holds them: those a later version added written only
        where not their default, so that a recording of the defaults reads in versions
        before (`check`'s with it, `read_names` where off)."""
        o = self.options
        out = {"module_scopes": o.module_scopes, "key": o.key, "pool_memory": o.pool_memory}
        if not o.read_names:
            out["read_names"] = False
        if o.check:
            out.update(check=True, eager=o.eager, check_sample=o.check_sample)
        return out

    def to_dict(self, *, inline: bool = False) -> dict[str, Any]:
        """The document; each graph's export as a file name (`inline`: the export)."""
        graphs = []
        shared = {id(g): gs for gs in self.shared_keys() for g in gs}
        for g, name, file in zip(self.graphs, self.names(), self.files()):
            d = g.to_dict()
            d["name"] = name
            d["total_nodes"] = g.nodes
            # the other captures of its process under its key (capture indices)
            d["shares_key_with"] = [x.index for x in shared.get(id(g), ()) if x is not g]
            if not inline:
                d["export"] = None if g.export is None else file
            graphs.append(d)
        return {
            "schema": SCHEMA,
            "schema_version": SCHEMA_VERSION,
            "program": self.program,
            "exit_code": self.exit_code,
            "wall_s": self.wall_s,
            "created": self.created,
            "options": self._options_doc(),
            "processes": [p.to_dict() for p in self.processes],
            "notes": self.notes,
            "graphs": graphs,
        }

    def write(self, folder: Path) -> None:
        """`recording.json` and `graph-<n>.json` into `folder` (which exists)."""
        for g, file in zip(self.graphs, self.files()):
            if g.export is not None:
                g.export.write_json(folder / file)
        text = json.dumps(self.to_dict(), indent=1, allow_nan=False) + "\n"
        write_atomic(folder / DOCUMENT, text)

    @classmethod
    def read(cls, path: str | Path) -> Recording:
        """A recording folder (or its recording.json) read back, every field and every
        graph's export checked; ExportError naming the file and the field."""
        path = Path(path)
        doc_path = path / DOCUMENT if path.is_dir() else path
        folder = doc_path.parent
        doc = load_json(doc_path, "recording")
        return cls.from_dict(doc, where=str(doc_path), folder=folder)

    @classmethod
    def from_dict(cls, doc: Any, *, where: str, folder: Path | None = None) -> Recording:
        f = Fields(where)
        if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
            got = show(doc.get("schema")) if isinstance(doc, dict) else show(doc)
            f.fail("", f"not a graph-harness recording (schema {got}, expected {SCHEMA!r})")
        if (
            doc.get("schema_version") != SCHEMA_VERSION
            or type(doc.get("schema_version")) is not int
        ):
            f.fail(
                "",
                f"recording schema version {show(doc.get('schema_version'))} is not one this "
                f"graph-harness reads ({SCHEMA_VERSION})",
            )
        keys = ("schema", "schema_version", "program", "exit_code", "wall_s", "created")
        f.keys("", doc, (*keys, "options", "processes", "notes", "graphs"))
        program = doc["program"]
        if program is not None:
            for j, a in enumerate(f.array("program", program)):
                f.string(f"program[{j}]", a)
        options = _read_options(f, doc["options"])
        processes = []
        for j, p in enumerate(f.array("processes", doc["processes"])):
            processes.append(_process(f, f"processes[{j}]", p))
        graphs = []
        for j, g in enumerate(f.array("graphs", doc["graphs"])):
            graphs.append(_graph(f, f"graphs[{j}]", g, folder))
        notes = [f.string(f"notes[{j}]", n) for j, n in enumerate(f.array("notes", doc["notes"]))]
        wall = doc["wall_s"]
        if wall is not None:
            f.number("wall_s", wall, finite=True)
        return cls(
            graphs=graphs,
            processes=processes,
            options=options,
            program=None if program is None else list(program),
            exit_code=f.integer("exit_code", doc["exit_code"], none=True),
            wall_s=wall,
            created=f.string("created", doc["created"]),
            notes=notes,
        )

    # --- built from what the processes wrote --------------------------------------------

    @classmethod
    def from_session(
        cls,
        session: Path,
        *,
        options: RecordOptions,
        program: list[str] | None = None,
        exit_code: int | None = None,
        wall_s: float | None = None,
        local: list[GraphRecord] | None = None,
        local_pid: int | None = None,
    ) -> Recording:
        """The recording of a session folder (capture/record/process.py's files), with
        this process's own records (`local`, captured by pid `local_pid`) first."""
        rec = cls(options=options, program=program, exit_code=exit_code, wall_s=wall_s)
        if local is not None:
            rec.processes.append(ProcessInfo(pid=local_pid or 0, exited=True))
            rec.graphs.extend(local)
        for path in sorted(session.glob("*.jsonl")):
            try:
                read_process(path, rec)
            except OSError as e:  # the program's own making (a folder), or unreadable
                rec.notes.append(
                    f"{printable(path.name)} could not be read ({os_reason(e)}); left out"
                )
        rec.graphs.sort(key=lambda g: (_order(rec, g.pid), g.index))
        return rec


def _order(rec: Recording, pid: int) -> int:
    for i, p in enumerate(rec.processes):
        if p.pid == pid:
            return i
    return len(rec.processes)


def _read_options(f: Fields, doc: Any) -> RecordOptions:
    """The recording's options, each checked (those a recording from before a flag lacks
    take the flag's default)."""
    opts = f.obj("options", doc)
    f.keys(
        "options",
        opts,
        ("module_scopes", "key", "pool_memory"),
        ("check", "eager", "check_sample", "read_names"),
    )
    for k, default in (("check", False), ("module_scopes", None), ("pool_memory", None),
                       ("read_names", True)):  # fmt: skip
        v = opts[k] if default is None else opts.get(k, default)
        if not isinstance(v, bool):
            f.expected(f"options.{k}", "a bool", v)
    return RecordOptions(
        module_scopes=opts["module_scopes"],
        key=f.string("options.key", opts["key"], none=True),
        pool_memory=opts["pool_memory"],
        read_names=opts.get("read_names", True),
        check=opts.get("check", False),
        eager=f.string("options.eager", opts.get("eager"), none=True),
        check_sample=f.string("options.check_sample", opts.get("check_sample", "8,2")),
    )


def _process(f: Fields, path: str, p: Any) -> ProcessInfo:
    f.obj(path, p)
    f.keys(path, p, ("pid", "ppid", "argv", "forked", "exited", "failed", "notes"))
    for k in ("forked", "exited"):
        if not isinstance(p[k], bool):
            f.expected(f"{path}.{k}", "a bool", p[k])
    return ProcessInfo(
        pid=f.integer(f"{path}.pid", p["pid"], lo=0),
        ppid=f.integer(f"{path}.ppid", p["ppid"], lo=0, none=True),
        argv=[
            f.string(f"{path}.argv[{j}]", a)
            for j, a in enumerate(f.array(f"{path}.argv", p["argv"]))
        ],
        forked=p["forked"],
        exited=p["exited"],
        failed=f.string(f"{path}.failed", p["failed"], none=True),
        notes=[
            f.string(f"{path}.notes[{j}]", a)
            for j, a in enumerate(f.array(f"{path}.notes", p["notes"]))
        ],
    )


def _graph(f: Fields, path: str, g: Any, folder: Path | None) -> GraphRecord:
    f.obj(path, g)
    g = dict(g)
    f.string(f"{path}.name", g.pop("name", None))
    total = f.integer(f"{path}.total_nodes", g.pop("total_nodes", None), lo=0)
    shared = g.pop("shares_key_with", [])  # derived (shared_keys()); absent before reads
    for j, x in enumerate(f.array(f"{path}.shares_key_with", shared)):
        f.integer(f"{path}.shares_key_with[{j}]", x, lo=0)

    def export_of(value: Any) -> NodeExport | None:
        if value is None:
            return None
        if isinstance(value, dict):  # inline, as `record --json` prints it
            return NodeExport.from_dict(value, where=f"{f.where}: {path}.export")
        if not isinstance(value, str) or not GRAPH_FILE.fullmatch(value):
            f.expected(f"{path}.export", "null, an export, or a file graph-<n>.json", value)
        if folder is None:
            f.fail(f"{path}.export", "names a file, but the recording was not read from a folder")
        try:
            return NodeExport.read_json(folder / value)
        except ExportError as e:
            raise ExportError(f"{f.where}: {path}.export: {e}") from None

    record = GraphRecord.from_dict(g, f, path, export_of)
    if record.nodes != total:
        f.expected(f"{path}.total_nodes", f"{record.nodes} (its export's nodes)", total)
    return record
