"""`graph-harness sweep`: your step captured at every batch size an engine captures: nodes,
warm-up + capture (and compile) seconds, replay time, graph memory in its own pool and in
one shared pool, the leak check; with request sizes, the padding each ladder costs and
the sizes worth capturing (capture/sweep/)."""

from __future__ import annotations

import argparse
import dataclasses
import re

from graph_harness.capture.sweep.forecast import check_samples
from graph_harness.capture.sweep.padding import BUILTIN
from graph_harness.capture.sweep.settings import CHECK_MODES, SHARED_MODES, SweepSettings
from graph_harness.reports.cli.args import (
    check_arg,
    json_arg,
    module_scopes_arg,
    out_args,
    positive,
    settings_from,
    shown_depth,
    step_warmup,
    steps_to_check,
    subcommand,
    timing_args,
    warmup_arg,
)
from graph_harness.reports.cli.console import IO, UsageError, banner, progress, staged, wrote
from graph_harness.reports.cli.sweeps import sweep_inputs, sweep_target
from graph_harness.reports.cli.target import target_arg
from graph_harness.reports.cli.targets import refuse_check_steps

_UNITS = {"": 1, "B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "KB": 10**3, "MB": 10**6}
_UNITS["GB"] = 10**9


def byte_count(text: str) -> int:
    """--memory-budget's BYTES: a whole number of bytes, or with a unit (512MiB, 2GiB, 8GB)."""
    m = re.fullmatch(r"([0-9]+)\s*([A-Za-z]*)", text.strip())
    unit = m.group(2) if m else None
    if m is None or unit not in _UNITS or not text.isascii() or int(m.group(1)) == 0:
        raise argparse.ArgumentTypeError(
            "expected bytes, a whole number > 0 alone or with a unit (B, KiB, MiB, GiB, KB, "
            f"MB, GB: 512MiB, 2GiB, 8GB), got {text!r}"
        )
    return int(m.group(1)) * _UNITS[unit]


DESCRIPTION = (
    "Capture your step at every batch size of a ladder, as a serving engine "
    "captures one graph per size: per size its nodes, warm-up + capture seconds (compile "
    "seconds for a compiled step), replay time with its 95% interval (sizes interleaved), "
    "rows per second, the graph's memory read from its own pool, and a leak check; then "
    "every size captured again into one shared pool, largest first, with what each adds. "
    "With --requests (the batch sizes your server sees), the time per step each ladder "
    "costs, its padding, and the sizes that minimize it (--choose K, --memory-budget). "
    "With --check interleaved, every size's graph in the shared pool is also replayed in "
    "turns, in a seeded random serving order, each replay compared with its size's eager "
    "step: a size whose buffers another size's capture or replays overwrote fails, naming "
    "both. With --check updated, one executable is switched between the sizes by "
    "cudaGraphExecUpdate in a seeded walk through every transition, each launch compared "
    "with the size's own executable and its eager step, launch attributes an update may "
    "not carry flagged, and each update's cost beside re-capture + instantiate. The "
    "factory is called as FUNCTION(batch=B). On the CPU: dispatched operations "
    "per size, and with --requests each ladder's padded rows and the ladder with the "
    "fewest (times and memory need a GPU). With --predict-from B B [B], the graph memory "
    "of the sizes swept and of vLLM's default ladder predicted from those sizes' allocator "
    "requests, against the truth where captured, beside vLLM's own method."
)
EXAMPLES = [
    "graph-harness sweep --target examples/llama_decode.py:make_step --sizes 1 2 4 8",
    "graph-harness sweep --target examples/llama_decode.py:make_step --sizes 1 8 64 "
    "--module-scopes --requests uniform:1-64 --choose 2 --out sweep",
    "graph-harness sweep --target examples/llama_decode.py:make_step --sizes 1 2 4 8 16 "
    "--check interleaved --seed 3",
    "graph-harness sweep --target examples/llama_decode.py:make_step --sizes 1 2 4 8 "
    "--check updated",
    "graph-harness sweep --target examples/llama_decode.py:make_step --sizes 1 8 64 "
    "--predict-from 1 8 64 --memory-budget 70GiB",
]


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    s = subcommand(
        sub,
        "sweep",
        common,
        help="your step at every batch size: nodes, time, graph memory, padding, sizes to capture",
        description=DESCRIPTION,
        examples=EXAMPLES,
    )
    s.add_argument(
        "--target",
        required=True,
        metavar="MODULE:FUNCTION",
        type=target_arg,
        help="the step to sweep. IMPORTS AND RUNS your code: the module once, then "
        "FUNCTION(batch=B) once per size, each step warmed up and captured twice (own pool, "
        "shared pool), then checked (--check) and replayed (--check interleaved: in turns)",
    )
    s.add_argument(
        "--sizes",
        required=True,
        nargs="+",
        type=positive(1),
        metavar="B",
        help="the batch sizes to capture (an engine's cudagraph_capture_sizes)",
    )
    module_scopes_arg(s)
    warmup_arg(s)
    check_arg(s, CHECK_MODES)
    _choice_args(s)
    timing_args(s, SweepSettings, "sweep settings")
    json_arg(s, "the sweep document")
    out_args(s)


def _choice_args(s: argparse.ArgumentParser) -> None:
    """--requests, --choose, --memory-budget, and --predict-from."""
    g = s.add_argument_group("padding and the sizes to capture (times and memory: GPU)")
    g.add_argument(
        "--requests",
        action="append",
        metavar="FILE|DIST",
        help="the batch sizes your server sees: a file of one size per line (or SIZE COUNT, a "
        "histogram), or a built-in distribution: "
        + "; ".join(f"{k} ({v})" for k, v in BUILTIN.items())
        + ". Repeat for several",
    )
    g.add_argument(
        "--choose",
        type=positive(1),
        metavar="K",
        help="with --requests: choose at most K sizes (default: as many as pay)",
    )
    g.add_argument(
        "--memory-budget",
        type=byte_count,
        metavar="BYTES",
        help="with --requests: choose sizes whose own pools sum to at most BYTES; with "
        "--predict-from instead: the memory for the weights, the graphs and the KV cache "
        "(70GiB), and the KV cache's share of it is shown",
    )
    p = s.add_argument_group("graph memory predicted (GPU)")
    p.add_argument(
        "--predict-from",
        nargs="+",
        type=positive(1),
        metavar="B",
        help="two or three of --sizes: their captures' allocator requests predict the "
        "shared pool plus executables of the sizes swept and of vLLM's default ladder "
        "(67 sizes, 1-512), per size and in total, with an interval, against the truth "
        "where it was captured and beside vLLM's own method",
    )


def check_early(args: argparse.Namespace) -> None:
    """The flags checked before torch is imported (reports/cli/program.py): they need none."""
    check_flags(args)


def check_flags(args: argparse.Namespace) -> list[tuple[dict[int, float], str]]:
    """Every flag checked before anything runs; the --requests read."""
    if args.requests is None and args.choose is not None:
        raise UsageError("--choose chooses sizes for --requests: give --requests FILE|DIST")
    if args.memory_budget is not None and (args.requests is None) == (args.predict_from is None):
        raise UsageError(
            "--memory-budget chooses sizes for --requests, or with --predict-from is the "
            "memory the KV cache is left from: give --requests FILE|DIST or --predict-from "
            "B ..., not both"
        )
    if args.predict_from is not None:
        try:
            check_samples(args.sizes, args.predict_from)
        except ValueError as e:
            raise UsageError(f"--predict-from: {e}") from None
    refuse_check_steps(args)
    if args.seed is not None and args.check not in SHARED_MODES:
        raise UsageError(
            "--seed deals the serving order of --check interleaved (or the walk of --check "
            "updated): give --check interleaved or --check updated"
        )
    twice = sorted({b for b in args.sizes if args.sizes.count(b) > 1})
    if twice:
        raise UsageError(f"--sizes gives {twice[0]} twice: give each batch size once")
    if args.check == "updated" and len(args.sizes) < 2:
        raise UsageError(
            "--check updated switches one executable between sizes: give --sizes at least two"
        )
    return sweep_inputs(args.sizes, args.requests)


def run(args: argparse.Namespace, io: IO) -> int:
    requests = check_flags(args)
    # the sampled sizes' executables resolved below the page, for the prediction
    settings = dataclasses.replace(
        settings_from(SweepSettings, args), resolve=tuple(args.predict_from or ())
    )
    with staged(args, io) as tmp:
        banner(io)
        with progress(io) as say:
            result = sweep_target(
                args.target,
                args.sizes,
                args.module_scopes,
                io,
                say,
                settings=settings,
                warmup=step_warmup(args),
                check_steps=steps_to_check(args) if args.check else None,
                shared_check=args.check if args.check in SHARED_MODES else None,
                requests=requests,
                most=args.choose,
                budget=None if args.predict_from else args.memory_budget,
            )
            if args.predict_from:
                result = result.with_forecast(args.predict_from, budget=args.memory_budget)
        if not result.measured:
            io.note(result.why_not)
        if result.forecast is not None and result.forecast.why_not is not None:
            io.note(f"--predict-from: {result.forecast.why_not}")
        for mode in SHARED_MODES:
            turns = getattr(result, mode)
            if turns is not None and turns.why_not is not None:
                io.note(turns.verdict())
        if tmp is not None:
            result.write(tmp)
            _plots(tmp, result)
        depth = shown_depth(args.module_scopes, list(result.exports.values()))
        show(io, result, depth=depth)
    wrote(io, args, "the sweep")
    return 0


def _plots(folder: object, result: object) -> None:
    from graph_harness.reports import plots

    if result.measured:
        plots.sweep(result, folder / "sweep.png")
        if result.padding:
            plots.padding(result, folder / "padding.png")


def show(io: IO, result: object, *, depth: int | None) -> None:
    from graph_harness.reports.forecast_tables import forecast_tables
    from graph_harness.reports.sweep_tables import (
        checks_line,
        interleaved_table,
        ladders_tables,
        memory_by_module_table,
        memory_truth_table,
        shared_pool_table,
        sizes_table,
        startup_table,
        updated_table,
    )

    if io.json:
        io.print_json(result.to_dict())
        return
    io.out.print(sizes_table(result))
    line = checks_line(result)
    if line is not None:
        io.out.print(line, markup=False, soft_wrap=True)
    if result.shared is not None:
        io.out.print(shared_pool_table(result))
    for extra in (memory_truth_table(result), *forecast_tables(result), startup_table(result)):
        if extra is not None:
            io.out.print(extra)
    for mode, table in (("interleaved", interleaved_table), ("updated", updated_table)):
        turns = getattr(result, mode)
        if turns is not None and turns.why_not is None:
            io.out.print(table(result))
            io.out.print(turns.verdict(), markup=False, soft_wrap=True)
    table = memory_by_module_table(result, depth)
    if table is not None:
        io.out.print(table)
    for t in ladders_tables(result):
        io.out.print(t)
