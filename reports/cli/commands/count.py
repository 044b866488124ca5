"""`graph-harness count`: the built-in round's variants, your own step, or every rank."""

from __future__ import annotations

import argparse
from contextlib import nullcontext
from typing import TYPE_CHECKING

from graph_harness.capture.round.params import VARIANTS
from graph_harness.reports.cli.args import (
    check_arg,
    json_arg,
    module_scopes_arg,
    out_args,
    round_args,
    shown_depth,
    step_warmup,
    steps_to_check,
    subcommand,
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
from graph_harness.reports.cli.refs import read_files
from graph_harness.reports.cli.target import target_arg
from graph_harness.reports.cli.targets import (
    count_target,
    gate,
    refuse_check_steps,
    refuse_target_only,
    show_checks,
)
from graph_harness.reports.text import plural

if TYPE_CHECKING:
    from pathlib import Path

    from graph_harness.capture.check.findings import CheckResult
    from graph_harness.capture.commands import HostLaunch
    from graph_harness.capture.export.nodes import NodeExport


DESCRIPTION = (
    "Capture the built-in decode round in each variant (or your own step, "
    "--target) into a CUDA graph and count its nodes by type, kernel and scope: nodes per "
    "round and per step of a stage, or your step's scope tree and kernels. Without a GPU "
    "it counts dispatched operations instead, and says so."
)
EXAMPLES = [
    "graph-harness count",
    "graph-harness count --variant shipped --variant fused --per-stage",
    "graph-harness count --target examples/llama_decode.py:make_step --module-scopes",
    "graph-harness count --json --out counts",
    "graph-harness count vllm-decode.dot",
]


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    c = subcommand(
        sub,
        "count",
        common,
        help="capture the decode round (or --target) and count nodes",
        description=DESCRIPTION,
        examples=EXAMPLES,
        variants=True,
    )
    c.add_argument(
        "files",
        nargs="*",
        metavar="FILE",
        help="count these instead of capturing: a graph dump (.dot: cudaGraphDebugDotPrint's, "
        "torch's CUDAGraph.debug_dump, any engine's, C++ included; read as text, nothing run) "
        "or a node export (.json); repeat for several",
    )
    round_args(c)
    c.add_argument(
        "--variant",
        action="append",
        choices=list(VARIANTS),
        help="variant to count; repeat for several (default: all)",
    )
    c.add_argument(
        "--target",
        metavar="MODULE:FUNCTION",
        type=target_arg,
        help="count your own step instead. IMPORTS AND RUNS your code: the module (by name, "
        "the current folder searched last, or as path/to/file.py), then FUNCTION(), which "
        "returns the zero-argument step to capture",
    )
    module_scopes_arg(c)
    warmup_arg(c)
    check_arg(c)
    c.add_argument(
        "--pdl",
        action="store_true",
        help="launch the harness's Triton kernels with programmatic dependent launch",
    )
    c.add_argument(
        "--per-stage",
        action="store_true",
        help="also print each variant's table of nodes per stage and step",
    )
    c.add_argument(
        "--distributed",
        action="store_true",
        help="one process per rank under torchrun: a real all-gather (NCCL on "
        "GPUs, gloo on CPU); world and rank come from the process group",
    )
    json_arg(c, "the exports")
    out_args(c)


def check_flags(args: argparse.Namespace) -> None:
    if args.json and args.per_stage:
        raise UsageError("--per-stage shapes the tables, which --json replaces: drop one")
    if args.files:
        flags = given_round_flags(args) + ["--target"] * bool(args.target)
        flags += ["--variant"] * bool(args.variant) + ["--pdl"] * args.pdl
        flags += ["--per-stage"] * args.per_stage + ["--distributed"] * args.distributed
        refuse(flags, "apply to a capture, not to the files given: drop them")
        refuse_target_only(args)
    elif args.target:
        flags = given_round_flags(args)
        flags += ["--variant"] * bool(args.variant) + ["--pdl"] * args.pdl
        flags += ["--per-stage"] * args.per_stage + ["--distributed"] * args.distributed
        refuse(flags, "apply to the built-in round, not to --target: drop them")
        refuse_check_steps(args)
    else:
        refuse_target_only(args)


def check_early(args: argparse.Namespace) -> None:
    """The flags checked before torch is imported (reports/cli/program.py): they need none."""
    check_flags(args)


def run(args: argparse.Namespace, io: IO) -> int:
    check_flags(args)
    if args.distributed:
        return run_distributed(args, io)
    exports: list = []
    if args.files:
        names, exports = read_files(args.files)  # every file read before anything is written
    elif args.target:
        names = ["target"]
    else:
        names = args.variant or list(VARIANTS)
    if args.pdl and not _cuda():
        io.note("--pdl changes nothing here: without a CUDA GPU the kernels run interpreted")
    checks: dict = {}
    launches: dict[str, HostLaunch] = {}  # each graph's host launch, on a GPU
    with staged(args, io) as tmp:
        banner(io, files=bool(args.files))
        if args.target:
            export, checks, launches = _count_target(args, io, tmp)
            exports.append(export)
        elif not args.files:
            from graph_harness.capture.commands import count_variants

            with progress(io) as say:  # each variant's line says how long it took
                counted = count_variants(round_params(args), names, pdl=args.pdl, progress=say)
            names = list(counted)  # a variant named twice is counted once
            exports = [c.export for c in counted.values()]
            launches = {v: c.launch for v, c in counted.items() if c.launch is not None}
            del counted
        if tmp is not None:
            _write_exports(tmp, names, exports)
        # Printed before the commit: if stdout fails, an earlier --out stays as it was.
        depth = shown_depth(args.module_scopes, exports) if args.target else None
        show(io, dict(zip(names, exports)), per_stage=args.per_stage, depth=depth, checks=checks,
             launches=launches)  # fmt: skip
    wrote(io, args, plural(len(exports), "export"))
    return 0


def _count_target(
    args: argparse.Namespace, io: IO, tmp: Path | None
) -> tuple[NodeExport, dict[str, CheckResult], dict[str, HostLaunch]]:
    """`--target` counted (and checked, judged and its check written, with --check); its
    export, its check and its host launch, by the name "target"."""
    got = count_target(
        args.target,
        args.module_scopes,
        io,
        warmup=step_warmup(args),
        check=steps_to_check(args) if args.check else None,
    )
    checks: dict = {}
    if got.check is not None:
        checks = {"target": got.check}
        gate(io, checks)
        if tmp is not None:
            from graph_harness.capture.check.document import write_checks

            write_checks(tmp, checks)
    launches = {"target": got.launch} if got.launch is not None else {}
    return got.export, checks, launches


def _write_exports(tmp: Path, names: list[str], exports: list[NodeExport]) -> None:
    """Each export into the output folder by its name, as JSON and as DOT."""
    for name, e in zip(names, exports):
        e.write_json(tmp / f"nodes-{name}.json")
        e.write_dot(tmp / f"graph-{name}.dot")


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def show(
    io: IO,
    exports: dict,
    *,
    per_stage: bool,
    depth: int | None = None,
    checks: dict[str, CheckResult] | None = None,
    launches: dict[str, HostLaunch] | None = None,
) -> None:
    from graph_harness.capture.attribution.repeats import repeating_block
    from graph_harness.capture.export.dump import is_dump
    from graph_harness.reports.tables import (
        deeper_note,
        per_family_table,
        per_kernel_table,
        per_stage_table,
        scope_tree_table,
        totals_table,
    )

    if io.json:
        from graph_harness.capture.commands import count_document

        io.print_json(count_document(exports, checks=checks, launches=launches))
        return
    io.out.print(totals_table(list(exports.values())))
    for name, h in (launches or {}).items():
        said = (
            f"{h.us:.2f} us (median, each launch from an idle device)"
            if h.us is not None
            else h.why
        )
        io.out.print(f"{name}: host launch {said}", soft_wrap=True, markup=False)
    for e in exports.values():
        if e.is_round:  # the round's totals above; each variant's stages only when asked
            if per_stage:
                io.out.print(per_stage_table(e))
            continue
        if is_dump(e):  # no scopes in a dump: its kernel families instead
            io.out.print(per_family_table(e))
            r = repeating_block([(n["type"], n["kernel"]) for n in e.nodes])
            if r is not None:  # a model's layers, where it has them, from the nodes alone
                io.out.print(
                    f"{e.name}: a block of {r.period} nodes repeats {r.times} times from node "
                    f"{r.start} ({r.nodes} of {e.total} nodes)",
                    markup=False,
                )
        else:  # a step: its scope tree
            io.out.print(scope_tree_table(e, depth))
            note = deeper_note(e.frame(), depth)
            if note:
                io.out.print(note, soft_wrap=True, markup=False)
        io.out.print(per_kernel_table(e))
    if checks:
        show_checks(io, checks)


def run_distributed(args: argparse.Namespace, io: IO) -> int:
    from graph_harness.capture.round.distributed import (
        count_all_ranks,
        init_from_env,
        process_group,
    )

    with process_group(init_from_env()) as setup:
        for name, mine in (("world", setup.world), ("rank", setup.rank)):
            given = getattr(args, name)
            if given is not None and given != mine:
                raise UsageError(
                    f"--{name} {given} but the process group says {mine}: under "
                    f"--distributed the {name} comes from torchrun; drop --{name}"
                )
        params = round_params(args, world=setup.world, rank=setup.rank)
        lead = setup.rank == 0
        names = args.variant or list(VARIANTS)
        with staged(args, io) if lead else nullcontext() as tmp:
            if lead:
                banner(io)
                io.err.print(f"distributed: world {setup.world}, backend {setup.backend}")
            per_rank = count_all_ranks(params, names, setup, pdl=args.pdl)
            if tmp is not None:
                for r, exports in enumerate(per_rank):
                    for v, e in zip(names, exports):
                        e.write_json(tmp / f"nodes-{v}-rank{r}.json")
            if lead:  # before the commit, as in run
                show_ranks(io, names, per_rank)
        if lead:
            wrote(io, args, "the exports of every rank")
    return 0


def show_ranks(io: IO, names: list[str], per_rank: list[list[NodeExport]]) -> None:
    from graph_harness.capture.round.distributed import merge
    from graph_harness.reports.tables import totals_table

    if io.json:
        exports = {
            f"{v}-rank{r}": per_rank[r][i]
            for r in range(len(per_rank))
            for i, v in enumerate(names)
        }
        show(io, exports, per_stage=False)
        return
    io.out.print(totals_table([per_rank[0][i] for i in range(len(names))]))
    for i, v in enumerate(names):
        m = merge([per_rank[r][i] for r in range(len(per_rank))])
        verdict = "same structure on every rank" if m.same_structure else m.first_difference
        io.out.print(f"{v}: nodes per rank {m.totals}; {verdict}", markup=False)
