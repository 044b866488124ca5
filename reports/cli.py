"""The graph-harness command line: count, delta, advise, replay, profile, report.

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
import os
import signal
import sys
from pathlib import Path

from rich.console import Console

from graph_harness.capture.params import VARIANTS, ProfileSettings, ReplaySettings, RoundParams
from graph_harness.reports.commands.console import IO, UsageError


class Terminated(BaseException):
    """SIGTERM or SIGHUP, raised where the program is so that cleanup runs (as Ctrl-C's
    KeyboardInterrupt does)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


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


def _timing_args(
    p: argparse.ArgumentParser, settings=ReplaySettings, title: str = "replay settings"
) -> None:
    """Flags made from the settings' fields that carry help; None means "not given"."""
    d = settings()
    g = p.add_argument_group(title)
    for f in dataclasses.fields(settings):
        if "help" not in f.metadata:
            continue
        default = getattr(d, f.name)
        shown = " ".join(map(str, default)) if isinstance(default, tuple) else default
        g.add_argument(
            f"--{f.name}",
            type=_positive(f.metadata["min"]),
            nargs="+" if isinstance(default, tuple) else None,
            default=None,
            help=f"{f.metadata['help']} (default {shown})",
        )


def build_parser() -> argparse.ArgumentParser:
    from graph_harness.capture.chains import CHAIN_KINDS, PDL_KINDS

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
    _module_scopes_arg(c)
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
    r.add_argument(
        "--variant", action="append", choices=list(VARIANTS), help="round to time (default: all)"
    )
    r.add_argument("--pdl", action="store_true", help="rounds with programmatic dependent launch")
    _timing_args(r)
    _json_arg(r, "the replay document")
    _out_args(r)

    v = sub.add_parser(
        "advise",
        parents=[common],
        help="what is worth fusing in an export, ranked by time saved",
    )
    v.add_argument(
        "export",
        metavar="EXPORT",
        help="an export file by path (count --out's nodes-*.json; a path holds a '/' or ends "
        "in .json), or a variant of the built-in round by name (shipped, ...), counted here",
    )
    v.add_argument(
        "--costs",
        type=Path,
        metavar="REPLAY.json",
        help="price nodes with this replay document (`graph-harness replay --out DIR` writes "
        "DIR/replay.json) instead of the built-in H200 costs",
    )
    v.add_argument(
        "--top", type=_positive(1), default=10, help="how many groups to show (default 10)"
    )
    _round_args(v)
    _json_arg(v, "the advice")

    pr = sub.add_parser(
        "profile",
        parents=[common],
        help="every node's in-round cost under CUPTI: duration, gap before it, by scope (GPU)",
    )
    _round_args(pr)
    pr.add_argument(
        "--variant", action="append", choices=list(VARIANTS), help="round to profile (default: all)"
    )
    pr.add_argument(
        "--target",
        action="append",
        metavar="MODULE:FUNCTION",
        help="profile your own step instead (IMPORTS AND RUNS your code, as count --target); "
        "give two to price the second against the first",
    )
    _module_scopes_arg(pr)
    pr.add_argument("--pdl", action="store_true", help="rounds with programmatic dependent launch")
    pr.add_argument(
        "--top", type=_positive(1), default=10, help="nodes and groups per table (default 10)"
    )
    _timing_args(pr, ProfileSettings, "profile settings")
    _json_arg(pr, "the profile document")
    _out_args(pr)

    p = sub.add_parser(
        "report", parents=[common], help="counts, deltas, replays and plots into one folder"
    )
    p.add_argument(
        "--target",
        action="append",
        metavar="MODULE:FUNCTION",
        help="report on your own step instead of the round (IMPORTS AND RUNS your code, as "
        "count --target); give two for their delta (the first is A)",
    )
    _module_scopes_arg(p)
    _round_args(p)
    _timing_args(p)
    _out_args(p, required=True)
    return ap


def _module_scopes_arg(p) -> None:
    p.add_argument(
        "--module-scopes",
        nargs="?",
        const="all",
        default=False,
        type=_depth,
        metavar="DEPTH",
        help="with --target: attribute nodes to the model's modules by qualified name "
        "(layers.3.attention), down to DEPTH parts (layers.3 is 2; default: every level). "
        "The step FUNCTION() returns must carry the model as `step.module`",
    )


def _depth(text: str) -> int | None:
    if text == "all":
        return None
    try:
        d = int(text)
    except ValueError:
        d = 0
    if d < 1:
        raise argparse.ArgumentTypeError(
            f"DEPTH must be an int >= 1 (parts of a qualified name: layers.3 is 2), got {text!r}"
        )
    return d


# --- main: streams, signals, exit codes ---------------------------------------------------


def _usage_errors() -> tuple[type[BaseException], ...]:
    from graph_harness.capture import ExportError
    from graph_harness.capture.delta import DeltaError
    from graph_harness.capture.files import OutputPathError
    from graph_harness.reports.output import OutputRefused
    from graph_harness.reports.target import TargetUsageError

    return (UsageError, ExportError, DeltaError, OutputRefused, OutputPathError, TargetUsageError)


def _command(name: str):
    from graph_harness.reports.commands import advise, count, delta, profile, replay

    return {
        "count": count.run,
        "delta": delta.run,
        "advise": advise.run,
        "replay": replay.run_replay,
        "profile": profile.run,
        "report": replay.run_report,
    }[name]


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
        return _command(args.command)(args, io)
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
    from graph_harness.reports.target import origin

    first = str(e).splitlines()[0] if str(e) else ""
    if isinstance(e, _usage_errors()):
        io.err.print(f"[red]graph-harness {args.command}: error:[/] ", end="", soft_wrap=True)
        io.err.print(first, soft_wrap=True, markup=False)
        return 2
    where = None
    if io.target_root is not None:  # only the user's own code is worth pointing at
        where = origin(e.__cause__ if e.__cause__ is not None else e, io.target_root)
    text = f"{type(e).__name__}: {first}" if first else type(e).__name__
    if where:
        text += f" [raised at {where}]"
    io.err.print(f"[red]graph-harness {args.command}: error:[/] ", end="", soft_wrap=True)
    io.err.print(f"{text}; run with --debug for the traceback", soft_wrap=True, markup=False)
    return 1
