"""The graph-harness command line: count, delta, replay, report.

Streams: results (tables, or one JSON document with --json) on stdout; the banner,
progress, notes, warnings and errors on stderr, so `graph-harness count --json | jq` works.
Exit codes: 0 success; 2 a usage error (our flags, arguments and input files); 1 anything
raised by the user's code (--target) or the runtime, in one line with the exception's type
and where it came from (--debug for the traceback); 128+n on SIGHUP (129), SIGINT (130)
and SIGTERM (143), with nothing partial left and an earlier output kept as it was.
Output folders follow reports/output.py: built aside, swapped in, never a user's data lost.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import shlex
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from capture.params import VARIANTS, RoundParams

ROUND_FIELDS = tuple(f.name for f in dataclasses.fields(RoundParams))
COUNT_SCHEMA = "graph-harness/count"


class UsageError(Exception):
    """Bad flags or arguments: exit code 2."""


class Terminated(BaseException):
    """SIGTERM or SIGHUP, raised where the program is so that cleanup runs (as Ctrl-C's
    KeyboardInterrupt does)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@dataclass
class IO:
    out: Console  # results
    err: Console  # everything a person reads about the run
    json: bool = False
    target_root: Path | None = None  # where the user's code lives, to point at its frames

    def note(self, text: str) -> None:
        self.err.print(f"graph-harness: {text}", soft_wrap=True, markup=False)


def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("graph-harness")
    except PackageNotFoundError:  # run from a source tree without installing
        return "unknown (not installed)"


# --- the parser -------------------------------------------------------------------------


def _round_args(p: argparse.ArgumentParser) -> None:
    d = RoundParams()  # the one source of defaults; None here means "not given"
    g = p.add_argument_group("round parameters (the built-in decode round)")
    for f in dataclasses.fields(RoundParams):
        g.add_argument(
            f"--{f.name}", type=int, default=None, help=f"(default {getattr(d, f.name)})"
        )


