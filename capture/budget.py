"""Node budgets: a step's nodes counted against a limit, in total and per scope, and the
budget file that records today's counts so a later change cannot bring nodes back unseen.

A budget name picks out a place in the scope tree, as the scope tables print it
(capture/rollup.py): `attention`, `layers.3`, `layers.3.attention`, `decode.sample`, the
built-in round's `stage0/pack`. It covers the nodes in that scope and in everything nested
under it: a node is counted when the label of any of its enclosing tree positions equals
the name. `*` stands for any run of characters within one part of a dotted name, `?` for
one character, so a name can cover several scopes at once: `layers.*.attention` (every
layer's attention), `stage*/pack` (the round's pack in every stage); their nodes are
summed, each node counted once. `unscoped` names the nodes outside every scope. A name
that covers no node is refused, with the nearest names that do occur: a scope that issued
no work leaves no trace in the capture, so it cannot be told from a typo.

The budget file (plain JSON, stable order, for review in a diff):

    {
      "schema": "graph-harness/node-budgets",
      "schema_version": 1,
      "budgets": {
        "tests/test_decode.py::test_decode": {        <- pytest node id, or a name given
          "cpu-dispatch": {                            <- one entry per source
            "total": 11,
            "scopes": {"attention": 4, "mlp": 2},      <- by name
            "torch": "2.13.0+cpu", "device": "cpu"     <- what recorded it (optional)
          }
        }
      }
    }

Counts of dispatched ops on the CPU and of graph nodes on a GPU differ, so each source
keeps its own entry, and a budget is only ever checked against one of its own source.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graph_harness.capture.documents import ExportError, Fields, load_json, show
from graph_harness.capture.export import SOURCES, NodeExport
from graph_harness.capture.files import OutputPathError, write_output
from graph_harness.capture.rollup import tree_parts
from graph_harness.capture.scopes import UNSCOPED

UPDATE_FLAG = "--update-node-budgets"  # the plugin's flag (graph_harness/pytest_plugin.py)
SCHEMA = "graph-harness/node-budgets"
SCHEMA_VERSION = 1
TOTAL = "(total)"  # the total's row in a check
TOP_SHOWN = 12  # top-level scopes listed when a name never occurs
ENTRY_KEYS = ("total", "scopes")
ENTRY_OPTIONAL = ("torch", "device")


class BudgetError(ValueError):
    """A budget that cannot be checked: a name that never occurs, arguments that do not
    combine, a record missing its entry. The message says what to do."""


class BudgetFileError(BudgetError, ExportError):
    """A budget file that cannot be read; the message names the file and the field."""


class NodeBudgetExceeded(AssertionError):
    """More nodes than the budget allows; `check` has every line, the message the table."""

    def __init__(self, message: str, check: BudgetCheck) -> None:
        super().__init__(message)
        self.check = check


# ---------------------------------------------------------------------------- matching


def check_name(name: object) -> str:
    """A budget name, or BudgetError saying why it cannot be one."""
    if not isinstance(name, str):
        raise BudgetError(f"a scope name is a str, got {show(name)}")
    if not name or any(not part for part in name.split(".")) or name != name.strip():
        raise BudgetError(
            f"scope name {show(name)} is not a scope label (dotted parts, none empty, "
            "no surrounding spaces)"
        )
    return name


def _pattern(name: str) -> re.Pattern[str]:
    # `*` and `?` never cross a `.`: one part of a qualified name each.
    out = []
    for ch in name:
        out.append("[^.]*" if ch == "*" else "[^.]" if ch == "?" else re.escape(ch))
    return re.compile("".join(out))


def _labels(parts: tuple[str, ...]) -> list[str]:
    """The labels of a tree position and every position above it, outermost first."""
    return [".".join(parts[:d]) for d in range(1, len(parts) + 1)] or [UNSCOPED]


@dataclass(frozen=True)
class Line:
    """One budget checked: `nodes` under `name`, against `budget` (None: no limit, the
    total's line when only scopes have budgets). `kernels`: what the nodes are (kernel
    name, or the node type where there is none), most frequent first. `scopes`: how many
    scopes the name covered (more than one for a pattern)."""

    name: str
    budget: int | None
    nodes: int
    kernels: tuple[tuple[str, int], ...]
    scopes: int = 1

    @property
    def diff(self) -> int | None:
        return None if self.budget is None else self.nodes - self.budget

    @property
    def exceeded(self) -> bool:
        return self.budget is not None and self.nodes > self.budget


@dataclass(frozen=True)
class BudgetCheck:
    """Every budget of one call checked against one export."""

    workload: str
    source: str
    total: Line
    scopes: tuple[Line, ...]
    origin: str = "inline"  # where the budgets came from: "inline" or the record's place
    recorded: dict[str, str] = field(default_factory=dict)  # the record's torch and device

    @property
    def exceeded(self) -> list[Line]:
        return [line for line in (*self.scopes, self.total) if line.exceeded]

    @property
    def ok(self) -> bool:
        return not self.exceeded

    @property
    def slack(self) -> list[Line]:
        """Lines under their budget: room to tighten it."""
        return [ln for ln in (*self.scopes, self.total) if ln.diff is not None and ln.diff < 0]


class _Nodes:
    """An export's launching nodes, by tree position, for matching names."""

    def __init__(self, export: NodeExport) -> None:
        df = export.frame()
        keys = df["kernel"].where(df["kernel"].fillna("") != "", df["type"])
        self.rows = list(zip(df["scope_path"].map(lambda p: tuple(tree_parts(p))), keys))
        self.positions = sorted({p for p, _ in self.rows})
        self.labels = sorted({lab for p in self.positions for lab in _labels(p)})

    def line(self, name: str, budget: int | None) -> Line | None:
        """The nodes `name` covers (None: it covers none)."""
        pat = _pattern(check_name(name))
        covered: dict[tuple[str, ...], str] = {}  # position -> its shallowest matching label
        for p in self.positions:
            hit = next((lab for lab in _labels(p) if pat.fullmatch(lab)), None)
            if hit is not None:
                covered[p] = hit
        if not covered:
            return None
        kernels = Counter(k for p, k in self.rows if p in covered)
        ranked = tuple(sorted(kernels.items(), key=lambda kv: (-kv[1], kv[0])))
        return Line(name, budget, sum(kernels.values()), ranked, len(set(covered.values())))

    def total(self, budget: int | None) -> Line:
        kernels = Counter(k for _, k in self.rows)
        ranked = tuple(sorted(kernels.items(), key=lambda kv: (-kv[1], kv[0])))
        return Line(TOTAL, budget, len(self.rows), ranked)

    def top_level(self) -> list[str]:
        return sorted({_labels(p)[0] for p in self.positions})

    def unknown(self, names: list[str], workload: str) -> BudgetError:
        lines = [f"{show(n)}: {self.nearest(n) or 'no scope with a similar name'}" for n in names]
        tops = sorted(self.top_level(), key=_natural)
        top = ", ".join(tops[:TOP_SHOWN]) + (
            f", ... {len(tops) - TOP_SHOWN} more" if len(tops) > TOP_SHOWN else ""
        )
        what = "scope name" if len(names) == 1 else "scope names"
        return BudgetError(
            f"{what} never {'occurs' if len(names) == 1 else 'occur'} in {workload} (no node "
            f"is in a scope of that name): {'; '.join(lines)}. Top-level scopes: {top}. A "
            "name is a scope's label as the scope table prints it (layers.3.attention), "
            "'*' matching within one dotted part (layers.*.attention, stage*/pack)"
        )

    def nearest(self, name: str) -> str:
        """Names that occur and that `name` may have meant: patterns of the scopes whose
        last part it is (`attention` -> `layers.*.attention`), then close spellings."""
        general = sorted({_generalize(lab) for lab in self.labels})
        by_end = [g for g in general if re.split(r"[./]", g)[-1] == name and g != name]
        close = difflib.get_close_matches(name, self.labels + general, n=3, cutoff=0.6)
        picks = list(dict.fromkeys(by_end[:3] + close))[:4]
        return "did you mean " + " or ".join(map(show, picks)) if picks else ""


