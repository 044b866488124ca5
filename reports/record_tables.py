"""Tables of a recording (capture/record/recording.py): what a program captured, graph by
graph, and by module. Renders what the recording holds; never measures."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from rich.table import Table

from graph_harness.capture.record.recording import Recording
from graph_harness.capture.text import printable
from graph_harness.reports.text import plural

if TYPE_CHECKING:
    from typing import Any

    from graph_harness.capture.record.delta import RecordingDelta

MIB = 1 << 20


def headline(rec: Recording) -> str:
    """One line: graphs, nodes, processes, the program's exit and time."""
    captured = [g for g in rec.graphs if g.captured]
    failed = len(rec.graphs) - len(captured)
    procs = len({g.pid for g in rec.graphs}) or len(rec.processes)
    parts = [
        f"{plural(len(captured), 'graph')} captured ({plural(rec.total, 'node')})",
        f"in {plural(procs, 'process', 'processes')}",
    ]
    if failed:
        parts.append(f"{failed} failed")
    never = rec.never_replayed()
    if never:
        parts.append(f"{len(never)} never replayed")
    if rec.program is not None:
        parts.append(f"program exit {rec.exit_code}")
    if rec.wall_s is not None:
        parts.append(f"{rec.wall_s:.1f} s")
    return ", ".join(parts)


def _mib(b: int | None) -> str:
    return "-" if b is None else f"{b / MIB:.1f}"


def graphs_table(rec: Recording, *, top: int | None = 40) -> Table:
    """One row per graph, in process and capture order (the first `top`; None: all)."""
    t = Table(title="Graphs the program captured")
    t.add_column("process", no_wrap=True)
    t.add_column("#", justify="right")
    t.add_column("key", overflow="fold")
    t.add_column("from", no_wrap=True)
    t.add_column("nodes", justify="right")
    t.add_column("replays", justify="right")
    t.add_column("pool MiB", justify="right")
    t.add_column("site", overflow="fold")
    checked = rec.options.check
    if checked:
        t.add_column("check", overflow="fold")
    rows = list(zip(rec.graphs, rec.names()))
    for g, name in rows[:top] if top is not None else rows:
        status = "" if g.status == "captured" else f" ({g.status})"
        t.add_row(
            rec.process_label(g),
            str(g.index),
            name + status,
            g.key_source,
            str(g.nodes),
            str(g.replays),
            _mib(g.pool_reserved),
            g.site.label,
            *([_check_cell(g)] if checked else []),
        )
    if top is not None and len(rows) > top:
        t.caption = f"the first {top} of {len(rows)} graphs (--top, or --out for all)"
    return t


def _check_cell(g: Any) -> str:
    v = g.check
    if v is None:
        return "-" if g.captured else "not checked: the capture failed"
    if v.status == "unchecked" and not g.replays:
        return "never replayed"
    if v.status == "differs" and v.first is not None:
        return f"DIFFERS at replay {v.first.replay}: {v.first.tensor}"
    if v.status == "assert":
        return "DEVICE ASSERT"
    if v.status == "agrees":
        return f"agrees ({v.compared_count} compared)"
    return v.status


def check_lines(rec: Recording) -> list[str]:
    """record --check's verdicts in words: each failing graph's finding in full, the
    graphs not checked and why (one line per reason), and what to do."""
    if not rec.options.check:
        return []
    names = {id(g): n for g, n in zip(rec.graphs, rec.names())}
    out, unchecked = [], {}
    for g in rec.graphs:
        v = g.check
        label = f"{rec.process_label(g)} {names[id(g)]}"
        if v is None or not g.replays:
            continue
        if v.status in ("differs", "assert", "not verified"):
            out.append(f"{v.status.upper()}: {label}: {v.line()}")
            if v.first is not None and v.first.node:
                out.append(f"  {v.first.tensor}: {v.first.node}")
            out += [f"  also {d.tensor}: {d.detail}" for d in v.differences[1:4]]
        elif v.status in ("not checked", "skipped"):
            unchecked.setdefault((v.status, v.reason or "no reason given"), []).append(label)
        elif v.reason:
            out.append(f"{label}: {v.line()} ({v.reason})")
    for (status, why), labels in unchecked.items():
        shown = ", ".join(labels[:4]) + (f" and {len(labels) - 4} more" if len(labels) > 4 else "")
        out.append(f"{status} ({plural(len(labels), 'graph')}: {shown}): {why}")
    agree = [g for g in rec.graphs if g.check is not None and g.check.status == "agrees"]
    if agree:
        n = sum(g.check.compared_count for g in agree)
        out.append(f"agree: {plural(len(agree), 'graph')} over {plural(n, 'compared replay')}")
    return out


