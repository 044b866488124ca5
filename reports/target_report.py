"""The report folder for your own step(s) (`report --target`): counts by module, the
delta when given two, plots. The same kind of folder as the round's report (report.md
readable alone, CSV of every table, the JSON exports, PNGs); every figure comes from
the exports, nothing typed in."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from graph_harness.capture import NodeExport
from graph_harness.capture.attribution.rollup import scope_tree
from graph_harness.capture.export.delta import node_delta
from graph_harness.capture.export.dump import is_dump
from graph_harness.capture.files import write_csv, write_output
from graph_harness.reports import plots
from graph_harness.reports.kernel_names import short_names
from graph_harness.reports.report import dispatch_section, header
from graph_harness.reports.tables import deeper_note, default_depth
from graph_harness.reports.text import markdown_table

if TYPE_CHECKING:
    from graph_harness.capture.check.findings import CheckResult
    from graph_harness.capture.profile.document import ProfileResult
    from graph_harness.capture.sweep.document import SweepResult

# `depth` not given: tables.default_depth of the exports (--module-scopes without DEPTH)
BY_BLOCKS = "by blocks"


def write_target_report(
    folder: Path,
    exports: dict[str, NodeExport],
    *,
    command: str,
    profile: ProfileResult | None = None,
    checks: dict[str, CheckResult] | None = None,
    depth: int | str | None = BY_BLOCKS,
    sweep: SweepResult | None = None,
) -> Path:
    """Write report.md and its files into `folder` (which must exist and be empty).
    `exports`: one or two, by name (the first is A of the delta). `profile`: their
    in-round profile (capture/profile/document.py), where one was taken (a GPU): the dispatch
    share per module. `checks`: name -> CheckResult (`report --check`), its verdicts.
    `depth`: where every table, CSV and plot cuts the scope tree (None: every level), as
    count's table does for the same --module-scopes (reports/cli/args.py's shown_depth);
    not given, one row per layer (tables.default_depth). `sweep`: the step captured at
    every batch size (capture/sweep/document.py, `report --sizes`), its section and files."""
    if depth == BY_BLOCKS:
        depth = default_depth(exports.values())
    lines = [x for x in header(exports, command) if not x.startswith("- round parameters")]
    if checks:
        lines += check_section(checks)
    lines += modules_section(folder, exports, depth)
    if any(is_dump(e) for e in exports.values()):
        lines += dump_section(folder, exports)
    if len(exports) == 2:
        lines += target_delta_section(folder, exports)
    if profile is not None:
        lines += dispatch_section(folder, profile, depth=depth)
    if sweep is not None:
        lines += sweep_section(folder, sweep, depth)
    write_output(folder / "report.md", "\n".join(lines) + "\n")
    return folder / "report.md"


def check_section(checks: dict) -> list[str]:
    """Each check's verdict and findings (the whole document: check.json)."""
    lines = ["## Does each graph compute what its step computes? (check)", ""]
    for n, r in checks.items():
        lines += [f"**{n}**: {r.verdict()}", ""]
        rows = [
            dict(severity=f.severity, kind=f.kind, step=f.step, tensor=f.tensor, finding=f.message)
            for f in r.findings
            if f.severity != "info"
        ]
        if rows:
            lines += [markdown_table(pd.DataFrame(rows)), ""]
    return lines


def modules_section(folder: Path, exports: dict[str, NodeExport], depth: int | None) -> list[str]:
    """Totals, then per export its scope tree cut at `depth` (report.md and scopes-NAME.csv:
    count's table, the same `nodes` and `own`), then every export's own nodes per scope
    (nodes_per_module.csv and its plot: the tree's nonzero `own`s, which sum to the total)."""
    totals = pd.DataFrame(
        [
            dict(name=n, workload=e.workload, compiled=e.options.get("compiled"), nodes=e.total)
            for n, e in exports.items()
        ]
    )
    write_csv(folder / "totals.csv", totals)
    lines = ["## Nodes per call", "", markdown_table(totals), ""]
    rows = []
    for n, e in exports.items():
        e.write_json(folder / f"nodes-{n}.json")
        df = e.frame()
        write_csv(folder / f"nodes-{n}.csv", df)
        tree = scope_tree(df, depth)
        write_csv(folder / f"scopes-{n}.csv", tree)
        if not is_dump(e):  # a dump has no scopes: its families follow (dump_section)
            lines += [
                f"### {n}: nodes by scope (each level sums to its parent)",
                "",
                markdown_table(tree),
                "",
            ]
        note = deeper_note(df, depth)
        lines += [note, ""] if note else []
        owned = tree[tree.own > 0]
        rows.append(pd.DataFrame(dict(name=n, scope=owned.scope, own=owned.own)))
    per_module = pd.concat(rows, ignore_index=True)
    write_csv(folder / "nodes_per_module.csv", per_module)
    if all(is_dump(e) for e in exports.values()):  # no module to plot
        return lines
    source = next(iter(exports.values())).source
    plots.nodes_per_module(per_module, depth, folder / "nodes_per_module.png", source)
    return [
        *lines,
        "`nodes`: all under a scope; `own`: in it and in no scope below it that the table "
        "shows (at the cut, everything under it). The plot and nodes_per_module.csv are the "
        "`own`s, which sum to the total.",
        "",
        "![own nodes per module](nodes_per_module.png)",
        "",
    ]


