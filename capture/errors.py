"""The errors graph-harness raises on purpose, and what the command line does with them.

Every one is a `HarnessError`. A `UsageError` (a mistake in what graph-harness was given,
`NoGPU` among them) prints its message alone and exits 2; any other error prints one line
with its type and exits 1. Each class keeps the built-in base it had (a ValueError, a
RuntimeError), so callers that catch those still do. No imports: every module may use
these. What counts as a usage error: docs/output.md, "The errors"."""

from __future__ import annotations


class HarnessError(Exception):
    """An error graph-harness raised on purpose; the command line exits `exit_code`."""

    exit_code = 1


class UsageError(HarnessError):
    """A mistake in what graph-harness was given: exit code 2, the message alone."""

    exit_code = 2


class CompileError(HarnessError, RuntimeError):
    """Code of ours that torch.compile could not compile on this torch (the runtime's
    failure, not the user's input): exit 1, in one line saying what to do."""


class NoGPU(UsageError, RuntimeError):
    """A command that measures what a CUDA GPU runs, on a machine without one."""

    def __init__(self, what: str) -> None:
        super().__init__(f"no GPU here: {what} (use `graph-harness count` for CPU dispatch counts)")


def require_gpu(what: str) -> None:
    """NoGPU unless torch sees a CUDA device; `what` says why the command needs one."""
    import torch

    if not torch.cuda.is_available():
        raise NoGPU(what)
