"""`graph-harness report`: all of it in one folder. For the built-in round: counts of every
variant, their deltas, and on a GPU the per-node costs, measured and predicted savings,
the in-round profile and its timeline. For --target: counts by module, the delta of two
targets, and on a GPU their profile (and check, with --check)."""

from __future__ import annotations

import argparse
from pathlib import Path

from graph_harness.capture.round.params import VARIANTS
from graph_harness.reports.cli.args import (
    check_arg,
    module_scopes_arg,
    out_args,
    positive,
    round_args,
    subcommand,
    timing_args,
    warmup_arg,
)
from graph_harness.reports.cli.console import (
    IO,
    UsageError,
    banner,
    command_line,
    given_round_flags,
    given_timing_flags,
    progress,
    refuse,
    replay_settings,
    round_params,
    staged,
)
from graph_harness.reports.cli.report_target import run_target_report, target_flags
from graph_harness.reports.cli.target import target_arg

DESCRIPTION = (
    "All of it into one folder: report.md (readable alone), a CSV of every "
    "table, the JSON exports and PNG plots. For the built-in round: counts of every "
    "variant, their deltas, and on a GPU the per-node costs, measured and predicted "
    "savings, the in-round profile and its timeline. For --target: counts by module, "
    "the delta of two targets, and on a GPU their profile."
)
EXAMPLES = [
    "graph-harness report --out report",
    "graph-harness report --recording rec --out rec-report",
    "graph-harness report --graph before.dot --graph after.dot --out change",
    "graph-harness report --target examples/llama_decode.py:make_step --check "
    "--module-scopes --out llama",
]


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = subcommand(
        sub,
        "report",
        common,
        help="counts, deltas, replays and plots into one folder",
        description=DESCRIPTION,
        examples=EXAMPLES,
        gpu_examples=[  # a compiled step is counted on CUDA only (capture/graph/compiled.py)
            "graph-harness report --target examples/llama_decode.py:make_step "
            "--target examples/llama_decode.py:make_compiled_step --out llama",
        ],
        variants=True,
    )
    p.add_argument(
        "--target",
        action="append",
        metavar="MODULE:FUNCTION",
        type=target_arg,
        help="report on your own step instead of the round (IMPORTS AND RUNS your code, as "
        "count --target); give two for their delta (the first is A)",
    )
    module_scopes_arg(p)
    warmup_arg(p)
    check_arg(p)
    p.add_argument(
        "--recording",
        type=Path,
        metavar="DIR",
        help="report on a recording (`graph-harness record --out DIR`): its graphs by key "
        "with nodes, replays and pool memory, those never replayed, by module, and plots",
    )
    p.add_argument(
        "--graph",
        action="append",
        metavar="FILE",
        help="report on a graph dump (.dot: cudaGraphDebugDotPrint's, any program's) or a "
        "node export instead: nodes by type, kernel family and kernel, the block its nodes "
        "repeat; give two for their delta (the first is A)",
    )
    p.add_argument(
        "--sizes",
        nargs="+",
        type=positive(1),
        metavar="B",
        help="with one --target: also capture it at these batch sizes, as `graph-harness "
        "sweep` does (FUNCTION(batch=B)), and add the sweep to the report",
    )
    p.add_argument(
        "--requests",
        action="append",
        metavar="FILE|DIST",
        help="with --sizes: the batch sizes your server sees, as sweep's --requests",
    )
    round_args(p)
    timing_args(p)
    out_args(p, required=True)


def _of_targets(args: argparse.Namespace) -> bool:
    """Whether the flags ask for a --target report (run_target_report)."""
    return bool(
        args.target
        or args.module_scopes is not False
        or args.step_warmup is not None
        or args.check
        or args.check_steps is not None
        or args.sizes
        or args.requests
    )


def check_early(args: argparse.Namespace) -> None:
    """The flags checked before torch is imported (reports/cli/program.py): they need none."""
    if args.recording is not None:
        _recording_flags(args)
    elif args.graph:
        _graph_flags(args)
    elif _of_targets(args):
        target_flags(args)
    else:
        round_params(args)
        replay_settings(args)