def dump_section(folder: Path, exports: dict[str, NodeExport]) -> list[str]:
    """A graph no one scoped (a dump), read by kernel family (families-NAME.csv) and by
    the block its nodes repeat back to back (capture/attribution/repeats.py)."""
    from graph_harness.capture.attribution.repeats import repeating_block
    from graph_harness.capture.export.families import families

    lines = ["## By kernel family (docs/families.md), and the repeated block", ""]
    for n, e in exports.items():
        df = e.frame()
        per = families(df).value_counts().rename_axis("family").reset_index(name="nodes")
        write_csv(folder / f"families-{n}.csv", per)
        lines += [f"### {n}", "", markdown_table(per), ""]
        r = repeating_block(list(zip(df["type"], df["kernel"])))
        lines += [
            (
                f"A block of {r.period} nodes repeats {r.times} times from node {r.start} "
                f"({r.nodes} of {e.total} nodes), read from the node sequence alone (a "
                "model's layers, where the graph has them)."
            )
            if r is not None
            else "No block of nodes repeats back to back.",
            "",
        ]
    return lines


def target_delta_section(folder: Path, exports: dict[str, NodeExport]) -> list[str]:
    (a_name, a), (b_name, b) = exports.items()
    d = node_delta(a, b)
    write_csv(folder / "delta_by_scope.csv", d.by_scope)
    write_csv(folder / "delta_by_kernel.csv", d.by_kernel)  # full kernel names
    names = short_names(d.by_kernel.kernel)
    kernels = d.by_kernel.assign(kernel=d.by_kernel.kernel.map(lambda k: names.get(k, k)))
    differ = d.by_scope[(d.by_scope.delta != 0) | (d.by_scope.depth <= 1)]
    family_lines = []
    if d.by_family is not None:  # graph nodes (docs/families.md)
        write_csv(folder / "delta_by_family.csv", d.by_family)
        family_lines = ["By kernel family (docs/families.md):", "", markdown_table(d.by_family), ""]
    return [
        f"## Delta, {a_name} -> {b_name} (B - A)",
        "",
        f"`{d.headline()}`",
        "",
        "By scope, every depth (rows that differ, and every top-level one):",
        "",
        markdown_table(differ),
        "",
        "By node type:",
        "",
        markdown_table(d.by_type),
        "",
        *family_lines,
        "By kernel (rows that differ):",
        "",
        markdown_table(kernels, none="None differs."),
        "",
    ]


def sweep_section(folder: Path, sweep: SweepResult, depth: int | None) -> list[str]:
    """The capture-size ladder: a row per size, the shared pool, memory by module and each
    request distribution's ladders (sweep.json and its CSVs beside report.md)."""
    sweep.write(folder)
    sizes = sweep.sizes_table().drop(columns=["by_type"])
    lines = [f"## One graph per batch size (sweep of {sweep.name})", ""]
    if not sweep.measured:
        lines += [
            sweep.why_not + ".",
            "",
            markdown_table(sizes[["batch", "nodes", "capture_s"]]),
            "",
        ]
        return lines + _padding_lines(folder, sweep)
    plots.sweep(sweep, folder / "sweep.png")
    lines += [
        "Replay time is the median of interleaved trials with its 95% interval; memory is "
        "each size's own pool just after capture (reserved, in use); `leak` is what the "
        "pool grew by over the leak check's replays.",
        "",
        markdown_table(sizes),
        "",
        "![replay time and memory per size](sweep.png)",
        "",
        "Every size captured again into one shared pool, largest first:",
        "",
        markdown_table(sweep.shared_table()),
        "",
    ]
    memory = sweep.memory_by_module(depth)
    if not memory.empty:
        wide = memory.pivot_table(index="scope", columns="batch", values="reserved", aggfunc="sum")
        lines += [
            "Graph memory by module (bytes of pool segments taken while each was open):",
            "",
            markdown_table(wide.fillna(0).astype(int).reset_index()),
            "",
        ]
    return lines + _padding_lines(folder, sweep)


def _padding_lines(folder: Path, sweep: SweepResult) -> list[str]:
    """Each request distribution's ladders; with no replay times (the CPU), their padded
    rows alone, and no plot (it draws times)."""
    if not sweep.padding:
        return []
    if not sweep.measured:
        table = sweep.ladder_table()[["requests", "ladder", "sizes", "graphs", "padding_share"]]
        lines = ["Padding: each ladder's share of padded rows for the requests given (time "
                 "per step needs a GPU)", "", markdown_table(table), ""]  # fmt: skip
    else:
        plots.padding(sweep, folder / "padding.png")
        lines = ["Padding: each ladder's time per step for the requests given", ""]
        lines += [markdown_table(sweep.ladder_table()), "", "![padding](padding.png)", ""]
    for p in sweep.padding:
        lines += [f"- {p.requests}: capture {list(p.chosen)} ({p.how})"]
    return [*lines, ""]
