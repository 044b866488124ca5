"""`graph-harness profile`: every node's in-round cost under CUPTI (its duration and the
gap before it), rolled up by scope, and savings priced from the profiles against the
measured ones. Needs a GPU: CUPTI records what the GPU ran."""

from __future__ import annotations

import argparse
from dataclasses import fields

from graph_harness.capture.params import VARIANTS, ProfileSettings
from graph_harness.reports.commands.args import (
    json_arg,
    module_scopes_arg,
    out_args,
    positive,
    round_args,
    timing_args,
)
from graph_harness.reports.commands.console import (
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

ROUND_ONLY = ("builds",)  # settings that apply to the built-in round, not to --target


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    pr = sub.add_parser(
        "profile",
        parents=[common],
        help="every node's in-round cost under CUPTI: duration, gap before it, by scope (GPU)",
    )
    round_args(pr)
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
    module_scopes_arg(pr)
    pr.add_argument("--pdl", action="store_true", help="rounds with programmatic dependent launch")
    pr.add_argument(
        "--top", type=positive(1), default=10, help="nodes and groups per table (default 10)"
    )
    timing_args(pr, ProfileSettings, "profile settings")
    json_arg(pr, "the profile document")
    out_args(pr)


def settings_from(args) -> ProfileSettings:
    given = {
        f.name: v for f in fields(ProfileSettings) if (v := getattr(args, f.name, None)) is not None
    }
    try:
        return ProfileSettings(**given)
    except ValueError as e:
        raise UsageError(str(e)) from e


def check_flags(args) -> None:
    if args.target:
        flags = given_round_flags(args)
        flags += ["--variant"] * bool(args.variant) + ["--pdl"] * args.pdl
        flags += [f"--{n}" for n in ROUND_ONLY if getattr(args, n, None) is not None]
        refuse(flags, "apply to the built-in round, not to --target: drop them")
        if len(args.target) > 2:
            raise UsageError(
                f"profile takes one --target, or two to price the second against the first; "
                f"got {len(args.target)}"
            )
    elif args.module_scopes is not False:
        raise UsageError(
            "--module-scopes attributes a model's nodes to its modules: it needs --target "
            "(the built-in round has its own stage and step scopes)"
        )


def require_gpu() -> None:
    import torch

    if not torch.cuda.is_available():
        raise UsageError(
            "no GPU here: profile replays graphs under CUPTI, which records what a CUDA "
            "GPU ran (use `graph-harness count` for CPU dispatch counts)"
        )


def run(args, io: IO) -> int:
    check_flags(args)
    settings = settings_from(args)
    params = None if args.target else round_params(args)
    require_gpu()
    depth = None if args.module_scopes in (False, None) else args.module_scopes
    with staged(args, io) as tmp:
        banner(io)
        with progress(io) as prog:
            task = prog.add_task("profiling", total=None)
            say = lambda m: prog.update(task, description=m)
            if args.target:
                result = profile_targets(args.target, args.module_scopes, settings, io, say)
            else:
                from graph_harness.capture.profile_run import profile_rounds

                variants = args.variant or list(VARIANTS)
                result = profile_rounds(params, variants, settings, pdl=args.pdl, progress=say)
        if tmp is not None:
            result.write(tmp, depth)
            write_plot(tmp, result, depth)
        show(io, result, depth=depth, top=args.top)  # before the commit, as count's
    wrote(io, args, "the profile")
    return 0


def profile_targets(specs, module_scopes, settings, io: IO, say):
    """Capture each --target's step (its code runs: import, factory, warm-up, capture),
    keep its graph, and profile them together (the second priced against the first)."""
    from graph_harness.capture.profile_run import profile_steps
    from graph_harness.reports.commands.count import capture_target

    names = [spec.rpartition(":")[2] for spec in specs]
    if len(names) == 2 and names[0] == names[1]:
        names = [f"{names[0]}-a", f"{names[1]}-b"]
    steps, keep = {}, []
    for name, spec in zip(names, specs):
        say(f"capturing {spec}")
        export, captured, target = capture_target(spec, module_scopes, io)
        steps[name] = (export, captured.graph)
        keep.append(target)  # the step's buffers must outlive its graph
    return profile_steps(steps, settings, progress=say)


def write_plot(folder, result, depth) -> None:
    from graph_harness.reports import plots

    plots.dispatch_share(result.scope_table(depth), folder / "dispatch_share.png")


def show(io: IO, result, *, depth: int | None, top: int) -> None:
    from graph_harness.reports.profile_tables import (
        breakdown_table,
        pairs_table,
        scope_tables,
        summary_table,
        top_gaps_tables,
    )

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
    if io.json:
        io.print_json(result.to_dict(depth))
        return
    io.out.print(summary_table(result))
    for t in scope_tables(result, depth):
        io.out.print(t)
    for t in top_gaps_tables(result, top):
        io.out.print(t)
    if result.pairs:
        pairs = result.pair_table()
        io.out.print(pairs_table(pairs))
        failed = pairs[~pairs.passed & pairs.measured_us.notna()]
        if len(failed):
            breakdown = result.breakdown()
            for r in failed.itertuples():
                io.out.print(breakdown_table(breakdown, r.a, r.b, top))
