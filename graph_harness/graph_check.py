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
    """The `graph_check` fixture's value: `graph_check(step, ...)` runs `graph-harness
    check`'s trajectory on `step` (capture/check/step.py: warm-ups, one capture, `steps`
    calls from the step's start, fed by `step.feed(i)` where it has one, twice eagerly and
    twice replayed with freed memory and outputs poisoned, compared after every call) and
    fails the test with check's verdict and findings (the call, the tensor, the node and
    its module, the host value a graph froze). It does not pass vacuously
    (capture/check/fixture.py): a step that captures no node is an error, a trajectory that
    compares nothing fails, "not verified" fails unless `accept_unverified=True`, and an
    output the graph never writes fails (check fills the outputs with a pattern before
    every call). Without CUDA the test is skipped with the reason, unless the CPU part
    already found a defect. Returns check's CheckResult for a test to look further.

    `steps="to-end"` runs the trajectory until the step's static cache is full, by its
    `step.max_steps`, compared at a sample of its calls (capture/check/sample.py);
    `soak=N` adds N replays along it under a watchdog (capture/check/soak.py). A soak
    that finds a hang fails the test at once; the device is still running the hung
    replay, so the session stops there (pytest.exit, exit 1), saying why. So does a
    replay that trips a device-side assertion (the CUDA context is then lost): the call,
    the run and the assertion are said, and the process leaves without the teardown
    whose CUDA destructors would abort it.

        def test_my_kernel_graph(graph_check):
            graph_check(lambda: my_op(x, out=y))  # x, y static: made once, outside

    The step runs `warmup` + 1 times to be captured, then 2 x `steps` times eagerly and
    is replayed 2 x `steps` times; with `step.reset` it is reset before each run."""

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
