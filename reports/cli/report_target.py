"""`graph-harness report --target`: the flags checked before anything runs, then every
target loaded, profiled on a GPU (counted from the graphs it profiles) or counted without
one, checked with --check, swept at --sizes, and written into one folder
(reports/target_report.py)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING

from graph_harness.capture.sweep.settings import SweepSettings
from graph_harness.reports.cli.args import shown_depth, step_warmup, steps_to_check
from graph_harness.reports.cli.console import (
    IO,
    UsageError,
    banner,
    command_line,
    given_round_flags,
    given_timing_flags,
    progress,
    refuse,
    staged,
)
from graph_harness.reports.cli.sweeps import sweep_inputs, sweep_target
from graph_harness.reports.cli.targets import (
    count_target,
    gate,
    load_targets,
    profile_targets,
    refuse_check_steps,
    refuse_target_only,
)

if TYPE_CHECKING:
    from graph_harness.capture.profile.document import ProfileResult


def target_inputs(args: argparse.Namespace) -> list:
    """A target report's flags checked before anything runs (a factory without `batch`
    refused where --sizes sweeps it); the requests to pad up the sizes, if any."""
    requests = target_flags(args)
    if args.sizes:
        from graph_harness.reports.cli.target import load_factory

        load_factory(args.target[0]).check_takes("batch", "report --sizes")
    return requests


def target_flags(args: argparse.Namespace) -> list:
    """A target report's flags checked, without torch and without the user's code
    (reports/cli/early.py); the requests to pad up the sizes, if any."""
    if not args.target:
        refuse_target_only(args)
    if len(args.target) > 2:
        raise UsageError(
            f"report takes one --target, or two for their delta; got {len(args.target)}"
        )
    refuse(
        given_round_flags(args) + given_timing_flags(args),
        "apply to the built-in round, not to --target: drop them",
    )
    refuse_check_steps(args)
    if args.requests and not args.sizes:
        raise UsageError("--requests pads batches up the sizes swept: give --sizes too")
    if args.sizes and len(args.target) != 1:
        raise UsageError("--sizes sweeps one --target: give one")
    return sweep_inputs(args.sizes, args.requests) if args.sizes else []


def run_target_report(args: argparse.Namespace, io: IO) -> int:
    import torch

    from graph_harness.reports.cli.target import output_names
    from graph_harness.reports.target_report import write_target_report

    requests = target_inputs(args)
    names = output_names(args.target)
    with staged(args, io) as tmp, progress(io) as say:
        banner(io)
        profile = None
        # every target loaded once, before any runs; one that captures its own graphs
        # (reduce-overhead) is counted by recording them and profiled call by call
        targets = load_targets(args.target, io, own_graphs=not args.check)
        if torch.cuda.is_available():  # counted from the graphs it profiles
            exports, profile, checks = _profile_targets(args, io, say, targets)
        else:
            exports, checks = _count_targets(args, io, say, names, targets)
        sweep = None
        if args.sizes:
            sweep = sweep_target(
                args.target[0],
                args.sizes,
                args.module_scopes,
                io,
                say,
                settings=SweepSettings(),
                warmup=step_warmup(args),
                check_steps=steps_to_check(args) if args.check else None,
                requests=requests,
                most=None,
                budget=None,
            )
        say("writing the report (tables, CSVs, plots)")
        depth = shown_depth(args.module_scopes, list(exports.values()))  # where count cuts
        write_target_report(
            tmp,
            exports,
            command=command_line(),
            profile=profile,
            checks=checks,
            depth=depth,
            sweep=sweep,
        )
        if checks:
            from graph_harness.capture.check.document import write_checks

            write_checks(tmp, checks)
    io.err.print(f"wrote {args.out / 'report.md'}", markup=False)
    return 0


def _profile_targets(
    args: argparse.Namespace, io: IO, say: Callable[[str], None], targets: list
) -> tuple[dict, ProfileResult, dict]:
    """On a GPU: the targets profiled (checked first, with --check), each counted from
    the graphs it profiles; their exports, the profile and the checks."""
    from graph_harness.capture.profile.settings import ProfileSettings

    profile, checks = profile_targets(
        args.target,
        args.module_scopes,
        ProfileSettings(builds=1),
        io,
        say,
        warmup=step_warmup(args),
        check=args.check,
        check_steps=steps_to_check(args),
        targets=targets,
    )
    exports = {n: p.export for n, p in profile.profiles.items()}
    return exports, profile, checks


def _count_targets(
    args: argparse.Namespace,
    io: IO,
    say: Callable[[str], None],
    names: list[str],
    targets: list,
) -> tuple[dict, dict]:
    """Without a GPU: each target counted (and checked, with --check: the checks judged
    once all ran); their exports and checks, by output name."""
    exports, checks = {}, {}
    for name, spec, target in zip(names, args.target, targets):
        got = count_target(
            spec,
            args.module_scopes,
            io,
            warmup=step_warmup(args),
            check=steps_to_check(args) if args.check else None,
            host_launch=False,  # no GPU here
            watch=args.check,  # unchecked, a report replays nothing here: no watch
            target=target,
            progress=say,
        )
        exports[name] = got.export
        if got.check is not None:
            checks[name] = got.check
        del got  # its graph and buffers, before the next target runs
    if checks:
        gate(io, checks)
    return exports, checks
