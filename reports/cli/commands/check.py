"""`graph-harness check`: does the captured graph compute what your step computes? Your
step run over a trajectory of calls from its start, twice eagerly and twice replayed,
outputs and state compared after every call (capture/check/step.py); also what its
warm-ups show (does it repeat, what a call changes), host copies in the graph, random
numbers drawn. On the CPU, the eager part only. Exit 0 passed, 1 failed, 3 not verified."""

from __future__ import annotations

import argparse
import os
import sys

from graph_harness.capture.errors import UsageError
from graph_harness.reports.cli.args import (
    json_arg,
    module_scopes_arg,
    out_args,
    soak_args,
    step_warmup,
    steps_arg,
    steps_to_check,
    subcommand,
    warmup_arg,
)
from graph_harness.reports.cli.console import IO, banner, progress, staged, wrote
from graph_harness.reports.cli.target import target_arg
from graph_harness.reports.cli.targets import (
    count_target,
    show_checks,
)


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    c = subcommand(
        sub,
        "check",
        common,
        help="does your step's graph compute what the step computes? (eager against replay)",
        description="Run your step over a trajectory of calls from its start (--steps, each "
        "fed its inputs by step.feed(i) where it has one), twice eagerly and twice replayed "
        "from its graph, and compare outputs and every state tensor after every call: bit for "
        "bit where the two eager runs agree, within their measured spread where they do not. "
        "Also report whether it repeats, what a call changes, host copies and random numbers. "
        "Exit 0 when it passed, 1 when the graph computes something else, 3 when it could "
        "not be verified (on the CPU: a host value that changes, a host read).",
        examples=[
            "graph-harness check --target examples/llama_decode.py:make_step --module-scopes 2",
            "graph-harness check --target examples/hf_decode.py:make_step --steps to-end",
            "graph-harness check --target examples/llama_decode.py:make_step --soak 10000",
            "graph-harness check --target mypkg.steps:make_step --json --out checked",
        ],
    )
    c.add_argument(
        "--target",
        required=True,
        metavar="MODULE:FUNCTION",
        type=target_arg,
        help="the step to check. IMPORTS AND RUNS your code, as count --target: the module, "
        "FUNCTION(), its warm-ups and capture, 2 x N eager calls and 2 x N replays (GPU), "
        "and with --soak, that many more replays",
    )
    module_scopes_arg(c)
    warmup_arg(c)
    steps_arg(c)
    soak_args(c)
    json_arg(c, "the check")
    out_args(c)


def check_early(args: argparse.Namespace) -> None:
    """The flags checked before torch is imported (reports/cli/program.py): they need none."""
    if args.soak_deadline is not None and not args.soak:
        raise UsageError("--soak-deadline applies to a soak: give --soak N with it")


def run(args: argparse.Namespace, io: IO) -> int:
    check_early(args)
    with staged(args, io) as tmp:
        banner(io)
        with progress(io) as say:
            got = count_target(
                args.target,
                args.module_scopes,
                io,
                warmup=step_warmup(args),
                check=steps_to_check(args),
                soak=args.soak or 0,
                soak_deadline=args.soak_deadline,
                host_launch=False,
                progress=say,
            )
            results = {"target": got.check}
        if tmp is not None:
            got.export.write_json(tmp / "nodes-target.json")
            from graph_harness.capture.check.document import write_checks

            write_checks(tmp, results)
        show_checks(io, results)  # before the commit, as count's
    wrote(io, args, "the check")
    r = results["target"]
    if not r.passed and (io.json or not io.out.file.isatty()):
        io.note(r.headline())  # where stdout is a file or JSON: said where a person reads
    if r.soak and r.soak.get("hang"):
        # the device still runs the hung replay: an ordinary exit could wait on it (the
        # CUDA context's teardown); everything is written and committed by now
        for f in (io.out.file, io.err.file, sys.stdout, sys.stderr):
            f.flush()
        os._exit(r.exit_code)
    return r.exit_code