def recaptured_lines(rec: Recording, *, most: int = 4) -> list[str]:
    """The captures one process made under one key (two shapes read alike, an engine that
    re-captures a key as a shape changes): which captures share which key, by their
    capture order (the table's `#`), told apart in the tables as `KEY #1`, `KEY #2`."""
    groups = rec.shared_keys()
    if not groups:
        return []
    shown = "; ".join(_shared(rec, gs) for gs in groups[:most])
    more = f"; and {len(groups) - most} more keys" if len(groups) > most else ""
    hint = ""
    if any(gs[0].key_source != "engine" for gs in groups):
        hint = " (a key adapter, `record --key`, names them by the engine's own key)"
    return [f"captures under one key: {shown}{more}{hint}"]


def _shared(rec: Recording, gs: list) -> str:
    """`main #3 and #5 share 'reads [8] int64'`; past two, how many (the first 6 named)."""
    marks = [f"#{g.index}" for g in gs[:6]]
    if len(gs) > 6:
        marks.append(f"{len(gs) - 6} more")
    which = ", ".join(marks[:-1]) + " and " + marks[-1]
    count = f" ({len(gs)} captures)" if len(gs) > 2 else ""
    return f"{rec.process_label(gs[0])} {which}{count} share {gs[0].key!r}"


def never_replayed_lines(rec: Recording, *, most: int = 8) -> list[str]:
    """The graphs captured and never replayed, by name (the first `most`)."""
    never = rec.never_replayed()
    if not never:
        return []
    names = {id(g): n for g, n in zip(rec.graphs, rec.names())}
    shown = ", ".join(f"{rec.process_label(g)} {names[id(g)]}" for g in never[:most])
    more = f" and {len(never) - most} more" if len(never) > most else ""
    nodes = sum(g.nodes for g in never)
    return [
        f"captured, never replayed: {plural(len(never), 'graph')} ({plural(nodes, 'node')}): "
        f"{shown}{more}"
    ]


def most_replayed_lines(rec: Recording, *, most: int = 3) -> list[str]:
    ranked = sorted(
        (g for g in rec.graphs if g.replays), key=lambda g: (-g.replays * max(g.nodes, 1), g.index)
    )
    if not ranked:
        return ["no graph was replayed"]
    names = {id(g): n for g, n in zip(rec.graphs, rec.names())}
    shown = "; ".join(
        f"{rec.process_label(g)} {names[id(g)]}: {g.replays} x {g.nodes} nodes"
        for g in ranked[:most]
    )
    return [f"most node launches: {shown}"]


def modules_table(rec: Recording, depth: int | None, *, top: int = 30) -> Table:
    """Per module (cut to `depth`) over every graph: nodes, and launches (x replays)."""
    df = rec.by_module(depth)
    t = Table(title="By module, over every graph" + (f" (depth {depth})" if depth else ""))
    t.add_column("scope", overflow="fold")
    t.add_column("graphs", justify="right")
    t.add_column("nodes", justify="right")
    t.add_column("node launches", justify="right")
    for r in df.head(top).itertuples():
        t.add_row(str(r.scope), str(r.graphs), str(r.nodes), str(r.launches))
    if len(df) > top:
        t.caption = f"the {top} scopes with the most launches of {len(df)}"
    return t


