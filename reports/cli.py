"""The graph-harness command line: count, delta, advise, replay, profile, check, report.
Here the top-level parser, main and its exit codes; each subcommand's flags are beside it
in commands/.

Streams: results (tables, or one JSON document with --json) on stdout; the banner,
progress, notes, warnings and errors on stderr, so `graph-harness count --json | jq` works.
Exit codes: 0 success; 2 a usage error (our flags, arguments and input files); 1 anything
raised by the user's code (--target) or the runtime, in one line with the exception's type
and where it came from (--debug for the traceback); 128+n on SIGHUP (129), SIGINT (130)
and SIGTERM (143), with nothing partial left and an earlier output kept as it was.
`check` exits 1 when the graph computes something else than the step. After a CUDA error
(the context is lost) main leaves the process at once, once its line is printed.
Output folders follow reports/output.py: built aside, swapped in, never a user's data lost.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys

from rich.console import Console

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


def build_parser() -> argparse.ArgumentParser:
    # Each subcommand's flags live beside what it does, in reports/commands/. Imported here,
    # as in _command, so that importing this module loads no command module.
    from graph_harness.reports.commands import advise, check, count, delta, profile, replay

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
    # The order here is the order --help lists them in.
    count.add_parser(sub, common)
    delta.add_parser(sub, common)
    replay.add_parser(sub, common)
    advise.add_parser(sub, common)
    profile.add_parser(sub, common)
    check.add_parser(sub, common)
    replay.add_report_parser(sub, common)
    return ap


# --- main: streams, signals, exit codes ---------------------------------------------------


def _usage_errors() -> tuple[type[BaseException], ...]:
    from graph_harness.capture import ExportError
    from graph_harness.capture.delta import DeltaError
    from graph_harness.capture.files import OutputPathError
    from graph_harness.capture.state import StepStateError
    from graph_harness.reports.output import OutputRefused
    from graph_harness.reports.target import TargetUsageError

    usage = (UsageError, ExportError, DeltaError, OutputRefused, OutputPathError)
    return (*usage, TargetUsageError, StepStateError)


def _command(name: str):
    from graph_harness.reports.commands import advise, check, count, delta, profile, replay

    return {
        "count": count.run,
        "delta": delta.run,
        "advise": advise.run,
        "replay": replay.run_replay,
        "profile": profile.run,
        "check": check.run,
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
        code = _report_error(io, args, e)
        _exit_if_cuda_is_lost(e, code)
        return code
    finally:
        for s, h in handlers.items():
            signal.signal(s, h)


def _exit_if_cuda_is_lost(e: Exception, code: int) -> None:
    """After a CUDA error (a replay past a buffer's end: a device-side assert) the CUDA
    context is lost, and the interpreter's exit would touch it again (freeing graphs and
    events, whose destructors then warn or abort): with the one line printed and nothing
    partial left (the output was discarded on the way here), leave at once."""
    from graph_harness.capture.replay_guard import cuda_in_use, is_cuda_error

    if (is_cuda_error(e) or is_cuda_error(e.__cause__)) and cuda_in_use():
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


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
