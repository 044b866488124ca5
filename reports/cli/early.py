"""What the command line refuses before torch's import (seconds): what the flags, the
paths and the machine show alone, checked in the order the command itself would check
them. An --out already held; the command's own flags (its module's `check_early`); a
command that needs a CUDA GPU (its module's `NEEDS_GPU`: why, in NoGPU's words) on a
machine that surely has none (capture/environment.py `cuda_surely_absent`); a
`file.py:FUNCTION` target whose file surely has no FUNCTION (target_source.py). A check
that cannot tell leaves it to the command, after torch's import. Imports no torch."""

from __future__ import annotations

import argparse
import sys
from types import ModuleType


def check_before_torch(args: argparse.Namespace, command: ModuleType) -> None:
    """UsageError for what can be refused now (module docstring); else nothing."""
    if getattr(args, "out", None) is not None:  # as staged_output will plan it again
        from graph_harness.reports.output.plan import plan_output

        plan_output(args.out, args.force)
    early = getattr(command, "check_early", None)
    if early is not None:
        early(args)
    needs = getattr(command, "NEEDS_GPU", None)
    # torch imported already (graph-harness called from Python): its own check, later,
    # is the one that counts (a caller may stand a GPU in for it)
    if needs is not None and "torch" not in sys.modules:
        from graph_harness.capture.environment import cuda_surely_absent
        from graph_harness.capture.errors import NoGPU

        if cuda_surely_absent():
            raise NoGPU(needs)
    targets = getattr(args, "target", None)
    for spec in [targets] if isinstance(targets, str) else targets or []:
        from graph_harness.reports.cli.target import TargetUsageError
        from graph_harness.reports.cli.target_source import missing_factory

        problem = missing_factory(spec)
        if problem is not None:
            raise TargetUsageError(problem)
