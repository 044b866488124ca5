"""The node budget file: today's counts recorded, so tests check against them
(the names and the check: capture/budget/limits.py).

Plain JSON, stable order, one entry per test and per source (CPU dispatch counts and GPU
graph counts differ; a budget is only checked against its own source). Version 1 files
are read with each plain pattern as its `sum(...)`. Recording rewrites only a file that
reads as a budget file, through capture/files.py; nothing is ever deleted. The format:
docs/budgets.md, "capture/budget/file.py".
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graph_harness.capture.budget.limits import (
    UPDATE_FLAG,
    BudgetError,
    check_name,
    counts,
    is_pattern,
    sum_key,
)
from graph_harness.capture.export.documents import ExportError, Fields, show
from graph_harness.capture.export.kinds import load_document
from graph_harness.capture.export.nodes import SOURCES, NodeExport
from graph_harness.capture.files import OutputPathError, write_output
from graph_harness.capture.paths import os_reason

SCHEMA = "graph-harness/node-budgets"
SCHEMA_VERSION = 2
READS = (1, 2)  # version 1: a plain pattern's budget was the sum (the module's docstring)
ENTRY_KEYS = ("total", "scopes")
ENTRY_OPTIONAL = ("torch", "device")


class BudgetFileError(BudgetError, ExportError):
    """A budget file that cannot be read; the message names the file and the field."""


@dataclass(frozen=True)
class BudgetEntry:
    """One recorded budget: the total and per-scope counts of one source."""

    total: int
    scopes: dict[str, int]
    torch: str | None = None
    device: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """In the file's order: the budgets first, scopes by name, then what recorded them."""
        d: dict[str, Any] = {"total": self.total, "scopes": dict(sorted(self.scopes.items()))}
        d.update(self.recorded)
        return d

    @property
    def recorded(self) -> dict[str, str]:
        return {k: v for k, v in (("torch", self.torch), ("device", self.device)) if v}


def read_budgets(path: str | Path) -> dict[str, dict[str, BudgetEntry]]:
    """Read and check a budget file: key -> source -> BudgetEntry. BudgetFileError naming the
    file and the field for anything wrong."""
    doc = load_document(path, "budgets", BudgetFileError)  # another kind: refused
    f = Fields(str(path), BudgetFileError)
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        got = show(doc.get("schema")) if isinstance(doc, dict) else show(doc)
        f.fail("", f"not a graph-harness node budget file (schema {got}, expected {SCHEMA!r})")
    version = doc.get("schema_version")
    if type(version) is not int or version not in READS:
        f.fail(
            "schema_version",
            f"{show(version)} is not one this graph-harness reads "
            f"({', '.join(map(str, READS))}); re-record it with --update-node-budgets",
        )
    f.keys("", doc, ("schema", "schema_version", "budgets"))
    out: dict[str, dict[str, BudgetEntry]] = {}
    for key, per_source in f.obj("budgets", doc["budgets"]).items():
        where = f"budgets[{show(key)}]"
        f.obj(where, per_source)
        if not per_source:
            f.expected(where, "an object with an entry per source (" + ", ".join(SOURCES) + ")", {})
        out[key] = {}
        for source, e in per_source.items():
            p = f"{where}.{source}"
            if source not in SOURCES:
                f.fail(where, f"unknown source {show(source)} (expected {', '.join(SOURCES)})")
            f.obj(p, e)
            f.keys(p, e, ENTRY_KEYS, ENTRY_OPTIONAL)
            total = f.integer(f"{p}.total", e["total"], lo=0)
            scopes = f.obj(f"{p}.scopes", e["scopes"])
            for name, n in scopes.items():
                try:
                    check_name(name)
                except BudgetError as err:
                    f.fail(f"{p}.scopes", str(err))
                f.integer(f"{p}.scopes[{show(name)}]", n, lo=0)
            for k in ENTRY_OPTIONAL:
                f.string(f"{p}.{k}", e.get(k), none=True)
            if version == 1:
                scopes = {_as_version_2(name): n for name, n in scopes.items()}
            out[key][source] = BudgetEntry(total, dict(scopes), e.get("torch"), e.get("device"))
    return out


def _as_version_2(name: str) -> str:
    """A version 1 name as it is spelled now: a pattern's budget was its matches' sum. (A
    scope's own label, `*` say, still names that scope alone inside `sum(...)`; and
    inside it, the name is matched as it was, even one spelled `sum(...)` itself.)"""
    return sum_key(name) if is_pattern(name) else name


def render_budgets(budgets: Mapping[str, Mapping[str, BudgetEntry]]) -> str:
    """The file's text: keys and sources in sorted order, so a diff shows only what changed."""
    doc = {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "budgets": {k: {s: v[s].as_dict() for s in sorted(v)} for k, v in sorted(budgets.items())},
    }
    return json.dumps(doc, indent=2, allow_nan=False) + "\n"


def lookup(path: str | Path, key: str, source: str, *, shown: str | None = None) -> BudgetEntry:
    """The entry recorded for `key` and `source`; BudgetError saying how to record it."""
    shown = shown or str(path)
    how = f"run pytest with {UPDATE_FLAG} to record today's counts"
    if not Path(path).exists():
        raise BudgetError(f"no node budget file {shown}: {how}")
    budgets = read_budgets(path)
    if key not in budgets:
        raise BudgetError(f"{shown} has no node budget for {show(key)}: {how}")
    if source not in budgets[key]:
        have = ", ".join(budgets[key])
        raise BudgetError(
            f"{shown} has no {source} node budget for {show(key)}, only {have}: counts of "
            f"another source are not comparable ({_SOURCE_WORDS[source]} now); {how} on "
            "this machine"
        )
    return budgets[key][source]


_SOURCE_WORDS = {
    "cuda-graph": "CUDA graph nodes",
    "cpu-dispatch": "ops dispatched on the CPU",
}


def record(
    path: str | Path, key: str, export: NodeExport, names: Iterable[str] | None
) -> BudgetEntry:
    """Write today's counts of `export` as the budget for `key` (its own source's entry),
    keeping every other entry of the file. Read, change and write happen under a lock on
    the file's folder (parallel test workers recording into one file lose nothing); the
    file is written beside and renamed in (capture/files.py), through a link if it is one.
    A file that cannot be read is refused, never overwritten."""
    entry = BudgetEntry(
        total=export.total,
        scopes=counts(export, names),
        torch=export.env.get("torch"),
        device=export.env.get("device"),
    )
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:  # a file where a folder of the path should be, no permission, ...
        raise BudgetError(
            f"cannot record node budgets in {path}: its folder {path.parent} cannot be made "
            f"({os_reason(e)}); give record= a path in a folder"
        ) from None
    with _locked(Path(os.path.realpath(path)).parent):
        budgets = read_budgets(path) if path.exists() else {}
        budgets.setdefault(key, {})[export.source] = entry
        try:
            write_output(path, render_budgets(budgets))
        except OutputPathError as e:  # a folder, a read-only file, ...
            raise BudgetError(f"cannot record node budgets: {e}") from None
    return entry


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """An exclusive lock on `folder` (flock on the folder itself: no lock file to leave
    behind). Where flock does not exist (Windows), no lock."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not on Linux or macOS
        yield
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock
