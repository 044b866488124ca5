"""Rich tables of what `check` found (capture/check/step.py). Renders; never measures."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from graph_harness.capture.check.findings import SEVERITIES, CheckResult

_ORDER = {s: i for i, s in enumerate(SEVERITIES)}
# Styled as Text, never as markup: graph-harness's consoles print every str as text
# (reports/cli/console.py), so "[red]FAIL[/]" would print its brackets. A terminal shows
# the style; a pipe or a file gets the plain word.
_MARKS = {
    "fail": Text("FAIL", style="bold red"),
    "unverified": Text("NOT VERIFIED", style="bold magenta"),
    "warn": Text("warn", style="yellow"),
    "info": Text("info", style="dim"),
}


def findings_table(result: CheckResult) -> Table:
    """One row per finding, failures first: what, where (node and scope) and the finding."""
    t = Table(
        title=f"check: {result.name} ({result.warmup} warm-ups, {result.steps} steps"
        f"{', fed' if result.fed else ''})"
    )
    t.add_column("", no_wrap=True)
    t.add_column("kind", no_wrap=True)
    t.add_column("step", justify="right", no_wrap=True)
    t.add_column("node", justify="right", no_wrap=True)
    t.add_column("scope", no_wrap=True)
    t.add_column("finding")
    for f in sorted(result.findings, key=lambda f: _ORDER[f.severity]):
        node = "-" if f.node is None else f"{f.node} {f.kernel or ''}".strip()
        step = "-" if f.step is None else str(f.step)
        t.add_row(_MARKS[f.severity], f.kind, step, node, f.scope or "-", f.message)
    return t
