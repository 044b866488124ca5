"""Rich tables of what `check` found (capture/check/step.py). Renders; never measures."""

from __future__ import annotations

from rich.table import Table

from graph_harness.capture.check.findings import CheckResult

_ORDER = {"fail": 0, "warn": 1, "info": 2}


def findings_table(result: CheckResult) -> Table:
    """One row per finding, failures first: what, where (node and scope) and the finding."""
    t = Table(title=f"check: {result.name} ({result.warmup} warm-ups)")
    t.add_column("", no_wrap=True)
    t.add_column("kind", no_wrap=True)
    t.add_column("node", justify="right", no_wrap=True)
    t.add_column("scope", no_wrap=True)
    t.add_column("finding")
    for f in sorted(result.findings, key=lambda f: _ORDER[f.severity]):
        node = "-" if f.node is None else f"{f.node} {f.kernel or ''}".strip()
        mark = {"fail": "[red]FAIL[/]", "warn": "[yellow]warn[/]", "info": "info"}[f.severity]
        t.add_row(mark, f.kind, node, f.scope or "-", f.message)
    return t
