"""`graph-harness delta A B`: what a change added and removed, B - A."""

from __future__ import annotations

import argparse
import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

from graph_harness.capture.export.kinds import RECORDING_DOCUMENT, split_ref
from graph_harness.capture.files import check_output
from graph_harness.capture.paths import check_input
from graph_harness.capture.round.params import VARIANTS
from graph_harness.reports.cli.args import json_arg, round_args, subcommand
from graph_harness.reports.cli.console import (
    IO,
    UsageError,
    banner,
    given_round_flags,
    refuse,
    round_params,
)
from graph_harness.reports.cli.refs import is_export_path, is_recording, neither

if TYPE_CHECKING:
    from graph_harness.capture.advise.costs import Costs
    from graph_harness.capture.advise.delta_price import DeltaPrice
    from graph_harness.capture.export.delta import NodeDelta
    from graph_harness.capture.export.families import FamilyRule
    from graph_harness.capture.export.nodes import NodeExport


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    d = subcommand(
        sub,
        "delta",
        common,
        help="node delta between two exports or variants",
        description="The nodes B has that A has not, and the other way (B - A): in total, per "
        "scope at every depth (per step of the round), by node type, by kernel family "
        "(GEMM libraries, attention, Triton, ATen, NCCL, copies: docs/families.md) and by "
        "kernel. A and B are each a variant of the built-in round, counted here, an "
        "export file, a graph dump (.dot), or both a recording (`graph-harness record "
        "--out DIR`): then graph by graph, step by step (--step-key) and over every graph.",
        examples=[
            "graph-harness delta shipped fused",
            "graph-harness delta eager/nodes-target.json compiled/nodes-target.json --csv -",
            "graph-harness delta before.dot after.dot",
            "graph-harness delta vllm-rec sglang-rec --step-key 'bs=(\\d+)' 'batch (\\d+)'",
        ],
        variants=True,
    )
    for side in ("a", "b"):
        d.add_argument(
            side,
            help="a variant by name (shipped, fused, ...), an export file or graph dump by "
            "path (a path holds a '/' or ends in .json or .dot: ./shipped is a file, shipped "
            "the variant; of `count --json`'s output, one export as FILE#NAME: c.json#fused), "
            "or a recording's folder",
        )
    d.add_argument(
        "--step-key",
        nargs="+",
        metavar="REGEX",
        help="recordings: which graphs make one step, by a regular expression searched in "
        "each graph's name (its first group, or the whole match, names the step; "
        "`bs=(\\d+)` makes `bs=4 piece=1/3` and `bs=4 piece=2/3` one step `4`); one for both, "
        "or A's and B's",
    )
    d.add_argument(
        "--from",
        dest="from_dir",
        type=Path,
        help="read variants from this `count --out` folder instead of counting",
    )
    round_args(d)
    d.add_argument("--csv", help="write the by-kernel delta as CSV here ('-' for stdout)")
    d.add_argument(
        "--costs",
        metavar="REPLAY_JSON",
        help="price graph nodes with this replay document's per-node costs (`graph-harness "
        "replay --out DIR` writes DIR/replay.json) instead of the built-in H200 costs",
    )
    d.add_argument(
        "--families",
        metavar="FILE",
        help="kernel-family rules of your own, put in front of the built-in ones: a CSV "
        "with the header `family,pattern` (a regular expression searched in demangled "
        "kernel names; docs/families.md)",
    )
    json_arg(d, "the delta")


def check_early(args: argparse.Namespace) -> None:
    """The flags checked before torch is imported (reports/cli/program.py): they need none."""
    check_flags(args)


def check_flags(args: argparse.Namespace) -> None:
    recordings = [is_recording(r) for r in (args.a, args.b)]
    if any(recordings):
        if not all(recordings):
            which = "A" if recordings[0] else "B"
            raise UsageError(
                f"{which} is a recording and the other is not: compare two recordings, or one "
                "graph of the recording ('DIR/recording.json#NAME', or its folder's "
                "graph-N.json) with the other"
            )
        flags = given_round_flags(args) + ["--from"] * (args.from_dir is not None)
        refuse(flags, "apply to variants, not to recordings: drop them")
        if args.step_key is not None and len(args.step_key) > 2:
            raise UsageError("--step-key takes one key for both recordings, or A's and B's")
        _check_outputs(args)
        return
    if args.step_key is not None:
        raise UsageError(
            "--step-key groups a recording's graphs into steps: it needs two recordings"
        )
    _check_variants(args)
    _check_outputs(args)
    for r in (args.a, args.b):
        if is_export_path(r):
            # a FIFO or folder refused now, never waited on
            check_input(split_ref(r)[0], "export file")


