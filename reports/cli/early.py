"""What the command line refuses before torch's import (seconds): what the flags, the
paths and the machine show alone, checked in the order the command itself would check
them. An --out already held; the command's own flags (its module's `check_early`); a
command that needs a CUDA GPU (its module's `NEEDS_GPU`: why, in NoGPU's words) on a
machine that surely has none (capture/environment.py `cuda_surely_absent`); a target
whose module surely has no FUNCTION, or whose dotted MODULE no finder has, read without
running it (target_source.py). A check that cannot tell leaves it to the command, after
torch's import. Imports no torch."""

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
    specs = [targets] if isinstance(targets, str) else targets or []
    for i, spec in enumerate(specs):
        from graph_harness.reports.cli.target import TargetUsageError, is_file_spec
        from graph_harness.reports.cli.target_source import missing_factory

        files = [s.rpartition(":")[0] for s in specs[:i]]  # loaded first: their folders
        problem = missing_factory(spec, [f for f in files if is_file_spec(f)])
        if problem is not None:
            raise TargetUsageError(problem)
