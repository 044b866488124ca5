"""The `graph_check` fixture's value (graph_harness/pytest_plugin.py registers the fixture
and the hooks that end a session whose CUDA context a graph_check lost). Imports only
pytest until it is called."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # torch and the harness load when the check is called, not before
    import torch

LOST = pytest.StashKey[int]()  # the exit status, once a graph_check lost the CUDA context


class GraphCheck:
    """The `graph_check` fixture's value: `graph_check(step, ...)` runs `graph-harness check`'s
    trajectory on `step` (capture/check/step.py) and fails the test with check's verdict and
    findings; returns check's CheckResult. Not vacuously (capture/check/fixture.py): no node
    is an error; nothing compared, "not verified" (unless `accept_unverified=True`) or an
    output the graph never writes fails. Without CUDA it is skipped unless the CPU part found
    a defect. A soak's hang or a device-side assertion stops the session (pytest.exit, exit
    1). `steps="to-end"`, `soak=N`, how often the step runs, an example: docs/steps-and-check.md,
    "In your tests: the `graph_check` fixture"."""

    def __init__(self, nodeid: str, config: pytest.Config | None = None) -> None:
        self.nodeid, self.config = nodeid, config

    def __call__(
        self,
        step,
        *,
        steps: int | str | None = None,
        warmup: int | None = None,
        module: torch.nn.Module | None = None,
        depth: int | None = None,
        accept_unverified: bool = False,
        name: str | None = None,
        soak: int = 0,
        soak_deadline: float | None = None,
    ):
        __tracebackhide__ = True
        from graph_harness.capture.check.fixture import GraphCheckFailed, fixture_outcome
        from graph_harness.capture.check.step import STEPS, check_step
        from graph_harness.capture.graph.settings import StepSettings
        from graph_harness.capture.replay.guard import ReplayFailed
        from graph_harness.capture.state.steps import StepStateError

        if not callable(step):
            raise TypeError(f"graph_check takes the step (a callable), got {type(step).__name__}")
        if depth is not None and module is None:
            raise ValueError("depth= is the depth of module scopes: give module= too")
        try:
            result = check_step(
                step,
                warmup=StepSettings.warmup if warmup is None else warmup,
                steps=STEPS if steps is None else steps,
                module=module,
                depth=depth,
                name=name or self.nodeid,
                soak=soak,
                soak_deadline=soak_deadline,
            )
        except StepStateError as e:  # the CPU part found it: the step cannot be replayed
            raise GraphCheckFailed(str(e)).with_traceback(None) from None
        except ReplayFailed as e:
            if not e.context_lost:
                raise GraphCheckFailed(str(e)).with_traceback(None) from None
            # a replay's device-side assertion: the CUDA context is lost, and every later
            # GPU test would fail on it, so the session stops here, saying why, and leaves
            # without the interpreter's teardown (pytest_unconfigure)
            if self.config is not None:
                self.config.stash[LOST] = 1
            pytest.exit(
                f"{self.nodeid}: graph_check failed: {e}; the CUDA context is lost, so the "
                "session stops",
                returncode=1,
            )
        if result.soak and result.soak.get("hang"):
            # the device still runs the hung replay: any later GPU work of the session
            # would wait behind it, so the session stops here, saying why
            pytest.exit(f"{self.nodeid}: {result.headline()}; the session stops", returncode=1)
        verdict = fixture_outcome(result, accept_unverified=accept_unverified)
        if verdict.outcome == "skip":
            pytest.skip(verdict.message)
        if verdict.outcome == "fail":
            raise GraphCheckFailed(verdict.message).with_traceback(None) from None
        return result
