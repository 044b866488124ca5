"""What every command shares: its two streams, usage errors, the banner, round flags read
into RoundParams, and the staged output folder."""

from __future__ import annotations

import json
import shlex
import sys
from dataclasses import dataclass, fields
from pathlib import Path

from rich.console import Console

from graph_harness.capture.params import ReplaySettings, RoundParams

ROUND_FIELDS = tuple(f.name for f in fields(RoundParams))


class UsageError(Exception):
    """Bad flags or arguments: exit code 2."""


@dataclass
class IO:
    out: Console  # results
    err: Console  # everything a person reads about the run
    json: bool = False
    target_root: Path | None = None  # where the user's code lives, to point at its frames

    def note(self, text: str) -> None:
        self.err.print(f"graph-harness: {text}", soft_wrap=True, markup=False)

    def print_json(self, doc) -> None:
        self.out.file.write(json.dumps(doc, indent=1, allow_nan=False) + "\n")
        self.out.file.flush()


def banner(io: IO) -> None:
    import torch

    from graph_harness.capture import default_device

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


def given_round_flags(args) -> list[str]:
    return [f"--{n}" for n in ROUND_FIELDS if getattr(args, n, None) is not None]


def round_params(args, **override) -> RoundParams:
    given = {n: getattr(args, n) for n in ROUND_FIELDS if getattr(args, n, None) is not None}
    try:
        return RoundParams(**{**given, **override})
    except ValueError as e:
        raise UsageError(str(e)) from e


def refuse(flags: list[str], why: str) -> None:
    """Flags that do not combine: one line naming them (`why` starts with a verb)."""
    if flags:
        verb, rest = why.split(" ", 1)
        if len(flags) == 1:
            verb = {"apply": "applies", "carry": "carries"}.get(verb, verb)
        raise UsageError(f"{', '.join(flags)} {verb} {rest}")


def command_line() -> str:
    return "graph-harness " + " ".join(shlex.quote(a) for a in sys.argv[1:])


def staged(args, io: IO):
    from graph_harness.reports.output import staged_output

    return staged_output(args.out, args.force, command=command_line(), say=io.note)


def wrote(io: IO, args, what: str) -> None:
    if args.out is not None:
        io.err.print(f"wrote {what} to {args.out}", markup=False)


def progress(io: IO):
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=io.err,
        transient=True,
    )


def require_cuda(what: str) -> None:
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError(
            f"{what} times CUDA graph replays and needs a CUDA device; "
            "none here (use `graph-harness count` for CPU dispatch counts)"
        )


def given_timing_flags(args) -> list[str]:
    return [
        f"--{f.name}" for f in fields(ReplaySettings) if getattr(args, f.name, None) is not None
    ]


def replay_settings(args) -> ReplaySettings:
    """ReplaySettings from the flags given (the dataclass holds every default)."""
    given = {
        f.name: tuple(v) if isinstance(v, list) else v
        for f in fields(ReplaySettings)
        if (v := getattr(args, f.name, None)) is not None
    }
    try:
        return ReplaySettings(**given)
    except ValueError as e:
        raise UsageError(str(e)) from e
