"""The graph-harness command line: count, delta, replay, report.

Exit codes: 0 success, 2 usage errors (bad arguments or inputs), 1 failures (a one-line
reason; the traceback only with --debug), 130 on Ctrl-C. Output folders are built under a
temporary name and renamed when complete, so an interrupted run leaves nothing partial.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from rich.console import Console

ROUND_FIELDS = ("stages", "rows", "k", "world", "rank", "shard", "seed")


class UsageError(Exception):
    """Bad input: exit code 2."""


def _round_args(p: argparse.ArgumentParser) -> None:
    from capture import RoundParams

    d = RoundParams()  # the one source of defaults
    g = p.add_argument_group("round parameters")
    for name in ROUND_FIELDS:
        g.add_argument(
            f"--{name}", type=int, default=getattr(d, name), help=f"(default {getattr(d, name)})"
        )


def _out_args(p: argparse.ArgumentParser, required: bool = False) -> None:
    p.add_argument("--out", type=Path, required=required, help="output folder")
    p.add_argument("--force", action="store_true", help="replace an existing output folder")


def build_parser() -> argparse.ArgumentParser:
    from capture import VARIANTS
    from capture.replay import CHAIN_KINDS, DEFAULT_LENGTHS, PDL_KINDS

    ap = argparse.ArgumentParser(
        prog="graph-harness",
        description="Capture LLM decode rounds into CUDA graphs, count every node, and "
        "price each node in time.",
    )
    ap.add_argument("--debug", action="store_true", help="show tracebacks on failure")
    sub = ap.add_subparsers(dest="command", required=True)

    c = sub.add_parser("count", help="capture the decode round (or --target) and count nodes")
    _round_args(c)
    c.add_argument(
        "--variant",
        action="append",
        choices=list(VARIANTS),
        help="variant to count; repeat for several (default: all)",
    )
    c.add_argument(
        "--target",
        metavar="MODULE:FUNCTION",
        help="count your own callable instead: FUNCTION() returns the callable",
    )
    c.add_argument(
        "--pdl",
        action="store_true",
        help="launch the harness's Triton kernels with programmatic dependent launch",
    )
    c.add_argument("--per-stage", action="store_true", help="print each variant's stage table")
    c.add_argument(
        "--distributed",
        action="store_true",
        help="one process per rank under torchrun: a real all-gather (NCCL on "
        "GPUs, gloo on CPU); world and rank come from the process group",
    )
    _out_args(c)

    d = sub.add_parser("delta", help="node delta between two exports or two variants")
    d.add_argument("a", help="an export file (nodes-*.json) or a variant name")
    d.add_argument("b", help="an export file (nodes-*.json) or a variant name")
    d.add_argument(
        "--from",
        dest="from_dir",
        type=Path,
        help="read variants from this `count --out` folder instead of counting",
    )
    _round_args(d)
    d.add_argument("--csv", type=Path, help="write the by-kernel delta as CSV here")

    r = sub.add_parser("replay", help="per-node dispatch cost and before/after round timing")
    _round_args(r)
    r.add_argument(
        "--kind",
        action="append",
        choices=list(CHAIN_KINDS + PDL_KINDS),
        help="chain kind; repeat for several (default: all but the PDL ones). torch-add "
        "and memcpy are always measured: the round savings price nodes with them",
    )
    r.add_argument("--lengths", type=int, nargs="+", default=list(DEFAULT_LENGTHS))
    r.add_argument("--trials", type=int, default=30)
    r.add_argument(
        "--variant",
        action="append",
        choices=list(VARIANTS),
        help="round variant to time (default: all)",
    )
    r.add_argument("--pdl", action="store_true", help="rounds with programmatic dependent launch")
    _builds_arg(r)
    _out_args(r)

    p = sub.add_parser("report", help="counts, deltas, replays and plots into one folder")
    _round_args(p)
    p.add_argument("--trials", type=int, default=30)
    _builds_arg(p)
    _out_args(p, required=True)
    return ap


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return value


def _builds_arg(parser) -> None:
    parser.add_argument(
        "--builds",
        type=_positive,
        default=3,
        help="times each round is built afresh for timing (its buffers land elsewhere each "
        "time; savings pool the builds). Default 3",
    )


def banner(console: Console) -> None:
    import torch

    from capture import default_device

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
    console.print(
        f"[bold]graph-harness[/] | {where} | torch {torch.__version__} | "
        f"triton {tv} | counts: {source}"
    )


def _params(args):
    from capture import RoundParams

    return RoundParams(**{k: getattr(args, k) for k in ROUND_FIELDS})


def _load_target(spec: str):
    import importlib

    module, _, func = spec.partition(":")
    if not module or not func:
        raise UsageError(f"--target must be MODULE:FUNCTION, got {spec!r}")
    if "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))  # as `python -m` would: modules beside you import
    try:
        factory = getattr(importlib.import_module(module), func)
    except (ImportError, AttributeError) as e:
        raise UsageError(f"--target {spec!r} does not import: {e}") from e
    fn = factory()
    if not callable(fn):
        raise UsageError(f"--target {spec!r} returned {type(fn).__name__}, not a callable")
    return fn


def cmd_count_distributed(args, console: Console) -> int:
    import torch.distributed as dist

    from capture import RoundParams
    from capture.distributed import init_from_env
    from reports.report import staged_output

    if args.target:
        raise UsageError(
            "--target and --distributed do not combine yet: the distributed "
            "mode runs the built-in round"
        )
    setup = init_from_env()
    default_world = RoundParams().world
    if args.world not in (default_world, setup.world):
        raise UsageError(f"--world {args.world} but {setup.world} processes joined")
    params = RoundParams(
        **{**{k: getattr(args, k) for k in ROUND_FIELDS}, "world": setup.world, "rank": setup.rank}
    )
    lead = setup.rank == 0
    try:
        with staged_output(args.out if lead else None, args.force) as tmp:
            _count_distributed(args, console, setup, params, tmp)
        if lead and args.out:
            console.print(f"wrote the exports of every rank to {args.out}")
        dist.barrier()
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    return 0


def _count_distributed(args, console, setup, params, tmp) -> None:
    import torch.distributed as dist

    from capture import VARIANTS, NodeExport
    from capture.distributed import count_distributed, merge
    from reports.tables import totals_table

    lead = setup.rank == 0
    if lead:
        banner(console)
        console.print(f"distributed: world {setup.world}, backend {setup.backend}")
    names = args.variant or list(VARIANTS)
    mine = [count_distributed(params, v, setup).export for v in names]
    gathered = [None] * setup.world if lead else None
    dist.gather_object([e.to_dict() for e in mine], gathered, dst=0)
    if not lead:
        return
    per_rank = [[NodeExport.from_dict(d) for d in docs] for docs in gathered]
    console.print(totals_table([per_rank[0][i] for i in range(len(names))]))
    for i, v in enumerate(names):
        m = merge([per_rank[r][i] for r in range(setup.world)])
        verdict = "same structure on every rank" if m.same_structure else m.first_difference
        console.print(f"{v}: nodes per rank {m.totals}; {verdict}")
    if tmp is not None:
        for r in range(setup.world):
            for v, e in zip(names, per_rank[r]):
                e.write_json(tmp / f"nodes-{v}-rank{r}.json")


def cmd_count(args, console: Console) -> int:
    from capture import VARIANTS, capture_and_count, count_round

    if args.distributed:
        return cmd_count_distributed(args, console)
    from reports.report import staged_output
    from reports.tables import per_stage_table, totals_table

    params = _params(args)
    with staged_output(args.out, args.force) as tmp:
        banner(console)
        if args.target:
            fn = _load_target(args.target)
            exports = [capture_and_count(fn)]
            names = ["target"]
        else:
            names = args.variant or list(VARIANTS)
            exports = []
            for v in names:
                console.print(f"capturing {v} ...", style="dim")
                exports.append(count_round(params, v, pdl=args.pdl).export)
        console.print(totals_table(exports))
        for e in exports if args.per_stage else exports[:1]:
            console.print(per_stage_table(e))
        if tmp is not None:
            for name, e in zip(names, exports):
                e.write_json(tmp / f"nodes-{name}.json")
                e.write_dot(tmp / f"graph-{name}.dot")
    if args.out is not None:
        console.print(f"wrote {len(exports)} exports to {args.out}")
    return 0


def _export_for(ref: str, args, console):
    from capture import VARIANTS, NodeExport, count_round

    path = Path(ref)
    if path.is_file():
        return NodeExport.read_json(path)
    if ref in VARIANTS:
        if args.from_dir is not None:
            f = args.from_dir / f"nodes-{ref}.json"
            if not f.is_file():
                raise UsageError(
                    f"{f} does not exist; run `graph-harness count --out {args.from_dir}` first"
                )
            return NodeExport.read_json(f)
        console.print(f"capturing {ref} ...", style="dim")
        return count_round(_params(args), ref).export
    raise UsageError(f"{ref!r} is neither an export file nor a variant ({', '.join(VARIANTS)})")


def cmd_delta(args, console: Console) -> int:
    from reports.delta import node_delta
    from reports.tables import delta_tables

    banner(console)
    a, b = _export_for(args.a, args, console), _export_for(args.b, args, console)
    d = node_delta(a, b)
    console.print(f"[bold]{d.headline()}[/]")
    for t in delta_tables(d):
        console.print(t)
    if args.csv:
        from capture.export import write_atomic

        write_atomic(args.csv, d.by_kernel.to_csv(index=False))
    return 0


def _progress(console):
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )


def _require_cuda(what: str) -> None:
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError(
            f"{what} times CUDA graph replays and needs a CUDA device; "
            "none here (use `graph-harness count` for CPU dispatch counts)"
        )


def cmd_replay(args, console: Console) -> int:
    from reports.report import staged_output
    from reports.tables import fits_table, savings_table

    _require_cuda("replay")
    with staged_output(args.out, args.force) as tmp:
        banner(console)
        result = _replay(args, console)
        console.print(fits_table(result.fits))
        if result.savings is not None:
            console.print(savings_table(result))
        if tmp is not None:
            result.write_json(tmp / "replay.json")
    if args.out is not None:
        console.print(f"wrote {args.out / 'replay.json'}")
    return 0


def _replay(args, console):
    from capture import VARIANTS
    from capture.replay import CHAIN_KINDS, run_replays

    with _progress(console) as prog:
        task = prog.add_task("capturing chains", total=None)
        result = run_replays(
            _params(args),
            args.variant or list(VARIANTS),
            kinds=args.kind or CHAIN_KINDS,
            lengths=args.lengths,
            trials=args.trials,
            builds=args.builds,
            pdl=args.pdl,
            progress=lambda m: prog.update(task, description=m),
        )
    return result


def cmd_report(args, console: Console) -> int:
    import torch

    from capture import VARIANTS, count_round
    from capture.replay import run_replays
    from reports.report import staged_output, write_report

    with staged_output(args.out, args.force) as tmp:
        banner(console)
        params = _params(args)
        with _progress(console) as prog:
            task = prog.add_task("counting", total=None)
            exports = {}
            for v in VARIANTS:
                prog.update(task, description=f"counting {v}")
                exports[v] = count_round(params, v).export
            replay, skipped = None, "no CUDA device on this machine"
            if torch.cuda.is_available():
                replay = run_replays(
                    params,
                    list(VARIANTS),
                    trials=args.trials,
                    builds=args.builds,
                    progress=lambda m: prog.update(task, description=m),
                )
                skipped = None
        command = "graph-harness " + " ".join(shlex.quote(a) for a in sys.argv[1:])
        write_report(tmp, exports, replay, command=command, skipped=skipped)
    console.print(f"wrote {args.out / 'report.md'}")
    return 0


COMMANDS = {"count": cmd_count, "delta": cmd_delta, "replay": cmd_replay, "report": cmd_report}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # Piped into a log or CI, rich would squeeze tables into 80 columns and cut headers
    # and figures to "…"; COLUMNS still wins when set.
    wide = not sys.stdout.isatty() and "COLUMNS" not in os.environ
    console = Console(width=160 if wide else None)
    try:
        return COMMANDS[args.command](args, console)
    except KeyboardInterrupt:
        console.print("[red]interrupted[/]; no partial output was left")
        return 130
    except Exception as e:
        if args.debug:
            raise
        from capture import ExportError
        from reports.delta import DeltaError
        from reports.report import OutputExists

        usage = isinstance(e, UsageError | ExportError | DeltaError | OutputExists | ValueError)
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        console.print(f"[red]graph-harness {args.command}: error:[/] {msg}", soft_wrap=True)
        return 2 if usage else 1


if __name__ == "__main__":
    sys.exit(main())
