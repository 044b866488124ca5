"""Steps with state: the reset protocol (`step.reset`, `step.feed`, `step.max_steps`),
and whether a step repeats, judged from its warm-ups (StateWatch, Repeatability); a step
that does not repeat and has no reset is refused by whatever replays it many times
(StepStateError). The protocol and how repeatability and non-determinism are judged:
docs/steps-and-check.md, "The protocol, as the code holds it".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from graph_harness.capture.errors import UsageError
from graph_harness.capture.state.changes import Change, compare, names, replaced_by
from graph_harness.capture.state.fingerprint import Fingerprint, fingerprint, host_values
from graph_harness.capture.state.rng import rng_moved, rng_state, set_rng_state
from graph_harness.capture.text import a_type

GROWN_FIX = (
    "a graph keeps the shapes and addresses its capture saw, so no reset makes a growing "
    "state replayable: use a static cache (transformers: StaticCache, or "
    'cache_implementation="static"), written in place (docs/steps-and-check.md)'
)
FIX = (
    "give the step a reset: set `step.reset` to a zero-argument function that returns its "
    "state to the start, in place (docs/steps-and-check.md)"
)


class StepStateError(UsageError, ValueError):
    """The step cannot be replayed many times as it stands (it does not repeat and has
    no `step.reset`), or its `step.reset` is not callable: a usage error (exit 2)."""


def reset_of(step: Callable[[], object]) -> Callable[[], object] | None:
    """The step's `step.reset`, or None; StepStateError if it is not callable."""
    r = getattr(step, "reset", None)
    if r is not None and not callable(r):
        raise StepStateError(
            f"step.reset is {a_type(r)}, not a function: set it to a zero-argument "
            "function that returns the step to its starting state (docs/steps-and-check.md)"
        )
    return r


def feed_of(step: Callable[[], object]) -> Callable[[int], object] | None:
    """The step's `step.feed` (module docstring), or None; StepStateError if it is not
    callable."""
    f = getattr(step, "feed", None)
    if f is not None and not callable(f):
        raise StepStateError(
            f"step.feed is {a_type(f)}, not a function: set it to a function of one "
            "argument, the call's index i, that writes call i's inputs into the step's static "
            "buffers in place (docs/steps-and-check.md)"
        )
    return f


def length_of(step: Callable[[], object]) -> int | None:
    """The step's `step.max_steps` (module docstring), called if it is a function; None if
    the step has none. StepStateError if it is not a whole number >= 1."""
    v = getattr(step, "max_steps", None)
    if v is None:
        return None
    if callable(v):
        v = v()
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise StepStateError(
            f"step.max_steps is {a_type(v)} {v!r}, not a whole number >= 1: set it to the "
            "number of calls from the step's start (after step.reset and feed(0)) until its "
            "static cache is full (docs/steps-and-check.md)"
        )
    return v


def start_of(step: Callable[[], object]) -> Callable[[], None] | None:
    """What returns the step to its start: its reset, then `feed(0)`; None if it has
    neither. Run eagerly, outside any graph."""
    reset, feed = reset_of(step), feed_of(step)
    if reset is None and feed is None:
        return None

    def start() -> None:
        if reset is not None:
            reset()
        if feed is not None:
            feed(0)

    return start


# --- repeatability ------------------------------------------------------------------------