def _positive(minimum: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = minimum - 1
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected a whole number >= {minimum}, got {text!r}")
        return value

    return parse


def _out_args(p: argparse.ArgumentParser, required: bool = False) -> None:
    p.add_argument(
        "--out",
        type=Path,
        required=required,
        help="output folder: new, empty, or one graph-harness wrote before (then with --force)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="replace an output folder graph-harness wrote (never any other folder)",
    )


def _json_arg(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument(
        "--json", action="store_true", help=f"print {what} as one JSON document on stdout"
    )


def _timing_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--trials", type=_positive(2), default=None, help="timed trials (default 30)")
    p.add_argument(
        "--builds",
        type=_positive(1),
        default=None,
        help="times each round is built afresh for timing (its buffers land elsewhere each "
        "time; savings pool the builds). Default 3",
    )


def build_parser() -> argparse.ArgumentParser:
    from capture.replay import CHAIN_KINDS, DEFAULT_LENGTHS, PDL_KINDS

    # --debug goes before or after the subcommand; SUPPRESS keeps the sub-parser's default
    # from overwriting a --debug given before it.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks"
    )
    ap = argparse.ArgumentParser(
        prog="graph-harness",
        parents=[common],
        description="Capture LLM decode rounds into CUDA graphs, count every node, and "
        "price each node in time.",
    )
    ap.add_argument("--version", action="version", version=f"graph-harness {version()}")
    sub = ap.add_subparsers(dest="command", required=True)

    c = sub.add_parser(
        "count", parents=[common], help="capture the decode round (or --target) and count nodes"
    )
    _round_args(c)
    c.add_argument(
        "--variant",
        action="append",
        choices=list(VARIANTS),
        help="variant to count; repeat for several (default: all)",
    )
    c.add_argument(
        "--target",
        metavar="MODULE:FUNCTION",
        help="count your own step instead. IMPORTS AND RUNS your code: the module (by name, "
        "the current folder searched last, or as path/to/file.py), then FUNCTION(), which "
        "returns the zero-argument step to capture",
    )
    c.add_argument(
        "--pdl",
        action="store_true",
        help="launch the harness's Triton kernels with programmatic dependent launch",
    )
    c.add_argument("--per-stage", action="store_true", help="print each variant's stage table")
    c.add_argument(
        "--distributed",
        action="store_true",
        help="one process per rank under torchrun: a real all-gather (NCCL on "
        "GPUs, gloo on CPU); world and rank come from the process group",
    )
    _json_arg(c, "the exports")
    _out_args(c)

    d = sub.add_parser("delta", parents=[common], help="node delta between two exports or variants")
    for side in ("a", "b"):
        d.add_argument(
            side,
            help="a variant by name (shipped, fused, ...) or an export file by path (a path "
            "holds a '/' or ends in .json: ./shipped is a file, shipped the variant)",
        )
    d.add_argument(
        "--from",
        dest="from_dir",
        type=Path,
        help="read variants from this `count --out` folder instead of counting",
    )
    _round_args(d)
    d.add_argument("--csv", help="write the by-kernel delta as CSV here ('-' for stdout)")
    _json_arg(d, "the delta")

    r = sub.add_parser(
        "replay", parents=[common], help="per-node dispatch cost and before/after round timing"
    )
    _round_args(r)
    r.add_argument(
        "--kind",
        action="append",
        choices=list(CHAIN_KINDS + PDL_KINDS),
        help="chain kind; repeat for several (default: all but the PDL ones). torch-add "
        "and memcpy are always measured: the round savings price nodes with them",
    )
    r.add_argument("--lengths", type=_positive(1), nargs="+", default=list(DEFAULT_LENGTHS))
    r.add_argument(
        "--variant", action="append", choices=list(VARIANTS), help="round to time (default: all)"
    )
    r.add_argument("--pdl", action="store_true", help="rounds with programmatic dependent launch")
    _timing_args(r)
    _json_arg(r, "the replay document")
    _out_args(r)

    p = sub.add_parser(
        "report", parents=[common], help="counts, deltas, replays and plots into one folder"
    )
    _round_args(p)
    _timing_args(p)
    _out_args(p, required=True)
    return ap


# --- shared pieces ----------------------------------------------------------------------------


def banner(io: IO) -> None:
    import torch

    from capture import default_device

    try:
        import triton

        tv = triton.__version__
    except ImportError:
        tv = "absent"
    if default_device().type == "cuda":
        where = f"GPU {torch.cuda.get_device_name()} (CUDA {torch.version.cuda})"
        source = "cuda-graph: nodes read from the captured graph"
    else:
        where = "CPU (no CUDA device)"
        source = "cpu-dispatch: dispatched ops counted, NOT graph nodes"
    io.err.print(
        f"[bold]graph-harness[/] | {where} | torch {torch.__version__} | "
        f"triton {tv} | counts: {source}"
    )


def _given_round_flags(args) -> list[str]:
    return [f"--{n}" for n in ROUND_FIELDS if getattr(args, n, None) is not None]


def _params(args, **override) -> RoundParams:
    given = {n: getattr(args, n) for n in ROUND_FIELDS if getattr(args, n, None) is not None}
    try:
        return RoundParams(**{**given, **override})
    except ValueError as e:
        raise UsageError(str(e)) from e


def _refuse(flags: list[str], why: str) -> None:
    """Flags that do not combine: one line naming them (`why` starts with a verb)."""
    if flags:
        verb, rest = why.split(" ", 1)
        if len(flags) == 1:
            verb = {"apply": "applies", "carry": "carries"}.get(verb, verb)
        raise UsageError(f"{', '.join(flags)} {verb} {rest}")


def _command_line() -> str:
    return "graph-harness " + " ".join(shlex.quote(a) for a in sys.argv[1:])


def _print_json(io: IO, doc) -> None:
    io.out.file.write(json.dumps(doc, indent=1) + "\n")
    io.out.file.flush()


def _staged(args, io: IO):
    from reports.output import staged_output

    return staged_output(args.out, args.force, command=_command_line(), say=io.note)


def _wrote(io: IO, args, what: str) -> None:
    if args.out is not None:
        io.err.print(f"wrote {what} to {args.out}", markup=False)


# --- count ---------------------------------------------------------------------------------------


def _check_count_flags(args) -> None:
    if args.json and args.per_stage:
        raise UsageError("--per-stage shapes the tables, which --json replaces: drop one")
    if args.target:
        flags = _given_round_flags(args)
        flags += ["--variant"] * bool(args.variant) + ["--pdl"] * args.pdl
        flags += ["--per-stage"] * args.per_stage + ["--distributed"] * args.distributed
        _refuse(flags, "apply to the built-in round, not to --target: drop them")


def cmd_count(args, io: IO) -> int:
    _check_count_flags(args)
    if args.distributed:
        return cmd_count_distributed(args, io)
    from capture import capture_and_count, count_round

    if args.target:
        from reports.target import TargetError, load_target

        names, params = ["target"], None
    else:
        names, params = args.variant or list(VARIANTS), _params(args)
    with _staged(args, io) as tmp:
        banner(io)
        exports = []
        if args.target:
            target = load_target(args.target)
            io.target_root = target.root
            exports.append(capture_and_count(target.step))
            if exports[0].total == 0:
                raise TargetError(
                    f"--target {args.target!r}: its step issued no work (0 nodes); it must "
                    "launch the work to count, not only prepare it"
                )
        else:
            for v in names:
                io.err.print(f"capturing {v} ...", style="dim")
                exports.append(count_round(params, v, pdl=args.pdl).export)
        if tmp is not None:
            for name, e in zip(names, exports):
                e.write_json(tmp / f"nodes-{name}.json")
                e.write_dot(tmp / f"graph-{name}.dot")
    _show_counts(io, dict(zip(names, exports)), per_stage=args.per_stage)
    _wrote(io, args, f"{len(exports)} exports")
    return 0


def _show_counts(io: IO, exports: dict, *, per_stage: bool) -> None:
    from reports.tables import per_stage_table, totals_table

    if io.json:
        _print_json(
            io,
            {
                "schema": COUNT_SCHEMA,
                "schema_version": 1,
                "exports": {k: e.to_dict() for k, e in exports.items()},
            },
        )
        return
    io.out.print(totals_table(list(exports.values())))
    first = list(exports.values())
    for e in first if per_stage else first[:1]:
        io.out.print(per_stage_table(e))


def cmd_count_distributed(args, io: IO) -> int:
    import torch.distributed as dist

    from capture.distributed import init_from_env

    setup = init_from_env()
    try:
        for name, mine in (("world", setup.world), ("rank", setup.rank)):
            given = getattr(args, name)
            if given is not None and given != mine:
                raise UsageError(
                    f"--{name} {given} but the process group says {mine}: under --distributed "
                    f"the {name} comes from torchrun; drop --{name}"
                )
        params = _params(args, world=setup.world, rank=setup.rank)
        lead = setup.rank == 0
        with _staged(args, io) if lead else _nothing() as tmp:
            exports = _count_distributed(args, io, setup, params, tmp)
        if lead:
            _show_distributed(io, *exports)
            _wrote(io, args, "the exports of every rank")
        dist.barrier()
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    return 0


def _nothing():
    from contextlib import nullcontext

    return nullcontext()


def _count_distributed(args, io, setup, params, tmp):
    import torch.distributed as dist

    from capture import NodeExport
    from capture.distributed import count_distributed

    lead = setup.rank == 0
    if lead:
        banner(io)
        io.err.print(f"distributed: world {setup.world}, backend {setup.backend}")
    names = args.variant or list(VARIANTS)
    mine = [count_distributed(params, v, setup, pdl=args.pdl).export for v in names]
    gathered = [None] * setup.world if lead else None
    dist.gather_object([e.to_dict() for e in mine], gathered, dst=0)
    if not lead:
        return None, None
    per_rank = [[NodeExport.from_dict(d) for d in docs] for docs in gathered]
    if tmp is not None:
        for r in range(setup.world):
            for v, e in zip(names, per_rank[r]):
                e.write_json(tmp / f"nodes-{v}-rank{r}.json")
    return names, per_rank


def _show_distributed(io: IO, names, per_rank) -> None:
    from capture.distributed import merge
    from reports.tables import totals_table

    if io.json:
        exports = {
            f"{v}-rank{r}": per_rank[r][i]
            for r in range(len(per_rank))
            for i, v in enumerate(names)
        }
        _show_counts(io, exports, per_stage=False)
        return
    io.out.print(totals_table([per_rank[0][i] for i in range(len(names))]))
    for i, v in enumerate(names):
        m = merge([per_rank[r][i] for r in range(len(per_rank))])
        verdict = "same structure on every rank" if m.same_structure else m.first_difference
        io.out.print(f"{v}: nodes per rank {m.totals}; {verdict}", markup=False)


# --- delta --------------------------------------------------------------------------------------


def is_export_path(ref: str) -> bool:
    """The rule for `delta A B`: a path holds a separator or ends in .json; anything else
    is a variant name (so a file named `shipped` in the current folder is `./shipped`)."""
    return ref.endswith(".json") or "/" in ref or (os.altsep or "/") in ref or os.sep in ref


def _check_delta_flags(args) -> None:
    variants = [r for r in (args.a, args.b) if not is_export_path(r)]
    for r in variants:
        if r not in VARIANTS:
            raise UsageError(
                f"{r!r} is neither a variant ({', '.join(VARIANTS)}) nor an export file path "
                f"(a path holds a '/' or ends in .json: ./{r} for a file here)"
            )
    if not variants:
        flags = _given_round_flags(args) + ["--from"] * (args.from_dir is not None)
        _refuse(flags, "apply to variants only, and both sides are export files: drop them")
    elif args.from_dir is not None:
        _refuse(
            _given_round_flags(args),
            "apply to counting, and the exports in --from carry their own round: drop them",
        )


def _export_for(ref: str, args, io: IO):
    from capture import NodeExport, count_round

    if is_export_path(ref):
        return NodeExport.read_json(Path(ref))
    if args.from_dir is not None:
        f = args.from_dir / f"nodes-{ref}.json"
        if not f.is_file():
            raise UsageError(
                f"{f} does not exist; run `graph-harness count --out {args.from_dir}` first"
            )
        return NodeExport.read_json(f)
    io.err.print(f"capturing {ref} ...", style="dim")
    return count_round(_params(args), ref).export


def cmd_delta(args, io: IO) -> int:
    from capture.files import write_output
    from reports.delta import node_delta
    from reports.tables import delta_tables

    _check_delta_flags(args)
    if args.csv == "-" and args.json:
        raise UsageError("--csv - and --json both write to stdout: give --csv a file")
    banner(io)
    a, b = _export_for(args.a, args, io), _export_for(args.b, args, io)
    d = node_delta(a, b)
    if io.json:
        _print_json(io, d.to_dict())
    else:
        io.out.print(f"[bold]{d.headline()}[/]")
        for t in delta_tables(d):
            io.out.print(t)
    if args.csv:
        where = write_output(args.csv, d.by_kernel.to_csv(index=False))
        if where != "stdout":
            io.err.print(f"wrote the by-kernel delta to {where}", markup=False)
    return 0


# --- replay and report ----------------------------------------------------------------------------


def _progress(io: IO):
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=io.err,
        transient=True,
    )


