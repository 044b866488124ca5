"""Rendering what `capture` measured: tables, files, plots and reports; never measures.

    cli/          the graph-harness command line (program, subcommands, --target loading)
    output/       the output folder as a transaction (built aside, manifest, swap)
    tables.py, profile_tables.py, check_tables.py, budget.py   rich tables
    report.py, target_report.py                               `graph-harness report`
    plots.py, kernel_names.py, text.py                        plots, names a person reads

May import: capture (anything), rich, pandas, matplotlib (lazily, inside plots).
Nothing in capture imports this package.
"""