@dataclass(frozen=True)
class Repeatability:
    """What the warm-ups showed. `repeatable`: None when there were fewer than two.
    `changed`: what differed between the last two; `in_a_call`: the state one call
    changes from its starting state (after the reset, if any); `rebound`: state tensors a
    call rebinds to new ones; `replaced_by_reset`: those the reset rebound rather than
    reset in place; `rng`: generators a call drew from."""

    warmups: int
    reset: bool
    repeatable: bool | None
    changed: tuple[Change, ...] = ()
    in_a_call: tuple[Change, ...] = ()
    rebound: tuple[str, ...] = ()
    replaced_by_reset: tuple[str, ...] = ()
    rng: tuple[str, ...] = ()
    tensors: int = 0
    host_values: int = 0
    truncated: bool = False
    spread: tuple[Change, ...] = ()  # measured: two calls from one state (no reset)

    @property
    def nondeterministic(self) -> bool:
        """Two calls from one starting state differ: kernels that are not deterministic
        (atomics), or a reset that misses some state."""
        return (self.reset and self.repeatable is False) or bool(self.spread)

    def summary(self) -> str:
        """ "repeats (...)", "does not repeat (...)" or "unknown (...)", with the why."""
        start = "from its reset" if self.reset else "one after the other"
        if self.repeatable is None:
            return (
                f"unknown ({self.warmups} warm-up{'s' * (self.warmups != 1)}; telling "
                "takes 2 or more: --warmup 2)"
            )
        watched = f"{self.tensors} tensors and {self.host_values} host values watched"
        if self.repeatable and self.spread:
            most = max(c.max_diff or 0.0 for c in self.spread)
            return (
                f"repeats within its measured non-determinism (its last two of "
                f"{self.warmups} warm-ups differ in {names(list(self.changed))}; two calls "
                f"from one state differ there too, by up to {most:.3g}; {watched})"
            )
        if self.repeatable:
            return f"repeats (its last two of {self.warmups} warm-ups, {start}, agree; {watched})"
        differ = names(list(self.changed))
        return f"does not repeat ({start}, its last two warm-ups differ in {differ})"

    def refusal(self, name: str) -> str | None:
        """The one line refusing many replays of this step, or None if they are safe."""
        if self.repeatable is not False or self.reset:
            return None
        state = [c for c in self.changed if not c.output]
        outputs = any(c.output for c in self.changed)
        what = names(state) if state else "its outputs"
        also = " (and so did its outputs)" if state and outputs else ""
        grown = [c for c in state if c.replaced and "another shape" in c.detail]
        if grown:
            return (
                f"{name} does not repeat: its state grows at every call ({grown[0].name} "
                f"{grown[0].detail}, a growing cache); {GROWN_FIX}"
            )
        return (
            f"{name} does not repeat and has no step.reset: between its last two warm-ups "
            f"{what} changed{also}; replayed many times, its graph would carry that on (past "
            f"the end of a buffer, or measuring another step than yours): {FIX}"
        )

    def notes(self, name: str) -> list[str]:
        """What a person should know before its graph is replayed, one line each."""
        out = []
        if self.repeatable is None:
            out.append(f"whether {name} repeats is {self.summary()}; replaying it as it is")
        if self.spread:
            out.append(f"{name} {self.summary()}")
        elif self.nondeterministic:
            out.append(
                f"{name}: two warm-ups from its reset state differ "
                f"({names(list(self.changed))}): kernels that are not deterministic, or a "
                "reset that misses some state"
            )
        if self.rebound:
            out.append(
                f"{name} rebinds {', '.join(self.rebound[:3])} to new tensors at every call: "
                "its graph keeps reading the ones its capture saw (check compares the two)"
            )
        if self.replaced_by_reset:
            out.append(
                f"{name}'s reset rebound {', '.join(self.replaced_by_reset[:3])} to new tensors "
                "instead of resetting them in place: its graph keeps reading the ones it captured"
            )
        host = [c for c in self.in_a_call if c.host]
        if host:
            out.append(host_note(name, host))
        if self.truncated:
            out.append(f"the walk over {name}'s state stopped at a bound: some is not watched")
        return out

    def to_dict(self) -> dict:
        return {
            "warmups": self.warmups,
            "reset": self.reset,
            "repeatable": self.repeatable,
            "summary": self.summary(),
            "changed": [c.to_dict() for c in self.changed],
            "in_a_call": [c.to_dict() for c in self.in_a_call],
            "rebound": list(self.rebound),
            "replaced_by_reset": list(self.replaced_by_reset),
            "rng": list(self.rng),
            "tensors": self.tensors,
            "host_values": self.host_values,
            "truncated": self.truncated,
            "spread": [c.to_dict() for c in self.spread],
        }


def require_repeatable(rep: Repeatability | None, name: str) -> None:
    """Before many replays: StepStateError with the one line if the step cannot take them."""
    line = rep.refusal(name) if rep is not None else None
    if line:
        raise StepStateError(line)


