"""Check's trajectories: the step run `steps` calls from its start, twice eagerly and
twice replayed, its outputs and reachable state fingerprinted after every call
(capture/state/fingerprint.py, kept on the host).

- **A step with a reset** runs each trajectory whole from its start (`start_of`: the
  reset, then `feed(0)`): eager run A, eager run B, replayed run C with the allocator's
  free memory filled with one byte, replayed run D with another (capture/check/poison.py).
  Before call i of every run, `feed(i)` writes its inputs and the default generators are
  set to the state they had before A's call i, so all four draw the same numbers.
- **A step without one** cannot be taken back to a start; it repeats (else it is refused
  before this runs), so each call leaves the state that the same call would leave again.
  The four calls of step i run one after the other (A, B, C, D), each fed `feed(i)`:
  every call starts from the state the previous call, of the same inputs, left.

So A against B measures what the step itself does not repeat (kernels that are not
deterministic, or a reset that misses some state: the two starts tell which), A against
C is the graph against the step, and C against D is the graph against itself with other
free memory. Before every call of every run (before its inputs are fed) the graph's
outputs are filled with one pattern (capture/check/outputs.py), so an output the graph
never writes cannot match by holding what an earlier eager call left there. The step
runs 2 x `steps` times eagerly and its graph 2 x `steps` times.

**One start for every run.** Where the reset leaves a watched tensor other than it was at
A's start (an output buffer it need not touch, a position tensor a call overwrites, or a
cache it forgot), that tensor is put back, in place, to its value at A's start before B,
C and D run, and `restored` names it: comparing runs that started from different states
would measure the reset, not the graph. A tensor held only as a digest cannot be put
back (`unrestorable`). Host values are never put back: only the step knows them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from graph_harness.capture.check.outputs import OutputPoison, outputs_to_poison
from graph_harness.capture.check.poison import poisoned
from graph_harness.capture.replay.guard import Replayer, sync
from graph_harness.capture.state.changes import compare
from graph_harness.capture.state.fingerprint import Fingerprint, fingerprint, reachable
from graph_harness.capture.state.steps import (
    Repeatability,
    feed_of,
    reset_of,
    rng_moved,
    rng_state,
    set_rng_state,
    start_of,
)

POISONS = (0xFF, 0x3C)  # two fillings of free memory, differing in every byte


@dataclass
class Run:
    """One run over the trajectory: the state at its start (None where the step has no
    reset: there is no start to return to) and after each call, the output included."""

    start: Fingerprint | None = None
    after: list[Fingerprint] = field(default_factory=list)


@dataclass
class Trajectories:
    steps: int
    sequential: bool  # each run whole from the reset (else call by call)
    a: Run
    b: Run
    c: Run | None = None  # None on the CPU: no graph
    d: Run | None = None
    drawn: list[str] = field(default_factory=list)  # generators call 0 drew from
    poisoned: list[dict] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)  # put back to A's start (docstring)
    unrestorable: list[str] = field(default_factory=list)
    outputs: OutputPoison | None = None  # the graph's outputs filled before each call


class _Runner:
    def __init__(
        self, step: Callable[[], object], steps: int, replayer: Replayer | None, output: object
    ) -> None:
        self.step = step
        self.steps = steps
        self.start = start_of(step)
        self.feed = feed_of(step)
        self.r = replayer
        self.output = output  # the graph's output tensor(s), read after a replay
        self.outputs = outputs_to_poison(step, output) if replayer is not None else None
        self.rngs: list[dict[str, torch.Tensor]] = []
        self.drawn: list[str] = []
        self.poisoned: list[dict] = []
        self._filled: set[int] = set()
        self.restored: list[str] = []
        self.unrestorable: list[str] = []

    def fill_outputs(self) -> None:
        """The graph's outputs to the pattern (before a call's feed: module docstring)."""
        if self.outputs is not None:
            self.outputs.fill()

    def _before(self, i: int, *, record: bool, fed: bool) -> None:
        if not fed:  # a fed call 0 was filled before its reset and feed (run_trajectories)
            self.fill_outputs()
        if self.feed is not None and not fed:
            self.feed(i)
        if record:
            self.rngs.append(rng_state())
        else:
            set_rng_state(self.rngs[i])

    def eager(self, i: int, *, record: bool = False, fed: bool = False) -> Fingerprint:
        self._before(i, record=record, fed=fed)
        out = self.step()
        sync()
        if record and i == 0:
            self.drawn = rng_moved(self.rngs[0], rng_state())
        fp = fingerprint(self.step, out, clone_to="cpu")
        del out
        return fp

    def replayed(self, i: int, pattern: int, *, fed: bool = False) -> Fingerprint:
        self._before(i, record=False, fed=fed)
        with poisoned(pattern) as p:
            self.r.replay()
            sync()
            fp = fingerprint(self.step, self.output, clone_to="cpu")
        if pattern not in self._filled:  # what the first fill of each pattern found
            self._filled.add(pattern)
            self.poisoned.append(p.to_dict())
        return fp

    def begin(self, like: Fingerprint | None = None, *, reset: bool = True) -> Fingerprint:
        """Back to the start (reset, feed(0)) unless `reset` is False (a window did it);
        with `like`, the watched tensors put back to their values there; the state now."""
        if reset and self.start is not None:
            self.start()
        sync()
        fp = fingerprint(self.step, with_output=False, clone_to="cpu")
        if like is None:
            return fp
        back = restore(self.step, like, fp)
        self.restored += [n for n in back.restored if n not in self.restored]
        self.unrestorable += [n for n in back.unrestorable if n not in self.unrestorable]
        if not back.restored:
            return fp
        sync()
        return fingerprint(self.step, with_output=False, clone_to="cpu")


@dataclass
class Restored:
    restored: list[str] = field(default_factory=list)
    unrestorable: list[str] = field(default_factory=list)


def restore(step: Callable[[], object], like: Fingerprint, now: Fingerprint) -> Restored:
    """Put every watched state tensor that differs from `like` back to its value there,
    in place (same address: a graph keeps reading it); docstring."""
    out = Restored()
    differ = {c.name for c in compare(like, now, outputs=False) if not c.host}
    if not differ:
        return out
    live = {n: v for n, v, o in reachable(step, with_output=False)[0] if not o}
    for name in differ:
        was, t = like.seen.get(name), live.get(name)
        if was is None or not isinstance(t, torch.Tensor) or was.hashed or was.host:
            out.unrestorable.append(name)
            continue
        if tuple(t.shape) != tuple(was.value.shape) or t.dtype != was.value.dtype:
            out.unrestorable.append(name)  # rebound to another shape: nothing to put back
            continue
        with torch.no_grad():
            t.copy_(was.value.to(t.device))
        out.restored.append(name)
    return out


def run_trajectories(
    step: Callable[[], object],
    steps: int,
    graph: torch.cuda.CUDAGraph | None,
    output: object,
    name: str,
    rep: Repeatability,
) -> Trajectories:
    """The four runs (module docstring); `graph` None (the CPU): A and B only. Replays go
    through one Replayer (capture/replay/guard.py): a CUDA error is one line. Ends with
    the step at its start. Syncs."""
    sequential = reset_of(step) is not None
    replayer = None
    if graph is not None:
        # the window resets (and feeds call 0) before each replayed run; call by call, no
        # window may: there is no start to go back to
        replayer = Replayer(
            graph, name, reset=start_of(step) if sequential else None, repeatability=rep
        )
    run = _Runner(step, steps, replayer, output)
    t = Trajectories(steps, sequential, Run(), Run())
    if sequential:
        run.fill_outputs()  # before the reset and feed(0) of each run: call 0 is fed there
        t.a.start = run.begin()
        t.a.after = [run.eager(i, record=True, fed=i == 0) for i in range(steps)]
        run.fill_outputs()
        t.b.start = run.begin(t.a.start)
        t.b.after = [run.eager(i, fed=i == 0) for i in range(steps)]
        if replayer is not None:
            t.c, t.d = Run(), Run()
            for r, pattern in zip((t.c, t.d), POISONS):
                what = f"check's replays with free memory filled with {pattern:#04x}"
                run.fill_outputs()
                with replayer.window(what):  # resets, and feeds call 0
                    r.start = run.begin(t.a.start, reset=False)
                    r.after = [run.replayed(i, pattern, fed=i == 0) for i in range(steps)]
    else:
        if replayer is not None:
            t.c, t.d = Run(), Run()
        for i in range(steps):
            t.a.after.append(run.eager(i, record=True))
            t.b.after.append(run.eager(i))
            if replayer is None:
                continue
            for r, pattern in zip((t.c, t.d), POISONS):
                what = f"check's replay of call {i} with {pattern:#04x} in free memory"
                with replayer.window(what):
                    r.after.append(run.replayed(i, pattern))
    if replayer is not None and sequential:
        replayer.finish()  # the closing reset (and feed(0)), guarded as the replays are
    elif run.start is not None:  # the step as it was found: at its start
        run.start()
        sync()
    t.drawn, t.poisoned = run.drawn, run.poisoned
    t.restored, t.unrestorable = run.restored, run.unrestorable
    t.outputs = run.outputs
    return t
