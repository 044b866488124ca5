"""The flags several subcommands share, added to a subcommand's parser: round parameters,
timing settings, output folder, --json, --module-scopes, and the number parsers behind them.
Each command module's add_parser picks the ones it takes."""

from __future__ import annotations

import argparse
import dataclasses
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

from graph_harness.capture.errors import UsageError
from graph_harness.capture.graph.settings import StepSettings
from graph_harness.capture.replay.settings import ReplaySettings
from graph_harness.capture.round.params import VARIANT_HELP, RoundParams
from graph_harness.capture.settings import MAX_COUNT

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any

    from graph_harness.capture import NodeExport


def _width() -> int:
    """Where descriptions and epilogs wrap: argparse's own width (the terminal's, less
    2), at most 88, at least 40 (a terminal a few columns wide must not break the parser)."""
    import shutil

    return max(40, min(88, shutil.get_terminal_size().columns - 2))


def subcommand(
    sub: argparse._SubParsersAction,
    name: str,
    common: argparse.ArgumentParser,
    *,
    help: str,
    description: str,
    examples: list[str],
    gpu_examples: list[str] = (),
    variants: bool = False,
) -> argparse.ArgumentParser:
    """A subcommand's parser with its one-line `help` (listed by `graph-harness --help`),
    its `description` (a paragraph, wrapped here) and an epilog of `examples` (command
    lines, kept as written; `gpu_examples` under their own heading: they need a CUDA GPU)
    and, with `variants`, the round's variants one line each."""
    epilog = "examples:\n" + "\n".join(f"  {e}" for e in examples)
    if gpu_examples:
        epilog += "\n\non a CUDA GPU only:\n" + "\n".join(f"  {e}" for e in gpu_examples)
    if variants:
        epilog += "\n\n" + variants_text()
    return sub.add_parser(
        name,
        parents=[common],
        help=help,
        description=textwrap.fill(description, _width()),
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def variants_text() -> str:
    """The built-in round's variants, one line each (VARIANT_HELP's words)."""
    width = max(map(len, VARIANT_HELP))
    lines = ["variants of the built-in round (--variant):"]
    for name, what in VARIANT_HELP.items():
        lines += textwrap.wrap(
            what,
            _width(),
            initial_indent=f"  {name:<{width}}  ",
            subsequent_indent=" " * (width + 4),
        )
    return "\n".join(lines)


def round_args(p: argparse.ArgumentParser) -> None:
    d = RoundParams()  # the one source of defaults; None here means "not given"
    g = p.add_argument_group("round parameters (the built-in decode round)")
    for f in dataclasses.fields(RoundParams):
        g.add_argument(
            f"--{f.name}",
            type=positive(f.metadata["lo"], f.metadata["hi"]),  # digits alone, in range
            default=None,
            help=f"{f.metadata['help']} (default {getattr(d, f.name)})",
        )


# a count flag's ceiling, the library's too (capture/settings.py): past it is a typo


def positive(minimum: int, maximum: int = MAX_COUNT) -> Callable[[str], int]:
    """An argparse type: a whole number from `minimum` to `maximum`, written in ASCII
    digits alone (not ' 3', '1_0' or '٣', which int() takes), else a usage error saying so."""

    def parse(text: str) -> int:
        value = int(text) if text.isascii() and text.isdigit() else None
        if value is None or not minimum <= value <= maximum:
            raise argparse.ArgumentTypeError(
                f"expected a whole number from {minimum} to {maximum:,} in digits, got {text!r}"
            )
        return value

    return parse


def out_args(p: argparse.ArgumentParser, required: bool = False) -> None:
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


def json_arg(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument(
        "--json", action="store_true", help=f"print {what} as one JSON document on stdout"
    )


def timing_args(
    p: argparse.ArgumentParser, settings: type = ReplaySettings, title: str = "replay settings"
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
            f"--{f.name.replace('_', '-')}",
            dest=f.name,
            type=positive(f.metadata["min"]),
            nargs="+" if isinstance(default, tuple) else None,
            default=None,
            help=f"{f.metadata['help']} (default {shown})",
        )


def settings_from(settings: type, args: argparse.Namespace, **override: Any) -> Any:
    """A settings class (ReplaySettings, ProfileSettings, SweepSettings, the round's
    RoundParams) from the flags made of its fields: those given, then `override`, the
    class's defaults for the rest (a list the parser gathered becomes the tuple the field
    holds); its ValueError a usage error. The one way back from flags to settings."""
    given = {
        f.name: tuple(v) if isinstance(v, list) else v
        for f in dataclasses.fields(settings)
        if (v := getattr(args, f.name, None)) is not None
    }
    try:
        return settings(**{**given, **override})
    except ValueError as e:
        raise UsageError(str(e)) from e


BLOCKS = "blocks"  # --module-scopes without DEPTH: one row per repeated block (layer)


def module_scopes_arg(p: argparse.ArgumentParser, help: str | None = None) -> None:
    """`--module-scopes [DEPTH|all]` (`help`: a command's own words for it)."""
    p.add_argument(
        "--module-scopes",
        nargs="?",
        const=BLOCKS,
        default=False,
        type=depth,
        metavar="DEPTH",
        help=help
        or "with --target: attribute nodes to the model's modules by qualified name "
        "(model.layers.3.self_attn). Every level is recorded; the tables show DEPTH parts of "
        "the name (a ModuleList is a part: layers.3 is 2, HF's model.layers.3 is 3), 'all' "
        "for every level; default: one row per decoder layer (the model's repeated blocks). "
        "The step FUNCTION() returns must carry the model as `step.module`",
    )


def depth(text: str) -> int | str | None:
    """--module-scopes' DEPTH: "all" (every level) as None, BLOCKS as itself (no DEPTH
    given), else a whole number >= 1."""
    if text == "all":
        return None
    if text == BLOCKS:
        return BLOCKS
    try:
        d = int(text)
    except ValueError:
        d = 0
    if d < 1:
        raise argparse.ArgumentTypeError(
            f"DEPTH must be an int >= 1 (parts of a qualified name: layers.3 is 2) or 'all', "
            f"got {text!r}"
        )
    return d


def shown_depth(flag: int | str | bool | None, exports: Iterable[NodeExport]) -> int | None:
    """The depth the tables cut the scope tree at: --module-scopes' DEPTH; without DEPTH,
    reports/tables.py's default_depth (the exports' block depth: one row per layer; every
    level where no blocks were found), the default report.md's tables, CSVs and plots take
    too; None (every level) for 'all' and without --module-scopes."""
    if flag != BLOCKS:
        return None if flag is False else flag
    from graph_harness.reports.tables import default_depth  # pandas: not at parser build

    return default_depth(exports)


def warmup_arg(p: argparse.ArgumentParser) -> None:
    """`--warmup N`: the step's warm-up calls (StepSettings holds the default)."""
    f = next(f for f in dataclasses.fields(StepSettings) if f.name == "warmup")
    p.add_argument(
        "--warmup",
        dest="step_warmup",  # not ProfileSettings.warmup, the replays' own warm-up
        type=positive(f.metadata["min"]),
        default=None,
        metavar="N",
        help=f"with --target: {f.metadata['help']} (default {StepSettings().warmup})",
    )


def check_arg(p: argparse.ArgumentParser, modes: dict[str, str] | None = None) -> None:
    """`--check` (and `--check-steps`). With `modes` (mode -> what it runs; the first is
    what `--check` alone means), `--check [MODE]`: `args.check` is None, or the mode."""
    what = (
        "with --target: also check that the graph computes what the step computes, as "
        "`graph-harness check` does; if it does not, print the findings, write nothing, exit 1 "
        "(3 if it could not verify the graph)"
    )
    if not modes:
        p.add_argument("--check", action="store_true", help=what)
    else:
        first = next(iter(modes))
        listed = "; or ".join(
            f"{m}{' (the default)' if m == first else ''}: {why}" for m, why in modes.items()
        )
        p.add_argument(
            "--check",
            nargs="?",
            const=first,
            default=None,
            choices=list(modes),
            metavar="MODE",
            help=f"{what}. MODE is {listed}",
        )
    steps_arg(p, "--check-steps", "with --check: ")


def steps_arg(p: argparse.ArgumentParser, flag: str = "--steps", lead: str = "") -> None:
    """`--steps N`: check's trajectory length (CheckSettings holds the default)."""
    from graph_harness.capture.check.settings import CheckSettings

    f = next(f for f in dataclasses.fields(CheckSettings) if f.name == "steps")
    p.add_argument(
        flag,
        dest="check_steps",
        type=steps_or_to_end(f.metadata["min"]),
        default=None,
        metavar="N|to-end",
        help=f"{lead}{f.metadata['help']} (default {CheckSettings().steps})",
    )


def steps_or_to_end(minimum: int) -> Callable[[str], int | str]:
    """An argparse type: a whole number (as `positive`), or `to-end`."""
    from graph_harness.capture.check.settings import TO_END

    number = positive(minimum)

    def parse(text: str) -> int | str:
        if text == TO_END:
            return TO_END
        try:
            return number(text)
        except argparse.ArgumentTypeError as e:
            raise argparse.ArgumentTypeError(f"{e}, or {TO_END!r}") from None

    return parse


def soak_args(p: argparse.ArgumentParser) -> None:
    """`--soak N` and `--soak-deadline S` (CheckSettings holds the defaults)."""
    from graph_harness.capture.check.settings import CheckSettings

    f = {f.name: f for f in dataclasses.fields(CheckSettings)}
    p.add_argument(
        "--soak",
        type=positive(f["soak"].metadata["min"]),
        default=None,
        metavar="N",
        help=f"{f['soak'].metadata['help']} (exit 1 on a hang or a difference)",
    )
    p.add_argument(
        "--soak-deadline",
        type=seconds_arg,
        default=None,
        metavar="S",
        help=f"with --soak: {f['soak_deadline'].metadata['help']}",
    )


def seconds_arg(text: str) -> float:
    """An argparse type: a finite number of seconds > 0."""
    try:
        v = float(text) if text.isascii() else None
    except ValueError:
        v = None
    if v is None or not 0 < v < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {text!r}")
    return v


def steps_to_check(args: argparse.Namespace) -> int | str:
    """--steps / --check-steps, or the default."""
    from graph_harness.capture.check.settings import CheckSettings

    v = getattr(args, "check_steps", None)
    return CheckSettings().steps if v is None else v


def step_warmup(args: argparse.Namespace) -> int:
    """--warmup, or the default."""
    v = getattr(args, "step_warmup", None)
    return StepSettings().warmup if v is None else v
