"""Node budgets: a step's nodes counted against a limit, in total and per scope, so a
later change cannot bring nodes back unseen.

A budget name is a scope's label (capture/attribution/rollup.py) and covers everything
nested under it; `*` and `?` match within one dotted part. A plain pattern's budget holds
per match, `sum(...)`'s the matches together; `unscoped` names the nodes outside every
scope; a name that covers no node is refused with the nearest names. In full:
docs/budgets.md, "The fixture, its names and its file" and "capture/budget/limits.py".
The budget file that records them: capture/budget/file.py.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from graph_harness.capture.attribution.labels import generalize, natural
from graph_harness.capture.attribution.rollup import tree_parts
from graph_harness.capture.budget import UPDATE_FLAG as UPDATE_FLAG
from graph_harness.capture.errors import HarnessError, UsageError
from graph_harness.capture.export.documents import show
from graph_harness.capture.export.nodes import NodeExport
from graph_harness.capture.scopes.names import UNSCOPED
from graph_harness.capture.text import printable

TOTAL = "(total)"  # the total's row in a check
TOP_SHOWN = 12  # top-level scopes listed when a name never occurs

# What a line of a check holds (Line.kind): one scope, by its label; one of the scopes a
# pattern matches, held to the pattern's budget on its own; every scope a `sum(...)`
# covers, together; the total.
SCOPE, PER_MATCH, SUM, ALL = "scope", "per match", "sum", "total"
WILDCARDS = "*?"
_SUM = re.compile(r"sum\((.*)\)", re.S)


class BudgetError(UsageError, ValueError):
    """A budget that cannot be checked: a name that never occurs, arguments that do not
    combine, a record missing its entry. The message says what to do."""


class NodeBudgetExceeded(HarnessError, AssertionError):
    """More nodes than the budget allows; `check` has every line, the message the table."""

    def __init__(self, message: str, check: BudgetCheck) -> None:
        super().__init__(message)
        self.check = check


# ---------------------------------------------------------------------------- matching


def sum_key(pattern: str) -> str:
    """The budget name that sums the scopes `pattern` covers: `sum(layers.*)`."""
    return f"sum({pattern})"


def summed(name: str) -> str | None:
    """The pattern inside a `sum(...)` name (None: not one)."""
    m = _SUM.fullmatch(name)
    return m.group(1) if m else None


def is_pattern(name: str) -> bool:
    """Whether `name` holds a wildcard (it may still be some scope's own label)."""
    return any(ch in name for ch in WILDCARDS)


def check_name(name: object) -> str:
    """A budget name as text (capture/text.py: as the scopes it names were recorded), or
    BudgetError saying why it cannot be one. Inside `sum(...)`, a name too."""
    if not isinstance(name, str):
        raise BudgetError(f"a scope name is a str, got {show(name)}")
    if not name or any(not part for part in name.split(".")) or name != name.strip():
        raise BudgetError(
            f"scope name {show(name)} is not a scope label (dotted parts, none empty, "
            "no surrounding spaces)"
        )
    inner = summed(name)
    if inner is not None:
        try:
            check_name(inner)
        except BudgetError as e:
            raise BudgetError(
                f"{show(name)} sums the scopes a name or pattern covers, and {e}"
            ) from None
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
    """One budget checked over some nodes: `nodes` under `name`, against `budget` (None:
    no limit, the total's line when only scopes have budgets). `kernels`: what the nodes
    are (kernel name, or the node type where there is none), most frequent first.

    `kind`: SCOPE, one scope by its label; PER_MATCH, the scope `name` that `pattern`
    matched, held to the pattern's budget on its own (a pattern has one such line per
    match); SUM, the `scopes` scopes that `name`, a `sum(...)`, covers, together; ALL,
    the total."""

    name: str
    budget: int | None
    nodes: int
    kernels: tuple[tuple[str, int], ...]
    kind: str = SCOPE
    scopes: int = 1
    pattern: str | None = None

    @property
    def key(self) -> str:
        """The budget's name as the test or the file gives it."""
        return self.pattern if self.kind == PER_MATCH else self.name

    @property
    def diff(self) -> int | None:
        return None if self.budget is None else self.nodes - self.budget

    @property
    def exceeded(self) -> bool:
        return self.budget is not None and self.nodes > self.budget


@dataclass(frozen=True)
class BudgetCheck:
    """Every budget of one call checked against one export. `scopes`: a line per budget,
    and per matching scope for a per-match pattern, in the order the budgets were given."""

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
    def budgets(self) -> list[Line]:
        """One line per budget, the total last: a per-match pattern's is its largest match
        (the one that binds it; the first of equals)."""
        binding: dict[str, Line] = {}
        for ln in self.scopes:
            if ln.key not in binding or ln.nodes > binding[ln.key].nodes:
                binding[ln.key] = ln
        return [*binding.values(), self.total]

    @property
    def slack(self) -> list[Line]:
        """Budgets under their count: room to tighten them (a per-match budget down to its
        largest match, no further)."""
        return [ln for ln in self.budgets if ln.diff is not None and ln.diff < 0]


def _ranked(kernels: Counter) -> tuple[tuple[str, int], ...]:
    return tuple(sorted(kernels.items(), key=lambda kv: (-kv[1], kv[0])))


class _Nodes:
    """An export's launching nodes, by tree position, for matching names."""

    def __init__(self, export: NodeExport) -> None:
        df = export.frame()
        keys = df["kernel"].where(df["kernel"].fillna("") != "", df["type"])
        self.rows = list(zip(df["scope_path"].map(lambda p: tuple(tree_parts(p))), keys))
        self.positions = sorted({p for p, _ in self.rows})
        self.labels = sorted({lab for p in self.positions for lab in _labels(p)})

    def covered(self, name: str) -> dict[str, set[tuple[str, ...]]]:
        """The scopes `name` covers, by label in natural order, each with its tree
        positions (nested ones included); empty when it covers none."""
        # A scope's own label names that scope, even one holding `*` or `?` (a scope
        # literally called `*`, recorded by its label, counts its own nodes only).
        matches = name.__eq__ if name in self.labels else _pattern(name).fullmatch
        out: dict[str, set[tuple[str, ...]]] = {}
        for p in self.positions:
            hit = next((lab for lab in _labels(p) if matches(lab)), None)  # the shallowest
            if hit is not None:
                out.setdefault(hit, set()).add(p)
        return dict(sorted(out.items(), key=lambda kv: natural(kv[0])))

    def _line(
        self, name: str, budget: int | None, positions: set, **kind: str | int | None
    ) -> Line:
        kernels = Counter(k for p, k in self.rows if p in positions)
        return Line(name, budget, sum(kernels.values()), _ranked(kernels), **kind)

    def lines(self, name: str, budget: int | None) -> list[Line]:
        """The lines of the budget `name` (none: it covers no node): one for a scope's
        label or a `sum(...)`, one per matching scope for a pattern."""
        name = check_name(name)
        inner = None if name in self.labels else summed(name)
        covered = self.covered(name if inner is None else inner)
        if not covered:
            return []
        if inner is not None:
            every = set().union(*covered.values())
            return [self._line(name, budget, every, kind=SUM, scopes=len(covered))]
        if name in self.labels:
            return [self._line(name, budget, covered[name])]
        return [
            self._line(label, budget, positions, kind=PER_MATCH, pattern=name)
            for label, positions in covered.items()
        ]

    def total(self, budget: int | None) -> Line:
        return Line(TOTAL, budget, len(self.rows), _ranked(Counter(k for _, k in self.rows)), ALL)

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
        last part it is (`attention` -> `layers.*.attention`), then close spellings;
        inside a `sum(...)`, the same names summed."""
        picks = self._picks(name)
        return "did you mean " + " or ".join(map(show, picks)) if picks else ""

    def _picks(self, name: str) -> list[str]:
        inner = summed(name)
        if inner is not None:
            return [sum_key(pick) for pick in self._picks(inner)]
        general = sorted({generalize(lab) for lab in self.labels})
        by_end = [g for g in general if re.split(r"[./]", g)[-1] == name and g != name]
        close = difflib.get_close_matches(name, self.labels + general, n=3, cutoff=0.6)
        return list(dict.fromkeys(by_end[:3] + close))[:4]


def _found(
    nodes: _Nodes, names: Iterable[str], budget: Callable[[str], int | None], workload: str
) -> dict[str, list[Line]]:
    """The lines of each name; BudgetError for the names that cover no node (all of them,
    with the nearest names)."""
    lines = {name: nodes.lines(name, budget(name)) for name in names}
    missing = [name for name, found in lines.items() if not found]
    if missing:
        raise nodes.unknown(missing, workload)
    return lines


def check_budget(
    export: NodeExport,
    *,
    total: int | None = None,
    per_scope: Mapping[str, int] | None = None,
    origin: str = "inline",
    recorded: dict[str, str] | None = None,
) -> BudgetCheck:
    """Count `export`'s nodes in total and under each named scope, against the budgets (a
    pattern: each scope it matches; a `sum(...)`: them all together). Names that cover no
    node raise BudgetError (all of them, with the nearest names)."""
    if total is not None:
        _budget_value("total", total)
    per_scope = {check_name(name): n for name, n in (per_scope or {}).items()}
    for name, n in per_scope.items():
        _budget_value(f"per_scope[{show(name)}]", n)
    nodes = _Nodes(export)
    lines = _found(nodes, per_scope, per_scope.get, export.workload)
    return BudgetCheck(
        workload=export.workload,
        source=export.source,
        total=nodes.total(total),
        scopes=tuple(ln for found in lines.values() for ln in found),
        origin=origin,
        recorded=dict(recorded or {}),
    )


def _budget_value(what: str, n: object) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise BudgetError(f"{what}: a budget is an int >= 0 (nodes), got {show(n)}")
    return n


def counts(export: NodeExport, names: Iterable[str] | None = None) -> dict[str, int]:
    """Today's count under each name, as the budget that holds it (a pattern's: its
    largest match; a `sum(...)`'s: the sum). Default names: each top-level scope, and
    `unscoped` when some nodes are outside every scope. BudgetError for names that cover
    no node."""
    nodes = _Nodes(export)
    names = nodes.top_level() if names is None else [check_name(n) for n in names]
    lines = _found(nodes, names, lambda _: None, export.workload)
    return {name: max(ln.nodes for ln in found) for name, found in lines.items()}
