"""`graph-harness advise EXPORT`: what is worth fusing, ranked by time saved."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from graph_harness.capture.round.params import VARIANTS
from graph_harness.reports.cli.args import json_arg, positive, round_args, subcommand
from graph_harness.reports.cli.console import (
    IO,
    banner,
    given_round_flags,
    refuse,
    round_params,
)
from graph_harness.reports.cli.refs import is_export_path, neither

if TYPE_CHECKING:
    from graph_harness.capture.advise.advice import Advice


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    v = subcommand(
        sub,
        "advise",
        common,
        help="what is worth fusing in an export, ranked by time saved",
        description="From a node export (or a variant of the built-in round, counted here), "
        "list what could become one node: chains of nodes in one scope and copies after a "
        "kernel, ranked by the time fusing them would save per replay, priced from a replay "
        "document (--costs) or a built-in table measured on an H200.",
        examples=[
            "graph-harness advise shipped",
            "graph-harness advise model/nodes-target.json --costs replay/replay.json --top 5",
        ],
        variants=True,
    )
    v.add_argument(
        "export",
        metavar="EXPORT",
        help="an export file by path (count --out's nodes-*.json, or count --json's output, "
        "one export as FILE#NAME; a path holds a '/' or ends in .json), or a variant of the "
        "built-in round by name (shipped, ...), counted here",
    )
    v.add_argument(
        "--costs",
        type=Path,
        metavar="REPLAY.json",
        help="price nodes with this replay document (`graph-harness replay --out DIR` writes "
        "DIR/replay.json) instead of the built-in H200 costs",
    )
    v.add_argument(
        "--top", type=positive(1), default=10, help="how many groups to show (default 10)"
    )
    round_args(v)
    json_arg(v, "the advice")


def check_flags(args: argparse.Namespace) -> None:
    from graph_harness.capture.export.kinds import split_ref
    from graph_harness.capture.paths import check_input

    if args.costs is not None:
        check_input(args.costs, "--costs file")
    if is_export_path(args.export):
        check_input(split_ref(args.export)[0], "export file")
        refuse(
            given_round_flags(args),
            "apply to counting a variant, and EXPORT is a file that carries its own: drop them",
        )
    elif args.export not in VARIANTS:
        raise neither(args.export)


def run(args: argparse.Namespace, io: IO) -> int:
    from graph_harness.capture import NodeExport, count_round
    from graph_harness.capture.advise.advice import advise
    from graph_harness.capture.advise.costs import Costs

    check_flags(args)
    costs = Costs.read(args.costs) if args.costs is not None else None  # before counting
    if is_export_path(args.export):
        export = NodeExport.read_json(args.export)
    else:
        banner(io)
        io.err.print(f"capturing {args.export} ...", style="dim")
        export = count_round(round_params(args), args.export).export
    advice = advise(export, costs)
    if io.json:
        io.print_json(advice.to_dict(top=args.top))
    else:
        show(io, advice, args.top)
    return 0


def show(io: IO, advice: Advice, top: int) -> None:
    from graph_harness.reports.advise_tables import advice_table, comparisons_table

    if not advice.groups:
        io.out.print(
            f"{advice.name}: nothing to fuse: no two nodes of one scope form a serial chain "
            "outside library kernels, and no copy follows a kernel alone",
            markup=False,
        )
    else:
        io.out.print(advice_table(advice, top))
        if len(advice.groups) > top:
            rest = advice.groups[top:]
            io.out.print(
                f"... {len(rest)} more group{'s' * (len(rest) > 1)}, "
                f"{sum(g.saving_us for g in rest):.1f} us per "
                f"{advice.unit} together (--top to see them)",
                markup=False,
            )
    if advice.comparisons:
        io.out.print(comparisons_table(advice))
        for c in advice.comparisons:
            io.out.print(f"{c.a} -> {c.b}: {c.note}", markup=False)
    for note in advice.notes:
        io.out.print(f"note: {note}", markup=False)
    io.out.print(f"costs: {advice.costs.label}", markup=False)
