"""`--target` swept over batch sizes (`sweep`, `report --sizes`): what it is given, checked
before the user's module is imported, and the sweep of one target (capture/sweep/run.py)
with its request distributions' padding."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from graph_harness.reports.cli.console import IO, UsageError
from graph_harness.reports.cli.targets import gate

if TYPE_CHECKING:
    import torch

    from graph_harness.capture.sweep.document import SweepResult
    from graph_harness.capture.sweep.settings import SweepSettings


def sweep_inputs(
    sizes: list[int], requests: list[str] | None
) -> list[tuple[dict[int, float], str]]:
    """What `sweep` (and `report --sizes`) is given, checked before anything runs: the
    sizes (each once), and each --requests read, none above the largest size swept."""
    from graph_harness.capture.sweep.settings import check_sizes

    try:
        check_sizes(sizes)
    except ValueError as e:
        raise UsageError(f"--sizes: {e}") from None
    out = []
    for r in requests or []:
        dist, source = requests_of(r, max(sizes))
        if max(dist) > max(sizes):
            raise UsageError(
                f"--requests {r}: batches reach {max(dist)}, above the largest size swept "
                f"({max(sizes)}): add a size that covers them to --sizes"
            )
        out.append((dist, source))
    return out


def requests_of(spec: str, largest: int) -> tuple[dict[int, float], str]:
    """A --requests value read: a file (one size per line, or SIZE COUNT), else a built-in
    distribution; UsageError saying which forms there are."""
    from pathlib import Path

    from graph_harness.capture.paths import InputPathError, check_input
    from graph_harness.capture.sweep.padding import (
        RequestsError,
        builtin_requests,
        read_requests,
    )

    path = Path(spec)
    try:
        if path.exists() or path.is_symlink():
            check_input(path, "--requests file")
            return read_requests(path.read_text(), spec), spec
        if ":" not in spec:  # no distribution's form: a file that is not there
            raise UsageError(
                f"--requests {spec}: no such file, and not a built-in distribution "
                "(uniform:LO-HI, poisson:MEAN, zipf:A)"
            )
        return builtin_requests(spec, largest), spec
    except InputPathError as e:
        raise UsageError(str(e)) from None
    except RequestsError as e:
        raise UsageError(f"--requests: {e}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"--requests {spec}: cannot be read ({e})") from None


def sweep_target(
    spec: str,
    sizes: list[int],
    module_scopes: object,
    io: IO,
    say: Callable[[str], None],
    *,
    settings: SweepSettings,
    warmup: int,
    check_steps: int | None,
    shared_check: str | None = None,
    requests: list[tuple[dict[int, float], str]],
    most: int | None,
    budget: int | None,
) -> SweepResult:
    """`sweep` of one --target (its module imported once, FUNCTION(batch=B) per size), a
    check that does not pass (each size's, or the `shared_check` mode's) shown and stopping
    it; then each --requests distribution's padding (on the CPU its padded rows alone, and
    one line saying what needs a GPU). `requests`: sweep_inputs'."""
    from graph_harness.capture.sweep.run import sweep_step
    from graph_harness.reports.cli.target import build_target, load_factory, root_guess

    io.target_root = root_guess(spec)  # errors while importing point there
    factory = load_factory(spec)
    factory.check_takes("batch", "sweep")
    targets = {}

    def make(batch: int) -> Callable[[], object]:
        target = build_target(factory, batch=batch)
        io.target_root = target.root
        targets[id(target.step)] = target
        return target.step

    def module_of(step: Callable[[], object]) -> torch.nn.Module:
        return targets[id(step)].model()

    result = sweep_step(
        make,
        sizes,
        settings,
        name=factory.name,
        module_of=None if module_scopes is False else module_of,
        warmup=warmup,
        check_steps=check_steps,
        **({shared_check: True} if shared_check else {}),
        gate=lambda checks: gate(io, checks),  # findings shown, then it stops
        progress=say,
        note=io.note,
    )
    if check_steps is None and result.exports:  # a check says it as a finding
        smallest = next(iter(result.exports.values()))
        from graph_harness.capture.step import host_read_note

        if line := host_read_note(smallest, spec):
            io.note(line)
    return _with_padding(result, io, requests, most, budget)


def _with_padding(
    result: SweepResult,
    io: IO,
    requests: list[tuple[dict[int, float], str]],
    most: int | None,
    budget: int | None,
) -> SweepResult:
    """Each --requests distribution's padding added to `result`; on the CPU, one line
    saying what needs a GPU."""
    if requests and not result.measured:  # padding is counting: only its time needs a GPU
        io.note(
            "--requests on the CPU: each ladder's padded rows and the ladder with the fewest; "
            + (
                "time per step, time lost to padding and --memory-budget (each size's pool)"
                if budget is not None
                else "time per step and time lost to padding"
            )
            + " need a GPU"
        )
        budget = None  # said just above; the rows need no pool
    for dist, source in requests:
        try:
            result = result.with_padding(dist, source, most=most, budget=budget)
        except ValueError as e:  # a memory budget no ladder fits
            raise UsageError(f"--requests {source}: {e}") from None
    return result
