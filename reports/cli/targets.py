"""What every `--target` command shares (count, check, profile, report): loading the
targets and refusing what cannot be counted before any runs, counting (and checking) one
through capture's count_step, the flags that need --target, and the check's tables.

Command modules import these; they never import each other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from graph_harness.reports.cli.console import IO, UsageError, refuse
from graph_harness.reports.text import printable

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable

    from graph_harness.capture.check.findings import CheckResult
    from graph_harness.capture.commands import CountedStep
    from graph_harness.capture.profile.document import ProfileResult
    from graph_harness.capture.profile.settings import ProfileSettings
    from graph_harness.reports.cli.target import Target


def refuse_target_only(args: argparse.Namespace) -> None:
    """Flags that need --target, given without it."""
    if args.module_scopes is not False:
        raise UsageError(
            "--module-scopes attributes a model's nodes to its modules: it needs --target "
            "(the built-in round has its own stage and step scopes)"
        )
    flags = ["--warmup"] * (getattr(args, "step_warmup", None) is not None)
    flags += ["--check"] * bool(getattr(args, "check", False))
    flags += ["--sizes"] * bool(getattr(args, "sizes", None))
    flags += ["--requests"] * bool(getattr(args, "requests", None))
    refuse(flags, "apply to your step: give --target (the built-in round is ours)")
    refuse_check_steps(args)


def refuse_check_steps(args: argparse.Namespace) -> None:
    """--check-steps without --check."""
    if getattr(args, "check_steps", None) is not None and not getattr(args, "check", False):
        raise UsageError("--check-steps sets how long --check runs: give --check too")


def load_targets(specs: list[str], io: IO, *, own_graphs: bool = False) -> list:
    """Each --target loaded (its module imported, its factory run) and its step checked
    for what cannot be counted on this device (capture/graph/compiled.py), all before any
    step runs: a second target that cannot be counted stops the command before the first
    is warmed up. `own_graphs`: a step that captures its own graphs (reduce-overhead) is
    counted by recording them, not refused (count and report, which replay nothing)."""
    from graph_harness.capture.count import default_device
    from graph_harness.capture.graph.compiled import refuse_uncountable
    from graph_harness.reports.cli.target import load_target, root_guess

    out = []
    for spec in specs:
        io.target_root = root_guess(spec)  # errors while importing point there
        target = load_target(spec)
        io.target_root = target.root
        refuse_uncountable(target.step, default_device().type, own_graphs=own_graphs)
        out.append(target)
    return out


def count_target(
    spec: str,
    module_scopes: int | str | bool | None,
    io: IO,
    *,
    warmup: int | None = None,
    check: int | str | None = None,
    soak: int = 0,
    soak_deadline: float | None = None,
    host_launch: bool = True,
    watch: bool | None = None,
    target: Target | None = None,
    progress: Callable[[str], None] | None = None,
) -> CountedStep:
    """Import and run the target (its code): its step counted, and checked with `check`
    (capture/commands.py count_step, whose keywords these are; `progress` hears each phase
    by `spec`), its notes said; with
    `module_scopes` (the flag's value) not False, by the modules of its `step.module`.
    `target`: already loaded (load_targets), else loaded here. Keep what this returns
    while its graph is replayed: `got.got.step`'s buffers are the graph's."""
    from graph_harness.capture.commands import count_step
    from graph_harness.capture.count import EmptyStepError
    from graph_harness.capture.graph.settings import StepSettings
    from graph_harness.reports.cli.target import TargetError

    if target is None:
        (target,) = load_targets([spec], io, own_graphs=check is None)
    io.target_root = target.root
    try:
        got = count_step(
            target.step,
            name=target.name,
            warmup=StepSettings().warmup if warmup is None else warmup,
            module=None if module_scopes is False else target.model(),
            check=check,
            soak=soak,
            soak_deadline=soak_deadline,
            host_launch=host_launch,
            watch=watch,
            progress=progress,
            note=io.note,  # said as soon as the capture gives them, before any check
            shown=spec,
        )
    except EmptyStepError as e:  # what issued no work is the target: say which
        raise TargetError(f"--target {spec!r}: {e}") from None
    got.export.options["target"] = printable(spec)  # as text, as the workload's name is
    return got


def show_checks(io: IO, results: dict, *, json_too: bool = True) -> None:
    """The findings tables and verdicts (stdout), or the check document with --json."""
    from graph_harness.capture.check.document import check_document
    from graph_harness.reports.check_tables import findings_table

    if io.json:
        if json_too:
            io.print_json(check_document(results))
        return
    for r in results.values():
        io.out.print(findings_table(r))
        io.out.print(r.headline(), markup=False)  # the table above holds the details


def gate(io: IO, results: dict) -> None:
    """--check on count, profile and report: a check that did not pass prints its findings
    and stops the command (CheckFailed: exit 1; CheckUnverified: exit 3; nothing written)."""
    from graph_harness.capture.check.step import gate as failed

    if any(not r.passed for r in results.values()):
        show_checks(io, results)
    failed(results)


def profile_targets(
    specs: list[str],
    module_scopes: int | str | bool | None,
    settings: ProfileSettings,
    io: IO,
    say: Callable[[str], None],
    *,
    warmup: int | None = None,
    check: bool = False,
    check_steps: int | str | None = None,
    targets: list[Target] | None = None,
) -> tuple[ProfileResult, dict[str, CheckResult]]:
    """Load each --target (before any runs), then capture, check (with `check`, over
    `check_steps` calls) and profile them together (capture/profile/step.py
    profile_step, the second priced against the first). A check that does not pass
    prints its findings and stops here (CheckFailed, CheckUnverified). Returns the
    profile and the checks (name -> CheckResult; {} unchecked). `targets`: already loaded
    (load_targets)."""
    from graph_harness.capture.check.findings import CheckFailed, CheckUnverified
    from graph_harness.capture.check.settings import CheckSettings
    from graph_harness.capture.count import EmptyStepError
    from graph_harness.capture.graph.settings import StepSettings
    from graph_harness.capture.profile.step import profile_step
    from graph_harness.reports.cli.target import TargetError, output_names

    names = output_names(specs)
    if targets is None:
        targets = load_targets(specs, io, own_graphs=not check)  # each before any runs
    by_name = dict(zip(names, targets))

    def before(name: str) -> None:
        io.target_root = by_name[name].root  # errors in its code point at its frames

    try:
        result = profile_step(
            {n: t.step for n, t in by_name.items()},
            settings,
            warmup=StepSettings().warmup if warmup is None else warmup,
            module=(None if module_scopes is False else {n: t.model() for n, t in by_name.items()}),
            check=(check_steps or CheckSettings().steps) if check else None,
            shown={n: t.name for n, t in by_name.items()},
            progress=say,
            note=io.note,
            before=before,
        )
    except (CheckFailed, CheckUnverified) as e:
        show_checks(io, getattr(e, "results", {}))
        raise
    except EmptyStepError as e:  # what issued no work is a target: its message names it
        raise TargetError(f"--target {e}") from None
    for name, spec in zip(names, specs):
        result.profiles[name].export.options["target"] = printable(spec)
    return result, result.checks
