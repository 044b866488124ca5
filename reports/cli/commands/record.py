"""`graph-harness record -- PROGRAM`: every CUDA graph a Python program captures, in every
process it starts, recorded without editing the program (capture/record/)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from graph_harness.reports.cli.args import (
    json_arg,
    module_scopes_arg,
    out_args,
    positive,
    subcommand,
)
from graph_harness.reports.cli.console import IO, staged
from graph_harness.reports.cli.prefetch import prefetched

# main imports no torch nor Triton for this command (reports/cli/program.py): the program
# imports its own, and its recording is read, shown and written without them
RUNS_WITHOUT_TORCH = True

if TYPE_CHECKING:
    from pathlib import Path

    from graph_harness.capture.record.recording import Recording


DESCRIPTION = (
    "Run a Python program or module unchanged (give it after --) and record "
    "every CUDA graph it captures through PyTorch (torch.cuda.graph, "
    "make_graphed_callables, Inductor's reduce-overhead trees, engines built on them), "
    "in every process it starts: each graph's nodes by type, kernel and scope, its key, "
    "capture site, pool and replays, and the graphs captured but never replayed. The "
    "program's output, behaviour and exit code are its own; graph-harness exits with "
    "the program's exit code."
)
EXAMPLES = [
    "graph-harness record -- python serve.py --model m",
    "graph-harness record --module-scopes --out rec -- -m my.server",
    "graph-harness record --key examples/tiny_engine.py:record_key -- "
    "examples/tiny_engine.py --piecewise",
]


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = subcommand(
        sub,
        "record",
        common,
        help="run a program and record every CUDA graph it captures",
        description=DESCRIPTION,
        examples=EXAMPLES,
    )
    module_scopes_arg(
        p,
        help="attribute nodes to the modules running in each capture, named in the "
        "outermost module running (model.layers.3.self_attn); compiled code by Inductor's "
        "provenance. Every level is recorded; the tables show DEPTH parts of the name "
        "('all': every level; default: one row per repeated block)",
    )
    p.add_argument(
        "--key",
        metavar="MODULE:FUNCTION",
        help="an engine's key adapter: FUNCTION(ctx) names each graph as the engine does "
        "(its batch descriptor); also found as entry points in the group "
        "graph_harness.record_keys",
    )
    _check_args(p)
    p.add_argument(
        "--no-pool-memory",
        dest="pool_memory",
        action="store_false",
        help="do not read each graph's pool from the caching allocator after its capture",
    )
    p.add_argument(
        "--no-read-names",
        dest="read_names",
        action="store_false",
        help="do not name a graph that no key names by the shapes its region reads (a "
        "Python call per operator at capture; then named by arguments and order)",
    )
    p.add_argument(
        "--top",
        type=positive(1),
        default=40,
        metavar="N",
        help="rows of the graphs table (default 40; --out keeps every graph)",
    )
    json_arg(p, "the recording")
    out_args(p)
    p.add_argument(
        "program",
        nargs=argparse.REMAINDER,
        metavar="-- PROGRAM [ARGS ...]",
        help="the program: `python script.py ...`, `-m module ...`, `script.py ...`, or "
        "any command that starts Python (a console script, torchrun)",
    )


def _check_args(p: argparse.ArgumentParser) -> None:
    """The live check's flags: --check, the engine's --eager adapter, the replays sampled."""
    p.add_argument(
        "--check",
        action="store_true",
        help="check each graph while the program runs: at a sample of its replays, compare "
        "what the replay computed with what its captured code computes eagerly from the same "
        "inputs and state (Inductor's trees and make_graphed_callables without help; other "
        "sites through --eager), leaving the program the state its replay left. Exit 1 when a "
        "graph differs (or trips a device-side assertion) and the program itself exited 0; "
        "3 when a replayed graph could not be checked",
    )
    p.add_argument(
        "--eager",
        metavar="MODULE:FUNCTION",
        help="with --check: an engine's eager-form adapter: FUNCTION(ctx) returns a "
        "graph_harness.capture.EagerForm (the callable captured, its arguments, what it "
        "mutates, its outputs) for a capture it knows, or None",
    )
    p.add_argument(
        "--check-sample",
        metavar="FIRST[,RATIO]",
        default="8,2",
        help="with --check: the replays checked: every one up to FIRST, then each RATIO "
        "times the last checked (default 8,2)",
    )


def check_flags(args: argparse.Namespace) -> list[str]:
    """The program's arguments; usage errors for what cannot work, before it runs or
    anything is written (--key made absolute where it names a file)."""
    from graph_harness.capture.record.program import check_program, program_path

    program = list(args.program)
    if program[:1] == ["--"]:
        program = program[1:]
    check_program(program)
    if args.key is not None:
        from graph_harness.capture.record.keys import check_spec

        args.key = check_spec(args.key, program_path(program))
    if (args.eager is not None or args.check_sample != "8,2") and not args.check:
        from graph_harness.capture.errors import UsageError

        raise UsageError("--eager and --check-sample go with --check")
    if args.check:
        from graph_harness.capture.live.sample import Sample
        from graph_harness.capture.record.keys import check_spec

        Sample.parse(args.check_sample)
        if args.eager is not None:
            args.eager = check_spec(args.eager, program_path(program), flag="--eager")
    return program


def run(args: argparse.Namespace, io: IO) -> int:
    from graph_harness.capture.record.process import RecordOptions
    from graph_harness.capture.record.program import run_program
    from graph_harness.capture.results import results_descriptor
    from graph_harness.reports.output.commit import OutputConflict
    from graph_harness.reports.record_tables import program_line

    program = check_flags(args)
    options = RecordOptions(
        module_scopes=args.module_scopes is not False,
        key=args.key,
        pool_memory=args.pool_memory,
        read_names=args.read_names,
        check=args.check,
        eager=args.eager,
        check_sample=args.check_sample,
    )
    rec = None
    try:
        with staged(args, io) as tmp:
            io.err.print(f"graph-harness record: running {program_line(program)}", markup=False)
            # the program's stdout is the real one (descriptor 1 is stderr while a command
            # runs); with --json, stderr: stdout holds the one document
            with prefetched(_needed_after(args)):
                rec = run_program(program, options, stdout=2 if io.json else results_descriptor(1))
            if not rec.graphs and not _cuda():
                io.note("without CUDA the program ran eagerly and could capture no graph")
            # the tables first: the program ran, and a full disk must not take them too
            show(io, rec, depth=_depth(args, rec), top=args.top)
            if tmp is not None:
                _write(tmp, rec, io, args.out)
    except OSError as e:
        from graph_harness.capture.paths import no_room

        if rec is None or not no_room(e):
            raise
        io.note(
            f"no room for the recording in {args.out} ({_failed(e)}): nothing of it was "
            "kept there, and the tables above are all that is left of it. Free some space "
            "(or give --out on another disk) and run the program again; --json > FILE "
            "keeps the recording in one file"
        )
        return checked_status(rec, exit_status(rec.exit_code))
    except OutputConflict as e:  # the recording was kept beside it: the program's code stands
        if rec is None:
            raise
        io.note(str(e))
        return checked_status(rec, exit_status(rec.exit_code))
    if args.out is not None:
        io.err.print(f"wrote the recording to {args.out}", markup=False)
    return checked_status(rec, exit_status(rec.exit_code))


def _needed_after(args: argparse.Namespace) -> list[str]:
    """What the tables and files import once the program has run: pandas (the modules
    table, the report's CSVs) and matplotlib (the report's plot)."""
    names = []
    if args.module_scopes is not False or args.out is not None:
        names.append("graph_harness.reports.tables")
    if args.out is not None:
        names += ["graph_harness.reports.recording_report", "matplotlib.pyplot"]
    return names


def _write(folder: Path, rec: Recording, io: IO, out: Path) -> None:
    """The recording into `folder`, all of it or nothing (recording.json and each
    graph's export: what `report --recording` reads); then its report, which that makes
    again: a disk that fills while it is written keeps what fitted, and says so."""
    from graph_harness.capture.paths import no_room
    from graph_harness.reports.recording_report import REPORT_FILES, write_report

    rec.write(folder)
    try:
        write_report(folder, rec, command=_command())
    except OSError as e:
        if not no_room(e):
            raise
        kept = [n for n in REPORT_FILES if (folder / n).is_file()]
        also = f", and {', '.join(kept)}" if kept else ""
        io.note(
            f"no room for all of the recording's report in {out} ({_failed(e, folder, out)}): "
            "it holds "
            f"the recording (recording.json and each graph's export){also}; "
            f"`graph-harness report --recording {out} --out DIR` writes the report where "
            "there is room"
        )


def _failed(e: OSError, folder: Path | None = None, out: Path | None = None) -> str:
    """What failed, in words: the reason and the file, a file of the hidden `folder`
    named in `out` as the user named it (staged_output names them so once it is done)."""
    from graph_harness.capture.paths import os_reason

    name = e.filename
    if folder is not None and isinstance(name, str) and name.startswith(f"{folder}/"):
        name = f"{out}/{name[len(str(folder)) + 1 :]}"
    return os_reason(e) + (f", writing {name}" if name else "")


def checked_status(rec: Recording, code: int) -> int:
    """With --check, the program's own non-zero exit code stands; after a clean exit, 1
    when a graph differs or tripped an assertion, 3 when a replayed graph could not be
    checked (or its eager runs could not be judged), else 0."""
    if not rec.options.check or code != 0:
        return code
    verdicts = [g.check for g in rec.graphs if g.check is not None and g.replays]
    # "skipped" (nothing to compare by design: a backward graph) is no doubt
    if any(v.status in ("differs", "assert") for v in verdicts):
        return 1
    if any(v.status in ("not checked", "not verified") for v in verdicts):
        return 3
    return 0


def _cuda() -> bool:
    """Whether this machine has a CUDA device the program could have captured on (asked
    of the driver: this process imports no torch)."""
    from graph_harness.capture.environment import cuda_device_seen

    return cuda_device_seen()


def _command() -> str:
    from graph_harness.reports.cli.console import command_line

    return command_line()


def _depth(args: argparse.Namespace, rec: Recording) -> int | None:
    from graph_harness.reports.cli.args import shown_depth

    exports = [g.export for g in rec.graphs if g.export is not None]
    return shown_depth(args.module_scopes, exports) if exports else None


def exit_status(code: int | None) -> int:
    """The program's exit code as a shell gives it (killed by signal N: 128 + N)."""
    if code is None:
        return 1
    return 128 - code if code < 0 else code


def show(io: IO, rec: Recording, *, depth: int | None, top: int | None) -> None:
    from graph_harness.reports.record_tables import (
        check_lines,
        graphs_table,
        headline,
        modules_table,
        most_replayed_lines,
        never_replayed_lines,
        process_lines,
        recaptured_lines,
    )

    for line in process_lines(rec):
        io.note(line)
    if io.json:
        io.print_json(rec.to_dict(inline=True))
        return
    io.out.print(headline(rec), markup=False)
    if not rec.graphs:
        return
    io.out.print(graphs_table(rec, top=top))
    lines = never_replayed_lines(rec) + recaptured_lines(rec) + most_replayed_lines(rec)
    for line in lines + check_lines(rec):
        io.out.print(line, markup=False, soft_wrap=True)
    if rec.options.module_scopes:
        io.out.print(modules_table(rec, depth))
