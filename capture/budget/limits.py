"""Node budgets: a step's nodes counted against a limit, in total and per scope, so a
later change cannot bring nodes back unseen.

A budget name picks out a place in the scope tree, as the scope tables print it
(capture/attribution/rollup.py): `attention`, `layers.3`, `layers.3.attention`, `decode.sample`, the
built-in round's `stage0/pack`. It covers the nodes in that scope and in everything nested
under it: a node is counted when the label of any of its enclosing tree positions equals
the name. `*` stands for any run of characters within one part of a dotted name, `?` for
one character, so a name can cover several scopes at once: `layers.*.attention` (every
layer's attention), `stage*/pack` (the round's pack in every stage); their nodes are
summed, each node counted once; a name that is some scope's own label names that scope
alone, wildcards or not (so a scope literally called `*` is recorded and checked by its
label). `unscoped` names the nodes outside every scope. A name
that covers no node is refused, with the nearest names that do occur: a scope that issued
no work leaves no trace in the capture, so it cannot be told from a typo.

The budget file that records them: capture/budget/file.py.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from graph_harness.capture.attribution.labels import generalize, natural
from graph_harness.capture.attribution.rollup import tree_parts
from graph_harness.capture.budget import UPDATE_FLAG as UPDATE_FLAG
from graph_harness.capture.errors import HarnessError, UsageError
from graph_harness.capture.export.documents import show
from graph_harness.capture.export.nodes import NodeExport
from graph_harness.capture.scopes.recorder import UNSCOPED
from graph_harness.capture.text import printable

TOTAL = "(total)"  # the total's row in a check
TOP_SHOWN = 12  # top-level scopes listed when a name never occurs


class BudgetError(UsageError, ValueError):
    """A budget that cannot be checked: a name that never occurs, arguments that do not
    combine, a record missing its entry. The message says what to do."""


class NodeBudgetExceeded(HarnessError, AssertionError):
    """More nodes than the budget allows; `check` has every line, the message the table."""

    def __init__(self, message: str, check: BudgetCheck) -> None:
        super().__init__(message)
        self.check = check


# ---------------------------------------------------------------------------- matching


def check_name(name: object) -> str:
    """A budget name as text (capture/text.py: as the scopes it names were recorded), or
    BudgetError saying why it cannot be one."""
    if not isinstance(name, str):
        raise BudgetError(f"a scope name is a str, got {show(name)}")
    if not name or any(not part for part in name.split(".")) or name != name.strip():
        raise BudgetError(
            f"scope name {show(name)} is not a scope label (dotted parts, none empty, "
            "no surrounding spaces)"
        )
    return printable(name)


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
        name = check_name(name)
        # A scope's own label names that scope, even one holding `*` or `?` (a scope
        # literally called `*`, recorded by its label, counts its own nodes only).
        matches = name.__eq__ if name in self.labels else _pattern(name).fullmatch
        covered: dict[tuple[str, ...], str] = {}  # position -> its shallowest matching label
        for p in self.positions:
            hit = next((lab for lab in _labels(p) if matches(lab)), None)
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
        tops = sorted(self.top_level(), key=natural)
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
        general = sorted({generalize(lab) for lab in self.labels})
        by_end = [g for g in general if re.split(r"[./]", g)[-1] == name and g != name]
        close = difflib.get_close_matches(name, self.labels + general, n=3, cutoff=0.6)
        picks = list(dict.fromkeys(by_end[:3] + close))[:4]
        return "did you mean " + " or ".join(map(show, picks)) if picks else ""


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
    per_scope = {check_name(name): n for name, n in (per_scope or {}).items()}
    for name, n in per_scope.items():
        _budget_value(f"per_scope[{show(name)}]", n)
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
