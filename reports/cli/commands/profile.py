"""`graph-harness profile`: every node's in-round cost under CUPTI (its duration and the
gap before it), rolled up by scope, and savings priced from the profiles against the
measured ones. Needs a GPU: CUPTI records what the GPU ran."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from graph_harness.capture.errors import require_gpu
from graph_harness.capture.profile.settings import ProfileSettings
from graph_harness.capture.round.params import VARIANTS
from graph_harness.reports.cli.args import (
    check_arg,
    json_arg,
    module_scopes_arg,
    out_args,
    positive,
    round_args,
    settings_from,
    shown_depth,
    step_warmup,
    steps_to_check,
    subcommand,
    timing_args,
    warmup_arg,
)
from graph_harness.reports.cli.console import (
    IO,
    UsageError,
    banner,
    given_round_flags,
    progress,
    refuse,
    round_params,
    staged,
    wrote,
)
from graph_harness.reports.cli.target import target_arg
from graph_harness.reports.cli.targets import (
    profile_targets,
    refuse_check_steps,
    refuse_target_only,
    show_checks,
)
from graph_harness.reports.text import plural

if TYPE_CHECKING:
    from pathlib import Path

    from graph_harness.capture.check.findings import CheckResult
    from graph_harness.capture.profile.document import ProfileResult

ROUND_ONLY = ("builds",)  # settings that apply to the built-in round, not to --target


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    pr = subcommand(
        sub,
        "profile",
        common,
        help="every node's in-round cost under CUPTI: duration, gap before it, by scope (GPU)",
        description="Replay the round's variants (or your step, --target) under CUPTI, match "
        "every activity to its graph node and cost each node per replay: its duration and "
        "the gap before it. Prints the dispatch share by step or scope, the largest gaps, "
        "and each change's saving priced from the profiles against the measured one; --out "
        "adds CSVs, a plot and a Perfetto timeline (trace.json). Needs a CUDA GPU.",
        examples=[
            "graph-harness profile --variant shipped --variant fused --out profile",
            "graph-harness profile --target examples/llama_decode.py:make_step --module-scopes 2",
        ],
        variants=True,
    )
    round_args(pr)
    pr.add_argument(
        "--variant", action="append", choices=list(VARIANTS), help="round to profile (default: all)"
    )
    pr.add_argument(
        "--target",
        action="append",
        metavar="MODULE:FUNCTION",
        type=target_arg,
        help="profile your own step instead (IMPORTS AND RUNS your code, as count --target); "
        "give two to price the second against the first",
    )
    module_scopes_arg(pr)
    warmup_arg(pr)
    check_arg(pr)
    pr.add_argument("--pdl", action="store_true", help="rounds with programmatic dependent launch")
    pr.add_argument(
        "--top", type=positive(1), default=10, help="nodes and groups per table (default 10)"
    )
    timing_args(pr, ProfileSettings, "profile settings")
    json_arg(pr, "the profile document")
    out_args(pr)


# Why profile needs a GPU, said before torch's import where the machine surely has none
# (reports/cli/early.py), else after it
NEEDS_GPU = "profile replays graphs under CUPTI, which records what a CUDA GPU ran"


def check_flags(args: argparse.Namespace) -> None:
    if args.target:
        flags = given_round_flags(args)
        flags += ["--variant"] * bool(args.variant) + ["--pdl"] * args.pdl
        flags += [f"--{n}" for n in ROUND_ONLY if getattr(args, n, None) is not None]
        refuse(flags, "apply to the built-in round, not to --target: drop them")
        refuse_check_steps(args)
        if len(args.target) > 2:
            raise UsageError(
                f"profile takes one --target, or two to price the second against the first; "
                f"got {len(args.target)}"
            )
    else:
        refuse_target_only(args)


def check_early(args: argparse.Namespace) -> None:
    """The flags checked before torch is imported (reports/cli/program.py): they need none."""
    check_flags(args)


def run(args: argparse.Namespace, io: IO) -> int:
    check_flags(args)
    settings = settings_from(ProfileSettings, args)
    params = None if args.target else round_params(args)
    require_gpu(NEEDS_GPU)
    with staged(args, io) as tmp:
        banner(io)
        with progress(io) as say:
            checks = {}
            if args.target:
                result, checks = profile_targets(
                    args.target,
                    args.module_scopes,
                    settings,
                    io,
                    say,
                    warmup=step_warmup(args),
                    check=args.check,
                    check_steps=steps_to_check(args),
                )
            else:
                from graph_harness.capture.round.profile import profile_rounds

                variants = args.variant or list(VARIANTS)
                say(f"capturing {plural(len(variants), 'round')}")
                result = profile_rounds(params, variants, settings, pdl=args.pdl, progress=say)
            exports = [p.export for p in result.profiles.values()]
            depth = shown_depth(args.module_scopes, exports) if args.target else None
            if tmp is not None:
                from graph_harness.reports.kernel_names import short_names

                say("writing the profile (tables, CSVs, plot, timeline)")
                result.write(tmp, depth, names=short_names)
                write_plot(tmp, result, depth)
                if checks:
                    from graph_harness.capture.check.document import write_checks

                    write_checks(tmp, checks)
        show(io, result, depth=depth, top=args.top, checks=checks)  # before the commit, as count's
    wrote(io, args, "the profile")
    return 0


def write_plot(folder: Path, result: ProfileResult, depth: int | None) -> None:
    from graph_harness.reports import plots

    plots.dispatch_share(result.scope_table(depth), folder / "dispatch_share.png")


def _show_launches(io: IO, result: ProfileResult) -> None:
    """Each graph's launch, and whether a decode loop's back-to-back replays hide it."""
    from graph_harness.reports.profile_tables import launch_notes, launch_table

    table = launch_table(result)
    if table is None:
        return
    io.out.print(table)
    for line in launch_notes(result):
        io.out.print(line, soft_wrap=True, markup=False)


def show(
    io: IO,
    result: ProfileResult,
    *,
    depth: int | None,
    top: int,
    checks: dict[str, CheckResult] | None = None,
) -> None:
    from graph_harness.reports.profile_tables import (
        excess_table,
        net_period_notes,
        net_table,
        summary_table,
        top_gaps_tables,
    )

    _matching_notes(io, result)
    if io.json:
        from graph_harness.capture.profile.document import profile_document

        io.print_json(profile_document(result, depth, checks))
        return
    if checks:
        show_checks(io, checks)
    io.out.print(summary_table(result))
    if result.excess is not None and result.excess.note:
        io.note(
            "the profiler's own cost could not be measured on the calibration chains "
            f"(timed graphs still take their own timing's): {result.excess.note}"
        )
    for t in (excess_table(result), net_table(result)):
        if t is not None:  # the chains' table; the net figures on each graph's basis
            io.out.print(t)
    for line in net_period_notes(result):
        io.out.print(line, soft_wrap=True, markup=False)
    _show_launches(io, result)
    _show_scopes(io, result, depth)
    for t in top_gaps_tables(result, top):
        io.out.print(t)
    if result.pairs:
        _show_pairs(io, result, top)


def _matching_notes(io: IO, result: ProfileResult) -> None:
    """A note for each graph whose activities were not all matched to its nodes, or
    whose two matchings disagree."""
    for name, p in result.profiles.items():
        m = p.matching
        if not m["verified"]:
            io.note(
                f"{name}: activities not all matched to nodes ({m['unmatched_activities']} "
                f"activities and {m['unmatched_nodes']} nodes unmatched, {m['out_of_order']} "
                f"out of order over {len(p.replays)} replays); its figures are partial"
            )
        if m.get("agreement") is not None and m["agreement"] < 1:
            io.note(f"{name}: matching by order and by graph node id disagree")


def _show_scopes(io: IO, result: ProfileResult, depth: int | None) -> None:
    """Each graph's costs by scope, and for a step where deeper scopes were cut off, a
    note saying so."""
    from graph_harness.reports.profile_tables import scope_tables
    from graph_harness.reports.tables import deeper_note

    for t, (name, p) in zip(scope_tables(result, depth), result.profiles.items()):
        io.out.print(t)
        note = deeper_note(p.nodes, depth) if not p.export.is_round else None
        if note:
            io.out.print(f"{name}: {note}", soft_wrap=True, markup=False)


def _show_pairs(io: IO, result: ProfileResult, top: int) -> None:
    """The priced pairs and their verdicts, and where a pair failed against its measured
    saving, where the priced saving comes from."""
    from graph_harness.reports.profile_tables import breakdown_table, pair_verdicts, pairs_table

    pairs = result.pair_table()
    io.out.print(pairs_table(pairs))
    for line in pair_verdicts(pairs):
        io.out.print(line, soft_wrap=True, markup=False)
    failed = pairs[~pairs.passed & pairs.measured_us.notna()]
    if len(failed):
        breakdown = result.breakdown()
        for r in failed.itertuples():
            io.out.print(breakdown_table(breakdown, r.a, r.b, top))
