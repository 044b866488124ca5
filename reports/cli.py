"""The graph-harness command line. Rendering only: measuring lives in `capture`."""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from rich.console import Console


def _round_args(p: argparse.ArgumentParser) -> None:
    from capture import RoundParams

    d = RoundParams()
    for name in ("stages", "rows", "k", "world", "rank", "shard", "seed"):
        p.add_argument(
            f"--{name}", type=int, default=getattr(d, name), help=f"(default {getattr(d, name)})"
        )


def build_parser() -> argparse.ArgumentParser:
    from capture import VARIANTS

    ap = argparse.ArgumentParser(
        prog="graph-harness",
        description="Capture LLM decode rounds into CUDA graphs and count every node.",
    )
    ap.add_argument("--debug", action="store_true", help="show tracebacks on failure")
    sub = ap.add_subparsers(dest="command", required=True)
    c = sub.add_parser("count", help="capture the decode round per variant and count its nodes")
    _round_args(c)
    c.add_argument(
        "--variant",
        action="append",
        choices=list(VARIANTS),
        help="variant(s) to count (default: all)",
    )
    c.add_argument("--out", type=Path, help="write JSON exports (and DOT graphs) here")
    c.add_argument("--force", action="store_true", help="replace an existing --out folder")
    c.add_argument("--per-stage", action="store_true", help="print every variant's per-stage table")
    return ap


def banner(console: Console) -> str:
    import torch

    from capture import default_device

    dev = default_device()
    try:
        import triton

        tv = triton.__version__
    except ImportError:
        tv = "absent"
    if dev.type == "cuda":
        where = f"GPU {torch.cuda.get_device_name()} (CUDA {torch.version.cuda})"
        source = "cuda-graph (nodes read from the captured graph)"
    else:
        where = "CPU (no CUDA device)"
        source = "cpu-dispatch (dispatched ops counted; NOT graph nodes)"
    console.print(
        f"[bold]graph-harness[/] {where} | torch {torch.__version__} | triton {tv} | "
        f"counts: {source}"
    )
    return source


def cmd_count(args, console: Console) -> int:
    from capture import VARIANTS, RoundParams, count_round
    from reports.tables import per_stage_table, totals_table

    params = RoundParams(
        **{k: getattr(args, k) for k in ("stages", "rows", "k", "world", "rank", "shard", "seed")}
    )
    variants = args.variant or list(VARIANTS)
    if args.out is not None and args.out.exists() and not args.force:
        raise UsageError(f"output folder {args.out} exists; pass --force to replace it")
    banner(console)
    exports = []
    for v in variants:
        console.print(f"capturing {v} ...", style="dim")
        exports.append(count_round(params, v).export)
    console.print(totals_table(exports))
    for e in exports if args.per_stage else exports[:1]:
        console.print(per_stage_table(e))
    if args.out is not None:
        # Build the whole folder under a temporary name, then rename: no partial output.
        args.out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=args.out.parent, prefix=f".{args.out.name}."))
        try:
            for e in exports:
                e.write_json(tmp / f"nodes-{e.variant}.json")
                e.write_dot(tmp / f"graph-{e.variant}.dot")
            if args.out.exists():
                shutil.rmtree(args.out)
            tmp.rename(args.out)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        console.print(f"wrote {len(exports)} exports to {args.out}")
    return 0


class UsageError(Exception):
    pass


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    console = Console()
    try:
        return {"count": cmd_count}[args.command](args, console)
    except UsageError as e:
        console.print(f"[red]graph-harness: error:[/] {e}")
        return 2
    except KeyboardInterrupt:
        console.print("[red]interrupted[/]; no partial files were left")
        return 130
    except Exception as e:
        if args.debug:
            raise
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        console.print(f"[red]graph-harness: {type(e).__name__}:[/] {msg}")
        return 2 if isinstance(e, ValueError) else 1


if __name__ == "__main__":
    sys.exit(main())