def _natural(label: str) -> list:
    """Numbers in numeric order: stage2/pack before stage10/pack, layers.2 before layers.10."""
    return [(0, int(x), "") if x.isdigit() else (1, 0, x) for x in re.split(r"(\d+)", label)]


def _generalize(label: str) -> str:
    """A label with its numbered parts as `*`: layers.3.attention -> layers.*.attention,
    stage0/pack -> stage*/pack."""
    parts = ["*" if p.isdigit() else re.sub(r"^stage\d+/", "stage*/", p) for p in label.split(".")]
    return ".".join(parts)


def check_budget(
    export: NodeExport,
    *,
    total: int | None = None,
    per_scope: Mapping[str, int] | None = None,
    origin: str = "inline",
    recorded: dict[str, str] | None = None,
) -> BudgetCheck:
    """Count `export`'s nodes in total and under each named scope, against the budgets.
    Names that cover no node raise BudgetError (all of them, with the nearest names)."""
    if total is not None:
        _budget_value("total", total)
    per_scope = dict(per_scope or {})
    for name, n in per_scope.items():
        _budget_value(f"per_scope[{show(check_name(name))}]", n)
    nodes = _Nodes(export)
    lines = {name: nodes.line(name, n) for name, n in per_scope.items()}
    missing = [name for name, line in lines.items() if line is None]
    if missing:
        raise nodes.unknown(missing, export.workload)
    return BudgetCheck(
        workload=export.workload,
        source=export.source,
        total=nodes.total(total),
        scopes=tuple(lines.values()),
        origin=origin,
        recorded=dict(recorded or {}),
    )


