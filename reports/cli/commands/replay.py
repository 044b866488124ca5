"""`graph-harness replay` (what a node costs) and `graph-harness report` (all of it in one
folder)."""

from __future__ import annotations

import argparse

from graph_harness.capture.errors import require_gpu
from graph_harness.capture.replay.kinds import chain_kinds
from graph_harness.capture.round import chains as round_chains
from graph_harness.capture.round.params import VARIANTS
from graph_harness.reports.cli.args import (
    json_arg,
    out_args,
    round_args,
    subcommand,
    timing_args,
)
from graph_harness.reports.cli.console import (
    IO,
    banner,
    progress,
    replay_settings,
    round_params,
    staged,
    wrote,
)

# Why replay needs a GPU, said before torch's import where the machine surely has none
# (reports/cli/early.py), else after it
NEEDS_GPU = "replay times CUDA graph replays, which run on a CUDA GPU"


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    r = subcommand(
        sub,
        "replay",
        common,
        help="per-node dispatch cost and before/after round timing",
        description="Time graphs of chains of 1 to N nodes of each kind and fit replay time "
        "against length: the slope is what one node costs to dispatch (with a 95% "
        "interval). Time the host side of a launch the same way (the CPU time of one "
        "replay() from an idle device, for a chain and two fork-join shapes). Then time "
        "every variant of the round over several fresh builds, interleaved, and set each "
        "change's measured saving beside the one its removed "
        "nodes predict. Needs a CUDA GPU.",
        examples=[
            "graph-harness replay --out replay",
            "graph-harness replay --kind torch-add --variant shipped --variant fused --json",
        ],
        variants=True,
    )
    round_args(r)
    round_chains.register()  # the choices below list the round's kinds too
    r.add_argument(
        "--kind",
        action="append",
        choices=list(chain_kinds() + chain_kinds(pdl=True)),
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


def check_early(args: argparse.Namespace) -> None:
    """The flags checked before torch is imported (reports/cli/program.py): they need none."""
    round_params(args)
    replay_settings(args)


def run(args: argparse.Namespace, io: IO) -> int:
    from graph_harness.capture.round.replays import run_replays
    from graph_harness.reports.replay_tables import fits_table, host_fits_table, savings_table

    params, settings = round_params(args), replay_settings(args)
    require_gpu(NEEDS_GPU)
    with staged(args, io) as tmp:
        banner(io)
        with progress(io) as say:
            result = run_replays(
                params,
                args.variant or list(VARIANTS),
                kinds=args.kind or chain_kinds(),
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
            if result.host_fits is not None:
                io.out.print(host_fits_table(result.host_fits))
            if result.savings is not None:
                io.out.print(savings_table(result))
    wrote(io, args, "replay.json")
    return 0