def _check_variants(args: argparse.Namespace) -> None:
    """A side that is not an export file is a variant of the round; the round's flags
    and --from only where a variant is counted."""
    variants = [r for r in (args.a, args.b) if not is_export_path(r)]
    for r in variants:
        if r not in VARIANTS:
            raise neither(r)
    if not variants:
        flags = given_round_flags(args) + ["--from"] * (args.from_dir is not None)
        refuse(flags, "apply to variants only, and both sides are export files: drop them")
    elif args.from_dir is not None:
        refuse(
            given_round_flags(args),
            "apply to counting, and the exports in --from carry their own round: drop them",
        )


def _check_outputs(args: argparse.Namespace) -> None:
    if args.costs is not None:
        check_input(args.costs, "--costs file")
    if args.csv == "-" and args.json:
        raise UsageError("--csv - and --json both write to stdout: give --csv a file")
    if args.csv and args.csv != "-":
        check_output(args.csv)  # refused now, not after counting
        _not_an_input(args)
    if args.families is not None:
        check_input(args.families, "rules file")  # read, and refused if it must be, in run


def _not_an_input(args: argparse.Namespace) -> None:
    """--csv must not replace what this run reads (an export, a dump, a recording's
    files, the rules or costs given) nor an output folder's manifest, which would disown
    the folder: refused before anything runs."""
    from graph_harness.reports.output.manifest import MANIFEST

    csv = Path(args.csv)
    if csv.name == MANIFEST:
        raise UsageError(
            f"--csv {args.csv} is an output folder's manifest (graph-harness's record of what "
            "it wrote there): give --csv another file"
        )
    folder = _output_folder_around(csv)
    if folder is not None:
        raise UsageError(
            f"--csv {args.csv} is inside {folder}, a graph-harness output folder (its "
            "manifest lists what the tool wrote there, and the next run replaces it): give "
            "--csv a path outside it"
        )
    if not csv.exists():
        return
    given = [split_ref(r)[0] for r in (args.a, args.b) if is_export_path(r) or is_recording(r)]
    if args.from_dir is not None:  # a variant read from --from DIR: DIR/nodes-VARIANT.json
        given += [args.from_dir / f"nodes-{r}.json" for r in (args.a, args.b) if r in VARIANTS]
    given += [f for f in (args.families, args.costs) if f is not None]
    for ref in given:
        for f in [ref, *_recording_files(ref)]:
            with contextlib.suppress(OSError):
                if os.path.samefile(csv, f):
                    raise UsageError(
                        f"--csv {args.csv} is {f}, which this run reads: give --csv another file"
                    )


def _output_folder_around(path: Path) -> Path | None:
    """The graph-harness output folder (one with a manifest) that holds `path`, as given
    or with its links followed, or None."""
    from graph_harness.reports.output.manifest import MANIFEST

    # as written (`o/../x.csv` is not in o), and as the links lead
    for where in (Path(os.path.abspath(path)).parent, Path(os.path.realpath(path)).parent):
        for folder in (where, *where.parents):
            with contextlib.suppress(OSError):
                if (folder / MANIFEST).is_file():
                    return folder
    return None


def _recording_files(ref: str) -> list[Path]:
    """The files a recording's graphs are read from, where `ref` may be one or its
    folder: its recording.json and every graph-<n>.json beside `ref` (a recording read
    by its schema may be renamed: `rec.json#NAME` reads them all)."""
    p = Path(ref)
    folder = p if p.is_dir() else p.parent
    return [folder / RECORDING_DOCUMENT, *folder.glob("graph-*.json")]


def export_for(ref: str, args: argparse.Namespace, io: IO) -> NodeExport:
    from graph_harness.capture import NodeExport, count_round

    if is_export_path(ref):
        return NodeExport.read_json(ref)  # an export, or one of count's output
    if args.from_dir is not None:
        f = args.from_dir / f"nodes-{ref}.json"
        if not f.exists() and not f.is_symlink():
            raise UsageError(
                f"{f} does not exist; run `graph-harness count --out {args.from_dir}` first"
            )
        check_input(f, "export file")  # a FIFO or folder there: refused, never waited on
        return NodeExport.read_json(f)
    io.err.print(f"capturing {ref} ...", style="dim")
    return count_round(round_params(args), ref).export


