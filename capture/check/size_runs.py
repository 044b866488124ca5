"""One size of a ladder as the checks over a shared pool run it (capture/check/
interleaved.py, capture/check/updated.py): its graph as captured, its start, its calls
fed, and its eager reference: from its start (`start_of`), `steps` calls fingerprinted
(kept on the host), run twice from the same start with the same inputs and generator
states, then the size back at its start. A step without a reset runs its two eager calls
of call i one after the other. In full: docs/sweep.md, "capture/check/size_runs.py".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from graph_harness.capture.check.outputs import OutputPoison, outputs_to_poison
from graph_harness.capture.check.restore import restore
from graph_harness.capture.replay.guard import Replayer, sync
from graph_harness.capture.state.changes import Change, disagreement
from graph_harness.capture.state.fingerprint import Fingerprint, fingerprint
from graph_harness.capture.state.rng import rng_moved, rng_state, set_rng_state
from graph_harness.capture.state.steps import Repeatability, feed_of, reset_of, start_of

Step = Callable[[], object]


@dataclass(frozen=True, kw_only=True)
class SizeGraph:
    """One size as captured into the shared pool: its step, the graph (anything with
    `replay()`) and what the capture returned (the graph's outputs)."""

    batch: int
    step: Step
    graph: object
    output: object
    repeatability: Repeatability | None = None  # what its warm-ups showed, for error lines


@dataclass
class SizeRuns:
    """One size's eager reference and its replays' bookkeeping."""

    g: SizeGraph
    outputs: OutputPoison
    start: Callable[[], None] | None
    feed: Callable[[int], object] | None
    sequential: bool  # a reset: runs start from it (else call after call)
    replayer: Replayer
    begun: Fingerprint | None = None  # the state at the eager run's start
    rngs: list[dict[str, torch.Tensor]] = field(default_factory=list)
    after: list[Fingerprint] = field(default_factory=list)  # eager run A, after each call
    spreads: list[dict[str, Change]] = field(default_factory=list)  # A against B
    drew: set[str] = field(default_factory=set)  # the generators run A drew from, in words
    status: str = "passed"  # "failed" from its first mismatch on, when it is no longer compared

    def begin(self) -> Fingerprint:
        """Back to the start, the watched tensors put back to the first run's start."""
        self.outputs.fill()  # before the reset and feed(0): call 0 is fed there
        self.start()
        sync()
        now = fingerprint(self.g.step, with_output=False, clone_to="cpu")
        if self.begun is None:
            return now
        if restore(self.g.step, self.begun, now).restored:
            sync()
        return now

    def to_call(self, i: int) -> None:
        """Ready for call i of a run that went on from call i - 1 (or, for call 0 of a
        size with a reset, from its start): the outputs filled, call i's inputs fed."""
        if i == 0 and self.sequential:
            self.begin()
            return
        self.outputs.fill()
        if self.feed is not None:
            self.feed(i)

    def eager(self, i: int, *, fed: bool, record: bool) -> Fingerprint:
        if not fed:
            self.outputs.fill()
            if self.feed is not None:
                self.feed(i)
        if record:
            self.rngs.append(rng_state())
        else:
            set_rng_state(self.rngs[i])
        out = self.g.step()
        sync()
        if record:
            self.drew.update(rng_moved(self.rngs[-1], rng_state()))
        fp = fingerprint(self.g.step, out, clone_to="cpu")
        del out
        return fp

    def reference(self, steps: int) -> None:
        """The eager runs A and B (module docstring); A kept, A against B measured."""
        if self.sequential:
            self.begun = self.begin()
            self.after = [self.eager(i, fed=i == 0, record=True) for i in range(steps)]
            self.begin()
            b = [self.eager(i, fed=i == 0, record=False) for i in range(steps)]
            self.start()  # back at its start for what replays it next
            sync()
        else:  # call after call: each starts from the state the same call left
            b = []
            for i in range(steps):
                self.after.append(self.eager(i, fed=False, record=True))
                b.append(self.eager(i, fed=False, record=False))
        self.spreads = [disagreement(x, y) for x, y in zip(self.after, b, strict=True)]


def size_runs(g: SizeGraph, name: str) -> SizeRuns:
    """`g` ready for its eager reference and its replays, `name` naming it in errors."""
    return SizeRuns(
        g=g,
        outputs=outputs_to_poison(g.step, g.output),
        start=start_of(g.step),
        feed=feed_of(g.step),
        sequential=reset_of(g.step) is not None,
        # no window resets: the size's calls run on from one another between other sizes'
        replayer=Replayer(
            g.graph, f"{name} batch {g.batch} (shared pool)", repeatability=g.repeatability
        ),
    )
