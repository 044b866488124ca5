"""The graph-harness command line: count, delta, advise, replay, profile, check, report.
Here the top-level parser, main and its exit codes; each subcommand's flags are beside it
in commands/. Results on stdout, everything else on stderr. Exit codes (capture/errors.py
sorts them): 0 success, 2 a usage error, 1 anything else raised (one line, --debug for the
traceback), 3 a check that could not verify its graph, 128+n on SIGHUP, SIGINT, SIGTERM
(nothing partial left), 141 when stdout's reader goes away. After a CUDA error main leaves
the process at once. In full: docs/output.md, "Exit codes" and "The command line"."""

from __future__ import annotations

import os
import signal
import sys
from typing import TYPE_CHECKING

# One start-up handler: graph_harness/__init__.py, the first of our code the console script
# runs, installs it; it is installed again here for `python -m graph_harness`, whose
# package is imported before its __main__ is. main() keeps it until the command runs.
# Everything heavy is imported later, inside main.
from graph_harness import _exit_at_once, _started_as_the_cli

_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_signalled: list[int] = []  # signals that arrived while a command ran

if _started_as_the_cli():
    for _s in _SIGNALS:
        if signal.getsignal(_s) != signal.SIG_IGN:  # nohup's ignore stays (__init__.py)
            signal.signal(_s, _exit_at_once)

import argparse  # noqa: E402 - after the handlers, on purpose
import contextlib  # noqa: E402

from graph_harness.reports.cli.streams import plug, plug_closed_streams  # noqa: E402

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import FrameType
    from typing import NoReturn

    from graph_harness.reports.cli.console import IO


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


def _commands() -> dict:
    """Each subcommand's module, in the order --help lists them. Each one's flags live
    beside what it does, in reports/cli/commands/; imported here, when a parser is built or
    a command runs, so that importing this module loads no command module."""
    from graph_harness.reports.cli.commands import (
        advise,
        check,
        count,
        delta,
        profile,
        record,
        replay,
        report,
        sweep,
    )

    return {
        "count": count,
        "delta": delta,
        "replay": replay,
        "advise": advise,
        "profile": profile,
        "check": check,
        "sweep": sweep,
        "report": report,
        "record": record,
    }


class _Version(argparse._VersionAction):
    """`--version`, read from the installed metadata only when asked for (not at start)."""

    def __call__(self, parser: argparse.ArgumentParser, *args: object, **kw: object) -> None:
        self.version = f"graph-harness {version()}"
        super().__call__(parser, *args, **kw)


def build_parser() -> argparse.ArgumentParser:
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
    ap.add_argument("--version", action=_Version)
    sub = ap.add_subparsers(dest="command", required=True)
    for command in _commands().values():
        command.add_parser(sub, common)
    return ap


# --- main: streams, signals, exit codes ---------------------------------------------------


def _command(name: str) -> Callable[[argparse.Namespace, IO], int]:
    return _commands()[name].run


def _raise_where_we_are(signum: int, frame: FrameType | None) -> NoReturn:
    # Raised where the program is, so that cleanup runs (as Ctrl-C's KeyboardInterrupt).
    _signalled.append(signum)
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Terminated(signum)


def _set_handlers(handler: Callable[[int, FrameType | None], object]) -> dict:
    """`handler` for SIGINT, SIGTERM and SIGHUP, but those ignored (nohup's SIGHUP, a
    background job's SIGINT): they stay ignored. The handlers before, to put back."""
    old = {}
    for s in _SIGNALS:
        if signal.getsignal(s) == signal.SIG_IGN:
            continue
        try:
            old[s] = signal.signal(s, handler)
        except ValueError:  # not the main thread: leave signals be
            break
    return old


def main(argv: list[str] | None = None) -> int:
    held = _set_handlers(_exit_at_once)  # first: Ctrl-C from the first instant of main
    restore_streams = []
    try:
        closed = plug_closed_streams()
        for stream in (sys.stdout, sys.stderr):
            # A lone surrogate in a name (a JSON escape can make one) prints as its escape.
            if stream is not None and hasattr(stream, "reconfigure"):
                restore_streams.append((stream, stream.errors))
                stream.reconfigure(errors="backslashreplace")
        parser = build_parser()
        args = parser.parse_args(argv)
        refused = _refused_early(args, closed)
        if refused is not None:
            return refused
        _import_torch(args.command)

        from graph_harness.capture.results import results_aside
        from graph_harness.reports.cli.console import make_io

        # From here on, descriptor 1 is stderr and the results have a copy of their own:
        # nothing a user's thread or a C library prints can land inside them.
        with results_aside(for_good=_started_as_the_cli()) as out:
            io = make_io(getattr(args, "json", False), closed, out)
            _signalled.clear()
            _set_handlers(_raise_where_we_are)
            return _run(args, io, getattr(args, "debug", False))
    finally:
        for s, h in held.items():
            # After the command, a signal no longer interrupts a start-up: the default.
            signal.signal(s, signal.SIG_DFL if h is _exit_at_once else h)
        for stream, errors in restore_streams:
            with contextlib.suppress(OSError):
                stream.reconfigure(errors=errors)