def _budget_value(what: str, n: object) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise BudgetError(f"{what}: a budget is an int >= 0 (nodes), got {show(n)}")
    return n


def counts(export: NodeExport, names: Iterable[str] | None = None) -> dict[str, int]:
    """Today's count under each name (default: each top-level scope, and `unscoped` when
    some nodes are outside every scope); BudgetError for names that cover no node."""
    nodes = _Nodes(export)
    names = nodes.top_level() if names is None else [check_name(n) for n in names]
    lines = {name: nodes.line(name, None) for name in names}
    missing = [name for name, line in lines.items() if line is None]
    if missing:
        raise nodes.unknown(missing, export.workload)
    return {name: line.nodes for name, line in lines.items()}


# -------------------------------------------------------------------------- the file


@dataclass(frozen=True)
class Entry:
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


def read_budgets(path: str | Path) -> dict[str, dict[str, Entry]]:
    """Read and check a budget file: key -> source -> Entry. BudgetFileError naming the
    file and the field for anything wrong."""
    doc = load_json(path, "node budgets", BudgetFileError)
    f = Fields(str(path), BudgetFileError)
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        got = show(doc.get("schema")) if isinstance(doc, dict) else show(doc)
        f.fail("", f"not a graph-harness node budget file (schema {got}, expected {SCHEMA!r})")
    version = doc.get("schema_version")
    if type(version) is not int or version != SCHEMA_VERSION:
        f.fail(
            "schema_version",
            f"{show(version)} is not one this graph-harness reads ({SCHEMA_VERSION}); "
            "re-record it with --update-node-budgets",
        )
    f.keys("", doc, ("schema", "schema_version", "budgets"))
    out: dict[str, dict[str, Entry]] = {}
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
            out[key][source] = Entry(total, dict(scopes), e.get("torch"), e.get("device"))
    return out


def render_budgets(budgets: Mapping[str, Mapping[str, Entry]]) -> str:
    """The file's text: keys and sources in sorted order, so a diff shows only what changed."""
    doc = {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "budgets": {k: {s: v[s].as_dict() for s in sorted(v)} for k, v in sorted(budgets.items())},
    }
    return json.dumps(doc, indent=2, allow_nan=False) + "\n"


def lookup(path: str | Path, key: str, source: str, *, shown: str | None = None) -> Entry:
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


def record(path: str | Path, key: str, export: NodeExport, names: Iterable[str] | None) -> Entry:
    """Write today's counts of `export` as the budget for `key` (its own source's entry),
    keeping every other entry of the file. Read, change and write happen under a lock on
    the file's folder (parallel test workers recording into one file lose nothing); the
    file is written beside and renamed in (capture/files.py), through a link if it is one.
    A file that cannot be read is refused, never overwritten."""
    entry = Entry(
        total=export.total,
        scopes=counts(export, names),
        torch=export.env.get("torch"),
        device=export.env.get("device"),
    )
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
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