def _require_cuda(what: str) -> None:
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError(
            f"{what} times CUDA graph replays and needs a CUDA device; "
            "none here (use `graph-harness count` for CPU dispatch counts)"
        )


def _timing(args) -> dict:
    return {k: v for k in ("trials", "builds") if (v := getattr(args, k)) is not None}


def cmd_replay(args, io: IO) -> int:
    from capture.replay import CHAIN_KINDS, run_replays
    from reports.tables import fits_table, savings_table

    params = _params(args)
    _require_cuda("replay")
    with _staged(args, io) as tmp:
        banner(io)
        with _progress(io) as prog:
            task = prog.add_task("capturing chains", total=None)
            result = run_replays(
                params,
                args.variant or list(VARIANTS),
                kinds=args.kind or CHAIN_KINDS,
                lengths=args.lengths,
                pdl=args.pdl,
                progress=lambda m: prog.update(task, description=m),
                **_timing(args),
            )
        if tmp is not None:
            result.write_json(tmp / "replay.json")
    if io.json:
        _print_json(io, result.to_dict())
    else:
        io.out.print(fits_table(result.fits))
        if result.savings is not None:
            io.out.print(savings_table(result))
    _wrote(io, args, "replay.json")
    return 0


def cmd_report(args, io: IO) -> int:
    import torch

    from capture import count_round
    from capture.replay import run_replays
    from reports.report import write_report

    params = _params(args)
    cuda = torch.cuda.is_available()
    if not cuda and _timing(args):
        io.note(
            f"{', '.join('--' + k for k in _timing(args))} not used: without a CUDA device "
            "the report has counts only, no replays"
        )
    with _staged(args, io) as tmp:
        banner(io)
        with _progress(io) as prog:
            task = prog.add_task("counting", total=None)
            exports = {}
            for v in VARIANTS:
                prog.update(task, description=f"counting {v}")
                exports[v] = count_round(params, v).export
            replay, skipped = None, "no CUDA device on this machine"
            if cuda:
                replay = run_replays(
                    params,
                    list(VARIANTS),
                    progress=lambda m: prog.update(task, description=m),
                    **_timing(args),
                )
                skipped = None
        write_report(tmp, exports, replay, command=_command_line(), skipped=skipped)
    io.err.print(f"wrote {args.out / 'report.md'}", markup=False)
    return 0


