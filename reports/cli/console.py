"""What every command shares: its two streams, usage errors, the banner, round flags read
into RoundParams, and the staged output folder."""

from __future__ import annotations

import copy
import errno
import functools
import json
import os
import shlex
import sys
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING

from graph_harness.capture.errors import UsageError as UsageError  # bad flags: exit 2
from graph_harness.capture.replay.settings import ReplaySettings
from graph_harness.capture.round.params import RoundParams
from graph_harness.capture.text import printable
from graph_harness.reports.cli.args import settings_from

if TYPE_CHECKING:
    import argparse
    from collections.abc import Iterable
    from contextlib import AbstractContextManager
    from typing import Any, TextIO

    from rich.console import Console, ConsoleOptions, JustifyMethod, RenderableType, RenderResult
    from rich.text import Text

    from graph_harness.reports.progress import Phases

ROUND_FIELDS = tuple(f.name for f in fields(RoundParams))


@functools.cache
def _annotated_class() -> type:
    """_Annotated, made on first use (rich imported then)."""
    from rich.segment import Segment
    from rich.style import Style
    from rich.table import Table

    class _Annotated:
        """A table printed with its title above it and its caption below it, each a
        line of the console's width (its own lines where longer), not of the table's."""

        def __init__(self, table: Table) -> None:
            self.table = table

        def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
            bare = copy.copy(self.table)
            bare.title = bare.caption = None
            lines = console.render_lines(bare, options, pad=False)
            width = max((Segment.get_line_length(line) for line in lines), default=0)

            def annotation(
                text: str | Text, style: Style | str, justify: JustifyMethod | None
            ) -> Iterable[Segment]:
                if isinstance(text, str):
                    text = console.render_str(text, style=style)
                fits = text.cell_len <= width
                where = options.update(
                    width=width if fits else options.max_width,
                    justify=justify if fits else "default",  # unpadded
                    height=None,
                )
                return console.render(text, where)

            t = self.table
            if t.title:
                yield from annotation(
                    t.title, Style.pick_first(t.title_style, "table.title"), t.title_justify
                )
            for line in lines:
                yield from line
                yield Segment.line()
            if t.caption:
                yield from annotation(
                    t.caption, Style.pick_first(t.caption_style, "table.caption"), t.caption_justify
                )

    return _Annotated


@functools.cache
def _console_class() -> type[Console]:
    # Made on first use: the parser (and --help) is built without importing rich.
    from rich.console import Console
    from rich.segment import Segment
    from rich.table import Table

    _Annotated = _annotated_class()

    class _Console(Console):
        def render_str(self, text: str, **kwargs: Any) -> Text:
            # Every str printed, a table's cells and titles included, comes through here:
            # a control character from a name is shown as its escape, never obeyed; our
            # own line breaks stay.
            return super().render_str(printable(text, keep="\n"), **kwargs)

        def render(
            self, renderable: RenderableType, options: ConsoleOptions | None = None
        ) -> Iterable[Segment]:
            # rich wraps a table's title and caption at the table's own width: a narrow
            # table broke its title over three lines in a 160-column terminal. Here they
            # wrap at the console's width (centred over the table where they fit it).
            if isinstance(renderable, Table) and (renderable.title or renderable.caption):
                renderable = _Annotated(renderable)
            return super().render(renderable, options)

        def on_broken_pipe(self) -> None:
            # rich's own ends the program with SystemExit(1); a reader that went away is
            # SIGPIPE's 141, which cli.main decides.
            self.quiet = True
            raise BrokenPipeError(errno.EPIPE, "the reader of this stream went away")

    return _Console


def make_console(
    file: TextIO | None = None, *, stderr: bool = False, width: int | None = None
) -> Console:
    """The one kind of console graph-harness prints with: text is text. Names from
    documents, models and kernels (`[/]`, `:smile:`) print as they are, never as rich
    markup or emoji codes, nor coloured by rich's highlighter (whose repr rules are
    quadratic in a long word: a 64,000-character name took 26 s); style comes from
    `style=` alone."""
    return _console_class()(
        file=file, stderr=stderr, width=width, markup=False, emoji=False, highlight=False
    )


class _Closed:
    """Stdout when the command was started with it closed (`>&-`)."""

    def write(self, text: str) -> int:
        raise OSError(
            errno.EBADF,
            "stdout is closed (started with >&-) and graph-harness prints its results "
            "there; redirect it to a file, or to /dev/null to discard them",
        )

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return 1


