"""`graph-harness check`: does the captured graph compute what your step computes? Your
step run over a trajectory of calls from its start, twice eagerly and twice replayed,
outputs and state compared after every call (capture/check/step.py); also what its
warm-ups show (does it repeat, what a call changes), host copies in the graph, random
numbers drawn. On the CPU, the eager part only. Exit 0 passed, 1 failed, 3 not verified."""

from __future__ import annotations

import argparse

from graph_harness.reports.cli.args import (
    check_steps,
    json_arg,
    module_scopes_arg,
    out_args,
    step_warmup,
    steps_arg,
    subcommand,
    warmup_arg,
)
from graph_harness.reports.cli.console import IO, banner, progress, staged, wrote
from graph_harness.reports.cli.target import target_arg

CHECK_SCHEMA = "graph-harness/check"


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
            "graph-harness check --target mypkg.steps:make_step --json --out checked",
        ],
    )
    c.add_argument(
        "--target",
        required=True,
        metavar="MODULE:FUNCTION",
        type=target_arg,
        help="the step to check. IMPORTS AND RUNS your code, as count --target: the module, "
        "FUNCTION(), its warm-ups and capture, 2 x N eager calls and 2 x N replays (GPU)",
    )
    module_scopes_arg(c)
    warmup_arg(c)
    steps_arg(c)
    json_arg(c, "the check")
    out_args(c)


def run(args, io: IO) -> int:
    from graph_harness.reports.cli.commands.count import capture_target

    with staged(args, io) as tmp:
        banner(io)
        with progress(io) as say:
            say(f"capturing {args.target}")
            got = capture_target(args.target, args.module_scopes, io, warmup=step_warmup(args))
            say(f"checking {args.target}")
            results = {"target": check_target(got, check_steps(args))}
        if tmp is not None:
            got.export.write_json(tmp / "nodes-target.json")
            write_checks(tmp, results)
        show_checks(io, results)  # before the commit, as count's
    wrote(io, args, "the check")
    r = results["target"]
    if not r.passed:
        io.note(r.verdict())
    return r.exit_code


def check_target(got, steps: int):
    """Check a captured target (count.capture_target with watch=True) over `steps` calls."""
    from graph_harness.capture.check.step import check_captured

    return check_captured(
        got.target.step,
        got.export,
        got.captured,
        got.watch.repeatability,
        name=got.target.spec,
        steps=steps,
    )


def check_doc(results: dict) -> dict:
    return {
        "schema": CHECK_SCHEMA,
        "schema_version": 2,  # 2: trajectories (steps, status, each finding's step)
        "checks": {name: r.to_dict() for name, r in results.items()},
    }


def write_checks(folder, results: dict) -> None:
    import json

    from graph_harness.capture.files import write_atomic

    text = json.dumps(check_doc(results), indent=1, allow_nan=False) + "\n"
    write_atomic(folder / "check.json", text)


def show_checks(io: IO, results: dict, *, json_too: bool = True) -> None:
    """The findings tables and verdicts (stdout), or the check document with --json."""
    from graph_harness.reports.check_tables import findings_table

    if io.json:
        if json_too:
            io.print_json(check_doc(results))
        return
    for r in results.values():
        io.out.print(findings_table(r))
        io.out.print(r.verdict(), markup=False)


def gate(io: IO, results: dict) -> None:
    """--check on count, profile and report: a check that did not pass prints its findings
    and stops the command (CheckFailed: exit 1; CheckUnverified: exit 3; nothing written)."""
    from graph_harness.capture.check.step import gate as failed

    if any(not r.passed for r in results.values()):
        show_checks(io, results)
    failed(results)