COMMANDS = {"count": cmd_count, "delta": cmd_delta, "replay": cmd_replay, "report": cmd_report}


# --- main: streams, signals, exit codes ---------------------------------------------------


def _usage_errors() -> tuple[type[BaseException], ...]:
    from capture import ExportError
    from capture.files import OutputPathError
    from reports.delta import DeltaError
    from reports.output import OutputRefused
    from reports.target import TargetUsageError

    return (UsageError, ExportError, DeltaError, OutputRefused, OutputPathError, TargetUsageError)


def _raise_terminated(signum, frame):
    raise Terminated(signum)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    debug = getattr(args, "debug", False)
    # Piped into a log or CI, rich would squeeze tables into 80 columns and cut headers
    # and figures to "..."; COLUMNS still wins when set.
    wide = "COLUMNS" not in os.environ
    io = IO(
        out=Console(file=sys.stdout, width=160 if wide and not sys.stdout.isatty() else None),
        err=Console(stderr=True, width=160 if wide and not sys.stderr.isatty() else None),
        json=getattr(args, "json", False),
    )
    handlers = {}
    for s in (signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(ValueError):  # not the main thread: leave signals be
            handlers[s] = signal.signal(s, _raise_terminated)
    try:
        return COMMANDS[args.command](args, io)
    except KeyboardInterrupt:
        io.note("interrupted; no partial output was left")
        return 128 + signal.SIGINT
    except Terminated as e:
        io.note(f"stopped by {e}; no partial output was left")
        return 128 + e.signum
    except BrokenPipeError:
        # The reader of stdout went away (`| head`): stop quietly, as a Unix tool does.
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    except Exception as e:
        if debug:
            raise
        return _report_error(io, args, e)
    finally:
        for s, h in handlers.items():
            signal.signal(s, h)


def _report_error(io: IO, args, e: Exception) -> int:
    from reports.target import origin

    first = str(e).splitlines()[0] if str(e) else ""
    if isinstance(e, _usage_errors()):
        io.err.print(f"[red]graph-harness {args.command}: error:[/] ", end="", soft_wrap=True)
        io.err.print(first, soft_wrap=True, markup=False)
        return 2
    cause = e.__cause__ if e.__cause__ is not None and io.target_root is not None else e
    where = origin(cause, io.target_root)
    text = f"{type(e).__name__}: {first}" if first else type(e).__name__
    if where:
        text += f" [raised at {where}]"
    io.err.print(f"[red]graph-harness {args.command}: error:[/] ", end="", soft_wrap=True)
    io.err.print(f"{text}; run with --debug for the traceback", soft_wrap=True, markup=False)
    return 1


if __name__ == "__main__":
    # `python -m` put the current folder first on sys.path; move it last, where the console
    # script has it, so a profile.py here cannot stand in for the standard library's.
    if sys.path and sys.path[0] in ("", os.getcwd()):
        sys.path.append(sys.path.pop(0))
    sys.exit(main())