def _tty(stream: TextIO | None) -> bool:
    """Whether `stream` is a terminal; False for a stream Python never opened (it starts
    with sys.stderr None when descriptor 2 was closed: `2>&-`)."""
    try:
        return stream is not None and stream.isatty()
    except (OSError, ValueError):
        return False


def make_io(json_: bool, closed: set[int] = frozenset(), out: TextIO | None = None) -> IO:
    """The two streams of a command; `out`: where results go (capture/results.py), else
    sys.stdout. Piped into a log or CI, rich would squeeze tables into 80 columns and cut
    headers and figures to "..."; COLUMNS still wins when set."""
    wide = "COLUMNS" not in os.environ
    out = _Closed() if 1 in closed else (out if out is not None else sys.stdout)
    err = open(os.devnull, "w") if 2 in closed else None  # noqa: SIM115 - for the process
    return IO(
        out=make_console(out, width=160 if wide and not out.isatty() else None),
        err=make_console(
            err, stderr=err is None, width=160 if wide and not _tty(sys.stderr) else None
        ),
        json=json_,
    )


@dataclass
class IO:
    out: Console  # results
    err: Console  # everything a person reads about the run
    json: bool = False
    target_root: Path | None = None  # where the user's code lives, to point at its frames

    def note(self, text: str) -> None:
        self.err.print(f"graph-harness: {text}", soft_wrap=True)

    def print_json(self, doc: Any) -> None:
        self.out.file.write(json.dumps(doc, indent=1, allow_nan=False) + "\n")
        self.out.file.flush()


def banner(io: IO, *, files: bool = False) -> None:
    """The first line on stderr: where this runs and what its counts are (`files`: the
    counts are read from files given, not made here)."""
    import torch

    from graph_harness.capture import default_device
    from graph_harness.capture.environment import triton_version

    tv = triton_version() or "absent"  # not imported for it (capture/environment.py)
    if files:
        where = "files"
        source = "read from the files given"
    elif default_device().type == "cuda":
        where = f"GPU {torch.cuda.get_device_name()} (CUDA {torch.version.cuda})"
        source = "cuda-graph: nodes read from the captured graph"
    else:
        where = "CPU (no CUDA device)"
        source = "cpu-dispatch: dispatched ops counted, NOT graph nodes"
    # soft_wrap: one line whatever the width (a narrow terminal or COLUMNS), so a reader
    # of stderr can always tell the banner from what follows.
    io.err.print("graph-harness", style="bold", end="", soft_wrap=True)
    io.err.print(
        f" | {where} | torch {torch.__version__} | triton {tv} | counts: {source}",
        soft_wrap=True,
    )


def given_round_flags(args: argparse.Namespace) -> list[str]:
    return [f"--{n}" for n in ROUND_FIELDS if getattr(args, n, None) is not None]


def round_params(args: argparse.Namespace, **override: Any) -> RoundParams:
    """The round's parameters from its flags (reports/cli/args.py's settings_from)."""
    return settings_from(RoundParams, args, **override)


def refuse(flags: list[str], why: str) -> None:
    """Flags that do not combine: one line naming them (`why` starts with a verb)."""
    if flags:
        verb, rest = why.split(" ", 1)
        if len(flags) == 1:
            verb = {"apply": "applies", "carry": "carries"}.get(verb, verb)
        raise UsageError(f"{', '.join(flags)} {verb} {rest}")


def command_line() -> str:
    """The command as run, as text (capture/text.py: an argument decoded from a non-UTF-8
    byte holds a lone surrogate), for the manifest and report.md to record."""
    return printable("graph-harness " + " ".join(shlex.quote(a) for a in sys.argv[1:]))


def staged(args: argparse.Namespace, io: IO) -> AbstractContextManager[Path | None]:
    from graph_harness.reports.output.folder import staged_output

    return staged_output(args.out, args.force, command=command_line(), say=io.note)


def wrote(io: IO, args: argparse.Namespace, what: str) -> None:
    if args.out is not None:
        io.err.print(f"wrote {what} to {args.out}", markup=False)


def progress(io: IO) -> Phases:
    """The command's phases on stderr (reports/progress.py): `with progress(io) as say:`,
    then `say(phase)` as each starts; pass `say` as capture's `progress=`."""
    from graph_harness.reports.progress import Phases

    return Phases(io.err)


def given_timing_flags(args: argparse.Namespace) -> list[str]:
    return [
        f"--{f.name}" for f in fields(ReplaySettings) if getattr(args, f.name, None) is not None
    ]


def replay_settings(args: argparse.Namespace) -> ReplaySettings:
    """ReplaySettings from the flags given (the dataclass holds every default)."""
    from graph_harness.reports.cli.args import settings_from

    return settings_from(ReplaySettings, args)
