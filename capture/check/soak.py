"""check's soak (`check --soak N`): N more replays of the graph along the check's fed
trajectory, compared with the eager calls at a sample of them (laps 0, 1, 2, 4, 8, ...
and the last), under a watchdog, for failures that show only under sustained replay.

A replay that misses its deadline (DEADLINE_FACTOR x a replayed call, at least
DEADLINE_FLOOR_S, or `soak_deadline`) is a hang: the soak stops, names the replay, and
never waits for the device again (no sync, no reset); the caller must exit without
waiting (os._exit). The replays, comparisons and watchdog in full: docs/steps-and-check.md,
"capture/check/soak.py".
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from graph_harness.capture.check.findings import Finding
from graph_harness.capture.check.judge import classify, exact_kind, spread_at
from graph_harness.capture.check.messages import what
from graph_harness.capture.check.outputs import OutputPoison
from graph_harness.capture.check.restore import put_back
from graph_harness.capture.check.trajectory import Trajectories
from graph_harness.capture.replay.guard import Replayer, cuda_in_use, is_cuda_error, sync
from graph_harness.capture.state.changes import compare
from graph_harness.capture.state.fingerprint import fingerprint
from graph_harness.capture.state.rng import set_rng_state
from graph_harness.capture.state.steps import Repeatability, feed_of, start_of

IN_FLIGHT = 2  # replays queued ahead of the one waited on
DEADLINE_FACTOR = 100  # a replay's deadline: this many times a measured call
DEADLINE_FLOOR_S = 1.0  # and never less: a GPU shared with others stalls for milliseconds
POLL_S = 50e-6  # between two queries of a replay's event


@dataclass
class SoakResult:
    """What the soak did (`to_dict` goes into check.json) and what it found."""

    replays: int  # asked for
    done: int = 0  # replays known finished
    laps: int = 0  # laps begun
    compared: int = 0  # comparisons made
    deadline_s: float = 0.0
    deadline_from: str = ""  # how the deadline was set, in words
    seconds: float = 0.0
    hang: dict | None = None  # the replay that did not finish: replay, lap, call, waited_s
    findings: list[Finding] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "replays": self.replays,
            "done": self.done,
            "laps": self.laps,
            "compared": self.compared,
            "deadline_s": self.deadline_s,
            "deadline_from": self.deadline_from,
            "seconds": self.seconds,
            "hang": self.hang,
        }


class Hang(Exception):
    """A replay past its deadline (internal: ends the soak's loop)."""


def compared_laps(laps: int) -> set[int]:
    """Laps compared: 0, 1, 2, 4, 8, ... and the last."""
    out, k = {0, laps - 1}, 1
    while k < laps:
        out.add(k)
        k *= 2
    return out


def deadline_of(t: Trajectories, given: float | None) -> tuple[float, str]:
    """The watchdog's deadline, and where it came from (module docstring)."""
    if given is not None:
        return float(given), "given (soak_deadline)"
    run = t.seconds.get("c") or t.seconds.get("calls")
    per_call = run / max(1, t.steps if "c" in t.seconds else 4 * len(t.at)) if run else None
    if per_call is None:
        return DEADLINE_FLOOR_S, f"the floor, {DEADLINE_FLOOR_S:g} s (no measured replay)"
    d = max(DEADLINE_FLOOR_S, DEADLINE_FACTOR * per_call)
    return d, (
        f"{DEADLINE_FACTOR} x {per_call * 1e3:.3g} ms, the time a call of the check's "
        f"replayed run took (at least {DEADLINE_FLOOR_S:g} s)"
    )


def soak(
    step: Callable[[], object],
    graph: object,
    output: object,
    t: Trajectories,
    outputs: OutputPoison | None,
    rep: Repeatability,
    replays: int,
    *,
    name: str,
    deadline: float | None = None,
) -> SoakResult:
    """`replays` replays of `graph` along the trajectory `t` check ran (module docstring).
    Syncs and leaves the step at its start, unless a replay hangs."""
    res = SoakResult(replays)
    res.deadline_s, res.deadline_from = deadline_of(t, deadline)
    s = _Soak(step, graph, output, t, outputs, rep, name, res)
    t0 = time.perf_counter()
    first = s.r.replays + 1
    try:
        s.run(replays)
    except Hang:
        res.seconds = time.perf_counter() - t0
        return res  # no sync, no reset: both would wait behind the hang
    except Exception as e:
        if not is_cuda_error(e):
            raise
        raise s.r.error(f"check's soak of {replays} replays", first, e) from e
    if s.start is not None:
        s.start()
    sync()
    res.seconds = time.perf_counter() - t0
    return res


class _Soak:
    """The soak's loop and what it keeps (module docstring)."""

    def __init__(
        self,
        step: Callable[[], object],
        graph: object,
        output: object,
        t: Trajectories,
        outputs: OutputPoison | None,
        rep: Repeatability,
        name: str,
        res: SoakResult,
    ) -> None:
        self.step, self.output, self.t, self.outputs, self.res = step, output, t, outputs, res
        self.start = start_of(step)
        self.feed = feed_of(step)
        self.r = Replayer(
            graph, name, reset=self.start if t.sequential else None, repeatability=rep
        )
        self.spreads = [spread_at(t, k) for k in range(len(t.at))]
        self.position = {i: k for k, i in enumerate(t.at)}
        self.queue: list[tuple[int, int, int, object]] = []  # (replay, lap, call, event)
        self.said: set[str] = set()  # tensors with a finding: each said once

    def run(self, replays: int) -> None:
        t, res = self.t, self.res
        laps = compared_laps(-(-replays // t.steps))
        for n in range(1, replays + 1):
            lap, i = divmod(n - 1, t.steps)
            if i == 0:
                res.laps += 1
                if t.sequential and self.start is not None:
                    self._drain()  # a reset that syncs must not wait behind a hung replay
                    self.start()  # reset, feed(0)
                    self.r.since_reset = 0
                    put_back(self.step, t.a.start, t.restored)  # as the check's runs began
            if self.feed is not None and not (t.sequential and i == 0):
                # a feed may sync (a tensor made from a Python value, a copy from pageable
                # memory): the replays before it waited for first, under the watchdog
                self._drain()
            if self.outputs is not None:
                self.outputs.fill()
            if self.feed is not None and not (t.sequential and i == 0):
                self.feed(i)
            if t.rngs:
                set_rng_state(t.rngs[i])
            self.r.replay()
            self.queue.append((n, lap, i, event()))
            if lap in laps and i in self.position:
                self._drain()  # this replay finished, under its deadline, then read
                self._compare(n, lap, i)
            while len(self.queue) > IN_FLIGHT:
                _wait(self.queue.pop(0), res)
            if any(f.severity == "fail" for f in res.findings):
                break
        self._drain()

    def _drain(self) -> None:
        while self.queue:
            _wait(self.queue.pop(0), self.res)

    def _compare(self, n: int, lap: int, i: int) -> None:
        """Replay n (call i of lap `lap`), finished, against eager run A's call i."""
        k = self.position[i]
        fp = fingerprint(self.step, self.output, clone_to="cpu", non_blocking=True)
        ev = event()
        _wait((n, lap, i, ev), self.res)  # the copies landed (its own deadline)
        self.res.compared += 1
        ref = self.t.a.after[k]
        for c in compare(ref, fp):
            if c.host or c.name in self.said:
                continue
            seen = ref.seen.get(c.name) or fp.seen[c.name]
            verdict = classify(c, self.spreads[k].get(c.name), seen)
            if verdict == "within":
                continue
            self.said.add(c.name)
            unjudged = verdict == "unjudged"
            self.res.findings.append(
                Finding(
                    kind="unjudged" if unjudged else "soak-mismatch",
                    severity="unverified" if unjudged else "fail",
                    message=f"{what(c)} {c.name}: at soak replay {n} (call {i} of lap {lap}) "
                    f"the graph's replay differs from the eager call: {c.detail}; "
                    + (
                        "two eager runs from one state already disagree there "
                        f"({exact_kind(seen)}): the step cannot be told from its graph"
                        if unjudged
                        else "the check's own runs agreed, so the graph goes wrong only after "
                        "many replays"
                    ),
                    tensor=c.name,
                    step=i,
                )
            )


class _Done:
    """A replay with no device behind it (a stand-in graph on the CPU) is done at once."""

    def query(self) -> bool:
        return True


def event() -> torch.cuda.Event | _Done:
    """An event recorded on the current stream after the work queued so far."""
    if not cuda_in_use():
        return _Done()
    ev = torch.cuda.Event()
    ev.record()
    return ev


def _wait(item: tuple[int, int, int, torch.cuda.Event], res: SoakResult) -> None:
    n, lap, i, ev = item
    began = time.perf_counter()
    while not ev.query():
        waited = time.perf_counter() - began
        if waited > res.deadline_s:
            res.hang = {"replay": n, "lap": lap, "call": i, "waited_s": waited}
            res.findings.append(
                Finding(
                    kind="hang",
                    severity="fail",
                    message=f"soak replay {n} (call {i} of lap {lap}) did not finish within "
                    f"{res.deadline_s:.3g} s ({res.deadline_from}); {res.done} replays "
                    "finished before it. Nothing more was run on the device and the step was "
                    "not reset: the process must exit without waiting on the device",
                    step=i,
                )
            )
            raise Hang
        time.sleep(POLL_S)
    res.done = n
