"""`graph-harness replay` (what a node costs) and `graph-harness report` (all of it in one
folder)."""

from __future__ import annotations

import argparse

from graph_harness.capture.errors import require_gpu
from graph_harness.capture.replay.settings import CHAIN_KINDS, PDL_KINDS
from graph_harness.capture.round.params import VARIANTS
from graph_harness.reports.cli.args import (
    check_arg,
    check_steps,
    json_arg,
    module_scopes_arg,
    out_args,
    round_args,
    shown_depth,
    step_warmup,
    subcommand,
    timing_args,
    warmup_arg,
)
from graph_harness.reports.cli.console import (
    IO,
    UsageError,
    banner,
    command_line,
    given_round_flags,
    given_timing_flags,
    progress,
    refuse,
    replay_settings,
    round_params,
    staged,
    wrote,
)
from graph_harness.reports.cli.target import target_arg


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    r = subcommand(
        sub,
        "replay",
        common,
        help="per-node dispatch cost and before/after round timing",
        description="Time graphs of chains of 1 to N nodes of each kind and fit replay time "
        "against length: the slope is what one node costs to dispatch (with a 95% "
        "interval). Then time every variant of the round over several fresh builds, "
        "interleaved, and set each change's measured saving beside the one its removed "
        "nodes predict. Needs a CUDA GPU.",
        examples=[
            "graph-harness replay --out replay",
            "graph-harness replay --kind torch-add --variant shipped --variant fused --json",
        ],
        variants=True,
    )
    round_args(r)
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
    timing_args(r)
    json_arg(r, "the replay document")
    out_args(r)


def run_replay(args, io: IO) -> int:
    from graph_harness.capture.replay.document import run_replays
    from graph_harness.reports.tables import fits_table, savings_table

    params, settings = round_params(args), replay_settings(args)
    require_gpu("replay times CUDA graph replays, which run on a CUDA GPU")
    with staged(args, io) as tmp:
        banner(io)
        with progress(io) as say:
            result = run_replays(
                params,
                args.variant or list(VARIANTS),
                kinds=args.kind or CHAIN_KINDS,
                settings=settings,
                pdl=args.pdl,
                progress=say,
            )
        if tmp is not None:
            result.write_json(tmp / "replay.json")
        if io.json:  # printed before the commit: a failed print leaves --out as it was
            io.print_json(result.to_dict())
        else:
            io.out.print(fits_table(result.fits))
            if result.savings is not None:
                io.out.print(savings_table(result))
    wrote(io, args, "replay.json")
    return 0


def add_report_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = subcommand(
        sub,
        "report",
        common,
        help="counts, deltas, replays and plots into one folder",
        description="All of it into one folder: report.md (readable alone), a CSV of every "
        "table, the JSON exports and PNG plots. For the built-in round: counts of every "
        "variant, their deltas, and on a GPU the per-node costs, measured and predicted "
        "savings, the in-round profile and its timeline. For --target: counts by module, "
        "the delta of two targets, and on a GPU their profile.",
        examples=[
            "graph-harness report --out report",
            "graph-harness report --target examples/llama_decode.py:make_step --check "
            "--module-scopes --out llama",
        ],
        gpu_examples=[  # a compiled step is counted on CUDA only (capture/graph/compiled.py)
            "graph-harness report --target examples/llama_decode.py:make_step "
            "--target examples/llama_decode.py:make_compiled_step --out llama",
        ],
        variants=True,
    )
    p.add_argument(
        "--target",
        action="append",
        metavar="MODULE:FUNCTION",
        type=target_arg,
        help="report on your own step instead of the round (IMPORTS AND RUNS your code, as "
        "count --target); give two for their delta (the first is A)",
    )
    module_scopes_arg(p)
    warmup_arg(p)
    check_arg(p)
    round_args(p)
    timing_args(p)
    out_args(p, required=True)


