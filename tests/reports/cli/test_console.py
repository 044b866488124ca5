"""How the one console prints a table (reports/cli/console.py)."""

import io

from rich.table import Table

from graph_harness.reports.cli.console import make_console

TITLE = "Nodes per call - CPU dispatch count (no GPU: ATen ops + Triton launches, not graph nodes)"


def _printed(table: Table, width: int) -> list[str]:
    console = make_console(io.StringIO(), width=width)
    console.print(table)
    return console.file.getvalue().splitlines()


def _narrow(title: str, caption: str | None = None) -> Table:
    t = Table(title=title, caption=caption)
    t.add_column("workload")
    t.add_row("targets.py:small_mlp")  # a table 24 columns wide
    return t


def test_a_title_longer_than_its_table_wraps_at_the_console_width():
    # issue 44, 14: rich wraps a title at the table's own width: three lines of 46
    # columns over a narrow table in a 160-column terminal
    caption = "a caption longer than the table it is under"
    lines = _printed(_narrow(TITLE, caption=caption), 160)
    assert lines[0] == TITLE and lines[-1] == caption  # one line each, unpadded
    lines = _printed(_narrow(TITLE), 40)  # longer than the console: wrapped at its width
    assert max(map(len, lines)) <= 40 and " ".join(lines[:3]).split() == TITLE.split()


def test_a_title_that_fits_its_table_is_centred_over_it_as_before():
    lines = _printed(_narrow("short"), 160)
    width = len(lines[1])  # the table's top border
    assert lines[0].strip() == "short" and lines[0].index("short") == (width - 5) // 2