def _import_torch(command: str) -> None:
    """torch and Triton imported for the commands that use them: they run C++ that calls
    back into Python, and a KeyboardInterrupt raised inside such a callback aborts the
    process (pybind11 and nanobind cannot unwind it: SIGABRT, not 130; seen with Triton's
    nanobind enums on the CPU suite). Imported here, while a signal still ends the start-up
    at once: nothing has been written yet. A command whose module says
    `RUNS_WITHOUT_TORCH = True` (record: the program it starts imports its own, and its
    recording is read and shown without torch) is left without them."""
    if getattr(_commands()[command], "RUNS_WITHOUT_TORCH", False):
        return
    import torch  # noqa: F401

    with contextlib.suppress(Exception):  # absent or broken: what needs it says so
        import triton  # noqa: F401


def _refused_early(args: argparse.Namespace, closed: set[int]) -> int | None:
    """A usage error the flags, paths and machine show alone, said before torch's import,
    which takes seconds (reports/cli/early.py): its exit code, else None. Imports no
    torch; while it runs a signal still ends the start-up at once."""
    from graph_harness.capture.errors import UsageError
    from graph_harness.reports.cli.early import check_before_torch

    try:
        check_before_torch(args, _commands()[args.command])
    except UsageError as e:
        if getattr(args, "debug", False):
            raise
        from graph_harness.reports.cli.console import make_io

        return _report_error(make_io(getattr(args, "json", False), closed), args, e)
    return None


def _run(args: argparse.Namespace, io: IO, debug: bool) -> int:
    try:
        return _command(args.command)(args, io)
    except KeyboardInterrupt as e:
        if _signalled:  # our handler saw the Ctrl-C (_raise_where_we_are)
            return _stopped(io, signal.SIGINT, e)
        # no Ctrl-C came: the user's code raised it, and it is an error like any other
        return _report_error(io, args, e)
    except Terminated as e:
        return _stopped(io, e.signum, e)
    except BrokenPipeError:
        # The reader of stdout went away (`| head`): stop quietly, as a Unix tool does.
        from graph_harness.capture.results import results_descriptor

        plug(1, 2, results_descriptor(1))
        return 128 + signal.SIGPIPE
    except SystemExit as e:
        # graph-harness raises none once its parser is done, and a target's calls made
        # theirs a TargetError: this one came from the target's code outside its guard (an
        # attribute of its step, a hook, a thread's excepthook). Never a silent exit.
        if debug:
            raise
        from graph_harness.reports.cli.target import TargetError

        err = TargetError(
            f"sys.exit({_code_of(e)}) was called while graph-harness ran (the target's "
            "code, outside its module, factory, step and reset: an attribute of its step, "
            "a hook or a thread); a target must return or raise, not exit"
        )
        return _report_error(io, args, err)
    except BaseException as e:
        if _signalled:  # a signal that surfaced as some other error on its way up
            return _stopped(io, _signalled[0], e)
        if debug:
            raise
        code = _report_error(io, args, e)
        _exit_if_cuda_is_lost(e, code)
        return code


def _code_of(e: SystemExit) -> str:
    try:
        return repr(e.code)
    except BaseException:
        return "..."


def _exit_if_cuda_is_lost(e: BaseException, code: int) -> None:
    """After a CUDA error (a replay past a buffer's end: a device-side assert) the CUDA
    context is lost, and the interpreter's exit would touch it again (freeing graphs and
    events, whose destructors then warn or abort): with the one line printed and nothing
    partial left (the output was discarded on the way here), leave at once."""
    from graph_harness.capture.replay.guard import context_lost

    if context_lost(e):
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


def _stopped(io: IO, signum: int, e: BaseException) -> int:
    from graph_harness.reports.output.folder import committed_before_stop

    what = "interrupted" if signum == signal.SIGINT else f"stopped by {signal.Signals(signum).name}"
    # A signal during the commit waits for it (reports/output/folder.py): say what it did.
    done = committed_before_stop(e)
    with contextlib.suppress(OSError):
        io.note(
            f"{what} as the output was committed: {done}"
            if done
            else f"{what}; no partial output was left"
        )
    return 128 + signum


def _message(e: BaseException) -> str:
    """The first line of an exception's message, whatever its __str__ does."""
    try:
        text = str(e)
    except BaseException:  # the user's __str__ raised: say so, in one line
        return "(its message could not be printed)"
    first = text.splitlines()[0] if text.strip() else ""
    return first if len(first) <= 1000 else first[:997] + "..."


def _report_error(io: IO, args: argparse.Namespace, e: BaseException) -> int:
    code, text = _error_line(io, e)
    with contextlib.suppress(OSError):  # stderr gone too: the exit code still says it
        io.err.print(f"graph-harness {args.command}: error: ", end="", style="red", soft_wrap=True)
        io.err.print(text, soft_wrap=True)
    return code


def _error_line(io: IO, e: BaseException) -> tuple[int, str]:
    """The exit code and the one line for an error: a usage error's message (2), or the
    exception's type, message and where in the user's code it came from (1)."""
    from graph_harness.capture.errors import HarnessError, UsageError
    from graph_harness.reports.cli.origin import origin

    first = _message(e)
    if isinstance(e, UsageError):  # every usage error, on every path (capture/errors.py)
        return UsageError.exit_code, first
    code = e.exit_code if isinstance(e, HarnessError) else 1  # CheckUnverified: 3
    where = None
    if io.target_root is not None:  # only the user's own code is worth pointing at
        where = origin(e.__cause__ if e.__cause__ is not None else e, io.target_root)
    text = f"{type(e).__name__}: {first}" if first else type(e).__name__
    if where:
        text += f" [raised at {where}]"
    return code, f"{text}; run with --debug for the traceback"
