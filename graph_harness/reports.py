"""Rendering what `capture` measured: tables, files, plots and reports; never measures.

    cli/          the graph-harness command line (program, subcommands, --target loading)
    output/       the output folder as a transaction (built aside, manifest, swap)
    tables.py, profile_tables.py, check_tables.py, budget.py   rich tables
    report.py, target_report.py                               `graph-harness report`
    plots.py, kernel_names.py, text.py                        plots, names a person reads

May import: capture (anything), rich, pandas, matplotlib (lazily, inside plots).
Nothing in capture imports this package.
"""

from graph_harness import _folder

# this module is the package graph_harness.reports; its modules are in its folder
__path__ = _folder(__spec__, "reports")