def program_line(program: list[str]) -> str:
    """The program as one line: its arguments shell-quoted, a control character in one (a
    newline in a file's name) as its escape, never obeyed nor breaking the line."""
    return printable(shlex.join(program))


def _program_name(argv: list[str]) -> str:
    """What a process ran, in a word: its script's or module's name."""
    if not argv:
        return "?"
    head = argv[0]
    return head.rsplit("/", 2)[-2] + "/" + head.rsplit("/", 1)[-1] if "/" in head else head


def process_lines(rec: Recording) -> list[str]:
    """What the recording says of its processes and itself: notes worth a reader's eye."""
    out = []
    capturing = {g.pid for g in rec.graphs}
    idle = [p for p in rec.processes if p.pid not in capturing and not p.failed]
    for p in rec.processes:
        if p.failed:
            out.append(f"pid {p.pid}: the recorder did not start: {p.failed}")
        elif p.pid in capturing and not p.exited:
            out.append(
                f"pid {p.pid} did not exit cleanly (killed, or os._exit): its replay counts "
                "are those of its last flush, a lower bound"
            )
        if p.pid in capturing:
            out += [f"pid {p.pid}: {n}" for n in p.notes]
    if idle and capturing:
        names = sorted({_program_name(p.argv) for p in idle})
        out.append(
            f"{plural(len(idle), 'other process', 'other processes')} imported torch and "
            f"captured no graph ({', '.join(names[:4])}{', ...' if len(names) > 4 else ''})"
        )
    notes = {g.key_note for g in rec.graphs if g.key_note}
    out += sorted(notes)
    out += rec.notes
    return out


def _n(v: Any) -> str:
    """A count cell: '-' where the side has none."""
    return "-" if v is None or str(v) == "<NA>" else str(int(v))


def _d(v: Any) -> str:
    return "-" if v is None or str(v) == "<NA>" else f"{int(v):+d}"


def recording_delta_tables(d: RecordingDelta, *, top: int = 40) -> list[Table]:
    """A RecordingDelta's tables: its graphs paired by name, its steps (with a step key),
    then every graph's nodes joined, by type, kernel family and kernel
    (reports/tables.py's delta tables of the total)."""
    a, b = d.a.label, d.b.label
    out = []
    if d.steps is not None:
        t = Table(title=f"{a} -> {b}: nodes per step (its graphs summed)")
        t.add_column("step", overflow="fold")
        for c in (f"{a} graphs", f"{a} nodes", f"{b} graphs", f"{b} nodes", "delta"):
            t.add_column(c, justify="right", no_wrap=True)
        t.add_column("most of it", overflow="fold")
        for r in d.steps.itertuples():
            t.add_row(
                r.step, _n(r.a_graphs), _n(r.a_nodes), _n(r.b_graphs), _n(r.b_nodes),
                _d(r.delta), r.family if isinstance(r.family, str) else "",
            )  # fmt: skip
        out.append(t)
    if d.steps is not None and not d.pairs:
        return [*out, *_total_tables(d)]  # no graph name on both sides: the steps say it
    t = Table(title=f"{a} -> {b}: graphs paired by name")
    t.add_column("graph", overflow="fold")
    for c in (f"{a} nodes", f"{b} nodes", "delta", f"{a} replays", f"{b} replays"):
        t.add_column(c, justify="right", no_wrap=True)
    t.add_column("most of it", overflow="fold")
    rows = list(d.graphs.itertuples())
    for r in rows[:top]:
        t.add_row(
            r.graph, _n(r.a_nodes), _n(r.b_nodes), _d(r.delta), _n(r.a_replays),
            _n(r.b_replays), r.family if isinstance(r.family, str) else "",
        )  # fmt: skip
    if len(rows) > top:
        t.add_row(f"... {len(rows) - top} more graphs (--json lists them all)", *[""] * 6)
    out.append(t)
    return [*out, *_total_tables(d)]


def _total_tables(d: RecordingDelta) -> list[Table]:
    from graph_harness.reports.tables import delta_tables

    out = delta_tables(d.total)
    for table in out:
        table.title = f"{table.title}, over every graph"
    return out