def host_note(name: str, host: list[Change]) -> str:
    """The line count, sweep and report give for host values a call changes (check makes a
    finding of it instead)."""
    shown = "; ".join(f"{c.name}: {c.detail}" for c in host[:3])
    return (
        f"{name}: a call changes host values ({shown}); a graph replays what its capture saw "
        "of them, so if the step's device work reads one its replays are wrong: `graph-harness "
        "check` on a GPU tells"
    )


def host_changes(before: dict[str, object], after: dict[str, object]) -> list[Change]:
    """Host values that differ between two readings (`host_values`), as Changes."""
    return [
        Change(n, f"{before[n]!r} then {after.get(n)!r}", host=True)
        for n in before
        if repr(before[n]) != repr(after.get(n))
    ]


class StateWatch:
    """The warm-up hooks (capture/graph/capture.py `warm_up`): the step reset before each
    call; with `watch`, the last two fingerprinted and judged (`repeatability`). `finish`
    ends a capture: the verdict if the warm-ups gave none, and the closing reset."""

    def __init__(
        self, step: Callable[[], object], *, watch: bool = True, hosts: bool = False
    ) -> None:
        """`hosts`: where the state is not watched, still read the step's host values
        around the last warm-up (a walk alone: no tensor is copied or hashed), so that
        `host_moved` can say which a call changes."""
        self.step = step
        self.hosts = hosts and not watch
        self.host_moved: list[Change] = []
        self._hosts: dict[str, object] = {}
        self.reset = reset_of(step)
        self.start = start_of(step)  # the reset, then feed(0)
        self.watch = watch
        self.repeatability: Repeatability | None = None
        self._prints: dict[str, Fingerprint] = {}
        self._rng: dict[str, torch.Tensor] = {}
        self._drawn: list[str] = []

    def _watched(self, i: int, n: int) -> bool:
        return self.watch and n >= 2 and i >= n - 2

    def before(self, i: int, n: int) -> None:
        if self.start is not None:
            self.start()
        if self.hosts and i == n - 1:
            self._hosts = host_values(self.step)
        if not self._watched(i, n):
            return
        if i == n - 2:
            self._rng = rng_state()
        else:  # the last draws what the one before drew
            set_rng_state(self._rng)
            if self.reset is not None:
                self._prints["start"] = fingerprint(self.step, with_output=False)
        self._before = rng_state()

    def before_capture(self) -> None:
        """The captured call starts where every warm-up did: from the reset, at call 0's
        inputs (so a host value the graph freezes is the starting state's)."""
        if self.start is not None:
            self.start()

    def after(self, i: int, n: int, output: object) -> None:
        if self.hosts and i == n - 1:
            self.host_moved = host_changes(self._hosts, host_values(self.step))
        if not self._watched(i, n):
            return
        self._drawn = rng_moved(self._before, rng_state())
        self._prints["second" if i == n - 2 else "last"] = fingerprint(self.step, output)
        if i == n - 1:
            self.repeatability = self._judge(n)
            self._prints.clear()
            if self.repeatability.repeatable is False and self.reset is None:
                from graph_harness.capture.state.nondeterminism import within_spread

                self.repeatability = within_spread(self.step, self.repeatability, self._rng)

    def _judge(self, n: int) -> Repeatability:
        a, b = self._prints["second"], self._prints["last"]
        start = self._prints.get("start", a)
        changed = compare(a, b)
        return Repeatability(
            warmups=n,
            reset=self.reset is not None,
            repeatable=not changed,
            changed=tuple(changed),
            in_a_call=tuple(compare(start, b, outputs=False)),
            rebound=tuple(replaced_by(start, b)),
            replaced_by_reset=tuple(replaced_by(a, start)) if self.reset else (),
            rng=tuple(self._drawn),
            tensors=b.tensors(),
            host_values=len(b.seen) - b.tensors(),
            truncated=a.truncated or b.truncated,
        )

    def finish(self, warmup: int) -> None:
        if self.repeatability is None:
            self.repeatability = Repeatability(warmup, self.reset is not None, None)
        if self.start is not None:
            self.start()