def run(args: argparse.Namespace, io: IO) -> int:
    from graph_harness.capture.patterns import matching_budget

    with matching_budget():  # every pass over the names (one per graph) draws on one deadline
        return _run(args, io)


def _run(args: argparse.Namespace, io: IO) -> int:
    from graph_harness.capture.advise.costs import Costs, builtin_costs
    from graph_harness.capture.advise.delta_price import price_delta
    from graph_harness.capture.export.delta import node_delta
    from graph_harness.capture.export.families import RULES, read_rules
    from graph_harness.capture.files import write_output

    check_flags(args)
    rules = RULES
    if args.families is not None:  # read (and refused, if it must be) before any count
        rules = read_rules(args.families)
    costs = Costs.read(args.costs) if args.costs is not None else builtin_costs()
    if is_recording(args.a):
        return run_recordings(args, io, rules, costs)
    banner(io, files=is_export_path(args.a) and is_export_path(args.b))
    d = node_delta(export_for(args.a, args, io), export_for(args.b, args, io), rules)
    if d.scoped_differently:
        io.note(d.scoped_differently)
    if args.families is not None and d.by_family is None:
        io.note(
            "--families not used: these are CPU dispatch counts, which name operators, not "
            "kernels (count both on a GPU for a delta by kernel family)"
        )
    # graph nodes are priced (dispatch per node); a CPU dispatch count is no graph's
    price = price_delta(d, costs, rules) if d.by_family is not None else None
    if price is None and args.costs is not None:
        io.note("--costs not used: these are CPU dispatch counts, not graph nodes")
    if io.json:
        io.print_json({**d.to_dict(), "price": None if price is None else price.to_dict()})
    else:
        _show(io, d, price)
    if args.csv:
        where = write_output(args.csv, d.by_kernel.to_csv(index=False))
        if where != "stdout":
            io.err.print(f"wrote the by-kernel delta to {where}", markup=False)
    return 0


def _show(io: IO, d: NodeDelta, price: DeltaPrice | None) -> None:
    """The delta as tables: its headline, the block its graphs repeat, the tables, and
    what it saves priced."""
    from graph_harness.reports.tables import delta_tables

    io.out.print(d.headline(), style="bold")
    if d.blocks_line():
        io.out.print(d.blocks_line(), markup=False)
    for t in delta_tables(d):
        io.out.print(t)
    if price is not None:
        io.out.print(price.line(d.a.unit), markup=False, soft_wrap=True)


def run_recordings(
    args: argparse.Namespace, io: IO, rules: tuple[FamilyRule, ...], costs: Costs
) -> int:
    from graph_harness.capture.advise.delta_price import price_recording
    from graph_harness.capture.files import write_output
    from graph_harness.capture.record.delta import recording_delta
    from graph_harness.capture.record.recording import Recording
    from graph_harness.reports.record_tables import recording_delta_tables

    keys = list(args.step_key or [None])
    keys = (keys[0], keys[-1])
    a, b = Recording.read(args.a), Recording.read(args.b)  # both checked before any output
    labels = (_label(args.a), _label(args.b))
    if labels[0] == labels[1]:
        labels = (labels[0] + " (A)", labels[1] + " (B)")
    d = recording_delta(a, b, labels=labels, step_keys=keys, rules=rules)
    price = price_recording(d, costs, rules)
    if d.total.scoped_differently:
        io.note(d.total.scoped_differently)
    for note in d.notes:
        io.note(note)
    if io.json:
        io.print_json({**d.to_dict(), "price": price.to_dict()})
    else:
        io.out.print(d.headline(), style="bold", markup=False)
        for t in recording_delta_tables(d):
            io.out.print(t)
        for line in price.lines():
            io.out.print(line, markup=False, soft_wrap=True)
    if args.csv:
        where = write_output(args.csv, d.total.by_kernel.to_csv(index=False))
        if where != "stdout":
            io.err.print(f"wrote the by-kernel delta over every graph to {where}", markup=False)
    return 0


def _label(ref: str) -> str:
    """A recording's name in tables: its folder's name."""
    p = Path(ref)
    return (p.parent if p.name == RECORDING_DOCUMENT else p).resolve().name or str(p)