def run_report(args, io: IO) -> int:
    import torch

    if (
        args.target
        or args.module_scopes is not False
        or args.step_warmup is not None
        or args.check
        or args.check_steps is not None
    ):
        return run_target_report(args, io)
    from graph_harness.capture import count_round
    from graph_harness.capture.replay.document import run_replays
    from graph_harness.capture.round.exactness import exactness
    from graph_harness.reports.report import write_report

    params, settings = round_params(args), replay_settings(args)
    cuda = torch.cuda.is_available()
    if not cuda and given_timing_flags(args):
        io.note(
            f"{', '.join(given_timing_flags(args))} not used: without a CUDA device "
            "the report has counts only, no replays"
        )
    with staged(args, io) as tmp:
        banner(io)
        with progress(io) as say:
            counted = {}
            for v in VARIANTS:
                say(f"counting {v}")
                counted[v] = count_round(params, v)
            say("comparing the variants' outputs bit for bit")
            exact = exactness(counted)
            exports = {v: c.export for v, c in counted.items()}
            del counted  # their graphs and buffers, before anything is timed
            replay, profile, skipped = None, None, "no CUDA device on this machine"
            if cuda:
                from graph_harness.capture.profile.run import profile_rounds
                from graph_harness.capture.profile.settings import ProfileSettings

                replay = run_replays(params, list(VARIANTS), settings=settings, progress=say)
                say(f"profiling {len(VARIANTS)} rounds")
                profile = profile_rounds(
                    params, list(VARIANTS), ProfileSettings(builds=1), timed=False, progress=say
                )
                skipped = None
            say("writing the report (tables, CSVs, plots)")
            write_report(
                tmp,
                exports,
                replay,
                command=command_line(),
                skipped=skipped,
                profile=profile,
                exact=exact,
            )
    io.err.print(f"wrote {args.out / 'report.md'}", markup=False)
    return 0


def run_target_report(args, io: IO) -> int:
    import torch

    from graph_harness.reports.cli.commands.check import check_target, gate, write_checks
    from graph_harness.reports.cli.commands.count import (
        capture_target,
        load_targets,
        refuse_check_steps,
    )
    from graph_harness.reports.cli.target import output_names
    from graph_harness.reports.target_report import write_target_report

    if not args.target:
        from graph_harness.reports.cli.commands.count import refuse_target_only

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
    names = output_names(args.target)
    with staged(args, io) as tmp, progress(io) as say:
        banner(io)
        exports, profile, checks = {}, None, {}
        if torch.cuda.is_available():  # counted from the graphs it profiles, once each
            from graph_harness.capture.profile.settings import ProfileSettings
            from graph_harness.reports.cli.commands.profile import profile_targets

            profile, checks = profile_targets(
                args.target,
                args.module_scopes,
                ProfileSettings(builds=1),
                io,
                say,
                warmup=step_warmup(args),
                check=args.check,
                check_steps=check_steps(args),
            )
            exports = {n: p.export for n, p in profile.profiles.items()}
        else:
            targets = load_targets(args.target, io)  # each checked before any runs
            for name, spec, target in zip(names, args.target, targets):
                say(f"counting {spec}")
                got = capture_target(
                    spec,
                    args.module_scopes,
                    io,
                    warmup=step_warmup(args),
                    watch=args.check,
                    target=target,
                )
                exports[name] = got.export
                if args.check:
                    say(f"checking {spec}")
                    checks[name] = check_target(got, check_steps(args))
                del got  # its graph and buffers, before the next target runs
            if checks:
                gate(io, checks)
        say("writing the report (tables, CSVs, plots)")
        depth = shown_depth(args.module_scopes, list(exports.values()))  # where count cuts
        write_target_report(
            tmp, exports, command=command_line(), profile=profile, checks=checks, depth=depth
        )
        if checks:
            write_checks(tmp, checks)
    io.err.print(f"wrote {args.out / 'report.md'}", markup=False)
    return 0
