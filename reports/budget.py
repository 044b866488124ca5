"""Node budgets in words: the failure table and the notes of the pytest plugin. Renders
what capture/budget/limits.py checked; never counts.

Plain text, not a rich table: it is an assertion message, read in a terminal, a CI log or
a junit file, and matched by tests.
"""

from __future__ import annotations

from graph_harness.capture.budget.limits import (
    ALL,
    PER_MATCH,
    SCOPE,
    SUM,
    UPDATE_FLAG,
    BudgetCheck,
    Line,
)
from graph_harness.capture.export.nodes import NodeExport
from graph_harness.reports.kernel_names import short_names
from graph_harness.reports.tables import source_note

KERNELS_SHOWN = 3  # per row; the rest are summed
KERNEL_WIDTH = 72  # as the count tables: cut in the middle past it


def what_counted(export: NodeExport) -> str:
    """What the numbers are: graph nodes, or dispatched ops on the CPU."""
    if export.source == "cuda-graph":
        return source_note(export)
    return "dispatched ops on the CPU (no GPU: ATen ops + Triton launches, not graph nodes)"


def _kernels(line: Line, names: dict[str, str], width: int) -> list[str]:
    """The kernels of a row, one a line, most frequent first: `count × name`."""
    shown = [f"{n:>{width}} × {names.get(k, k)}" for k, n in line.kernels[:KERNELS_SHOWN]]
    rest = line.kernels[KERNELS_SHOWN:]
    if rest:
        more = sum(n for _, n in rest)
        shown.append(f"{more:>{width}} × {len(rest)} more kernel{'s' if len(rest) > 1 else ''}")
    return shown


def _scope_cell(line: Line) -> str:
    """A row's scope, saying what kind of budget holds it: the scope's own, a pattern's
    per match (`layers.1 (per match of layers.*)`) or a sum over scopes."""
    if line.kind == PER_MATCH:
        return f"{line.name} (per match of {line.pattern})"
    if line.kind == SUM:
        return f"{line.name} (sum of {line.scopes} scope{'s' if line.scopes != 1 else ''})"
    return line.name


def _budget_name(line: Line) -> str:
    """A budget as the notes name it: a per-match pattern by its largest match, the count
    shown beside it."""
    if line.kind == PER_MATCH:
        return f"{line.pattern} (per match, largest {line.name})"
    return "total" if line.kind == ALL else line.name


def budget_table(check: BudgetCheck, *, all_lines: bool = False) -> list[str]:
    """The table: each scope over budget (every scope with `all_lines`; for a per-match
    pattern, each matching scope over it, named with the pattern), its budget, its count,
    the difference and the kernels that make it up (one a line, most frequent first); the
    total line last, where a total budget was given (or with `all_lines`)."""
    rows = [ln for ln in check.scopes if all_lines or ln.exceeded]
    rows += [check.total] * (all_lines or check.total.budget is not None)
    names = short_names((k for ln in rows for k, _ in ln.kernels), width=KERNEL_WIDTH)
    count_width = max(len(str(n)) for ln in rows for _, n in ln.kernels or [("", 0)])
    head = ("scope", "budget", "nodes", "diff")
    cells = [head]
    for ln in rows:
        budget = "-" if ln.budget is None else str(ln.budget)
        diff = "" if ln.diff is None else f"{ln.diff:+d}"
        cells.append((_scope_cell(ln), budget, str(ln.nodes), diff))
    widths = [max(len(r[i]) for r in cells) for i in range(4)]

    def fixed(r: tuple[str, ...]) -> str:
        return "  ".join([r[0].ljust(widths[0]), *(c.rjust(w) for c, w in zip(r[1:], widths[1:]))])

    out = [f"{fixed(head)}  kernels"]
    for r, ln in zip(cells[1:], rows):
        kernels = _kernels(ln, names, count_width) or ["-"]
        out.append(f"{fixed(r)}  {kernels[0]}")
        out += [" " * (sum(widths) + 6) + f"  {k}" for k in kernels[1:]]
    return out


def budget_failure(check: BudgetCheck, export: NodeExport) -> str:
    """The failure message: what was counted, where the budgets came from, the table, and
    what to do if the new count is intended."""
    over = check.exceeded
    scopes = sum(ln.kind in (SCOPE, PER_MATCH) for ln in over)
    sums = sum(ln.kind == SUM for ln in over)
    where = [
        f"{n} {word}{'s' if n > 1 else ''}" for n, word in ((scopes, "scope"), (sums, "sum")) if n
    ]
    if check.total.exceeded:
        where.append("the total")
    said = where[0] if len(where) == 1 else f"{', '.join(where[:-1])} and {where[-1]}"
    lines = [
        f"node budget exceeded in {said}: {check.workload}, counting {what_counted(export)}",
        f"budgets: {check.origin}" + _recorded_note(check, export),
        "",
        *budget_table(check),
        "",
    ]
    if check.origin == "inline":
        lines.append("if the new count is intended, raise the budget in the test")
    else:
        lines.append(f"if the new count is intended, re-record it: pytest {UPDATE_FLAG}")
    return "\n".join(lines)


def _recorded_note(check: BudgetCheck, export: NodeExport) -> str:
    rec = check.recorded
    if not rec:
        return ""
    note = f" (recorded with torch {rec.get('torch', '?')} on {rec.get('device', '?')}"
    now = export.env.get("torch")
    if rec.get("torch") and now and rec["torch"] != now:
        note += f"; torch is {now} now, and op counts change between releases"
    return note + ")"


def slack_note(key: str, check: BudgetCheck) -> str:
    """One line for a budget with room left: how far under, and how to tighten it."""
    parts = [f"{_budget_name(ln)} {ln.nodes} of {ln.budget}" for ln in check.slack]
    how = (
        "lower the budget in the test"
        if check.origin == "inline"
        else f"tighten with {UPDATE_FLAG}"
    )
    return f"{key} [{check.source}]: under budget: {', '.join(parts)}; {how}"


def recorded_note(key: str, where: str, check: BudgetCheck) -> str:
    """One line for a budget recorded: `check` is today's counts against what was written."""
    shown = [f"{_budget_name(ln)} {ln.nodes}" for ln in check.budgets]
    return f"{key} [{check.source}]: recorded in {where}: " + ", ".join([shown[-1], *shown[:-1]])