def run(args: argparse.Namespace, io: IO) -> int:
    import torch

    if args.recording is not None:
        return run_recording_report(args, io)
    if args.graph:
        return run_graph_report(args, io)
    if _of_targets(args):
        return run_target_report(args, io)
    from graph_harness.capture.commands import round_report
    from graph_harness.reports.report import write_report

    params, settings = round_params(args), replay_settings(args)
    if not torch.cuda.is_available() and given_timing_flags(args):
        io.note(
            f"{', '.join(given_timing_flags(args))} not used: without a CUDA device "
            "the report has counts only, no replays"
        )
    with staged(args, io) as tmp:
        banner(io)
        with progress(io) as say:
            got = round_report(params, list(VARIANTS), settings, progress=say)
            say("writing the report (tables, CSVs, plots)")
            write_report(
                tmp,
                got.exports,
                got.replay,
                command=command_line(),
                skipped=got.skipped,
                profile=got.profile,
                exact=got.exact,
            )
    io.err.print(f"wrote {args.out / 'report.md'}", markup=False)
    return 0


def capture_flags(args: argparse.Namespace) -> list[str]:
    """The flags given that only a capture (the round, or --target) uses: what a report
    read from files (--graph, --recording) refuses."""
    flags = given_round_flags(args) + given_timing_flags(args)
    flags += ["--target"] * bool(args.target) + ["--sizes"] * bool(args.sizes)
    flags += ["--requests"] * bool(args.requests) + ["--check"] * bool(args.check)
    flags += ["--warmup"] * (args.step_warmup is not None)
    return flags + ["--module-scopes"] * (args.module_scopes is not False)


def _graph_flags(args: argparse.Namespace) -> None:
    flags = capture_flags(args) + ["--recording"] * (args.recording is not None)
    refuse(flags, "apply to a capture, not to --graph files: drop them")
    if len(args.graph) > 2:
        raise UsageError(f"report takes one --graph, or two for their delta; got {len(args.graph)}")


def _recording_flags(args: argparse.Namespace) -> None:
    flags = capture_flags(args) + ["--graph"] * bool(args.graph)
    refuse(flags, "apply to a step or the round, not to --recording: drop them")


def run_graph_report(args: argparse.Namespace, io: IO) -> int:
    from graph_harness.reports.cli.refs import read_files
    from graph_harness.reports.target_report import write_target_report

    _graph_flags(args)
    names, exports = read_files(args.graph)  # every file read before anything is written
    with staged(args, io) as tmp:
        banner(io, files=True)
        write_target_report(tmp, dict(zip(names, exports)), command=command_line(), depth=None)
        # what the report found, in one line each (before the commit, as every command)
        for n, e in zip(names, exports):
            io.out.print(f"{n}: {e.total} nodes", markup=False)
        if len(exports) == 2:
            from graph_harness.capture.export.delta import node_delta

            io.out.print(node_delta(*exports).headline(), markup=False)
    io.err.print(f"wrote {args.out / 'report.md'}", markup=False)
    return 0


def run_recording_report(args: argparse.Namespace, io: IO) -> int:
    from graph_harness.capture.record.recording import Recording
    from graph_harness.reports.recording_report import write_recording

    _recording_flags(args)
    from graph_harness.reports.record_tables import headline

    rec = Recording.read(args.recording)  # checked whole before anything is written
    if not rec.graphs:
        raise UsageError(
            f"{args.recording} holds no graph ({headline(rec)}), so there is nothing to "
            "report (a program recorded without CUDA runs eagerly and captures none)"
        )
    with staged(args, io) as tmp:
        write_recording(tmp, rec, command=command_line())
        io.out.print(headline(rec), markup=False)  # before the commit, as every command
    io.err.print(f"wrote {args.out / 'report.md'}", markup=False)
    return 0
