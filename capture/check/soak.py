"""check's soak (`check --soak N`): N more replays of the graph along the check's fed
trajectory, compared with the eager calls at a sample of them, under a watchdog. Failures
that show only under sustained replay (a pool that drifts, a counter that wraps, a graph
that wedges after thousands of replays, pytorch/pytorch #196133) need many replays; the
check's four runs give a few.

- **The replays.** The trajectory's calls (`steps` of them, to the end with `--steps
  to-end`) replayed lap after lap: a step with a reset is returned to its start
  (reset, feed(0), eagerly) before each lap; one without runs call `r mod steps` after
  call `r - 1`, as its check did call by call. Before each replay the outputs are filled
  (capture/check/outputs.py), call i's inputs fed and the generators set to what the
  eager run A had before its call i. The step itself is not called.
- **The comparisons.** In laps 0, 1, 2, 4, 8, ... and the last, at the calls the check
  compared (capture/check/sample.py), the state and outputs are fingerprinted and
  compared with eager run A's after the same call, judged as the check judges A against
  its replays: bit for bit where two eager runs from one state agree, within their
  measured spread where they do not (a tensor the check could not judge is left to the
  check's verdict). The first difference fails the soak, naming the replay, the lap, the
  call and the tensor.
- **The watchdog.** Each replay is followed by a CUDA event, and at most IN_FLIGHT
  replays are queued ahead of the one waited on. Each wait has a deadline: DEADLINE_FACTOR
  times the time a call of the check's first replayed run took (at least
  DEADLINE_FLOOR_S), or `soak_deadline`. A replay that does not finish by then is a
  hang: the soak stops at once, names the replay (which lap, which call) and how many
  finished before it, and never waits for the device again: no sync, no reset (either
  would wait behind the hang). The step is left as the hang found it, and the process
  must exit without waiting on the device (`check` exits with os._exit; a program
  calling check_step should do the same).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from graph_harness.capture.check.findings import Finding
from graph_harness.capture.check.judge import exact_only, within_spread
from graph_harness.capture.check.messages import what
from graph_harness.capture.check.outputs import OutputPoison
from graph_harness.capture.check.trajectory import Trajectories
from graph_harness.capture.replay.guard import Replayer, cuda_in_use, is_cuda_error, sync
from graph_harness.capture.state.changes import Change, compare
from graph_harness.capture.state.fingerprint import Fingerprint, fingerprint
from graph_harness.capture.state.steps import Repeatability, feed_of, set_rng_state, start_of

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
    sequential = t.sequential
    start = start_of(step)
    feed = feed_of(step)
    r = Replayer(graph, name, reset=start if sequential else None, repeatability=rep)
    spreads = [
        {c.name: c for c in compare(t.a.after[k], t.b.after[k]) if not c.host}
        for k in range(len(t.at))
    ]
    position = {i: k for k, i in enumerate(t.at)}
    laps = -(-replays // t.steps)
    check_laps = compared_laps(laps)
    queue: list[tuple[int, int, int, torch.cuda.Event]] = []  # (replay, lap, call, event)
    pending: list[tuple[int, int, int, Fingerprint]] = []  # compared once synced
    failed: set[str] = set()
    t0 = time.perf_counter()
    first = r.replays + 1
    try:
        for n in range(replays):
            lap, i = divmod(n, t.steps)
            if i == 0:
                res.laps += 1
                if sequential and start is not None:
                    # the lap's replays waited for first, under the watchdog: a reset that
                    # syncs (an .item(), a copy from pageable memory) would otherwise wait
                    # behind a hung replay with no deadline
                    _drain(queue, res)
                    start()  # reset, feed(0)
                    r.since_reset = 0
            if outputs is not None:
                outputs.fill()
            if feed is not None and not (sequential and i == 0):
                feed(i)
            if t.rngs:
                set_rng_state(t.rngs[i])
            r.replay()
            if lap in check_laps and i in position:
                fp = fingerprint(step, output, clone_to="cpu", non_blocking=True)
                pending.append((n + 1, lap, i, fp))
            queue.append((n + 1, lap, i, event()))
            while len(queue) > IN_FLIGHT:
                _wait(queue.pop(0), res)
            if pending and res.done >= pending[0][0]:  # its copies have landed
                _compare(pending, res, t, spreads, position, failed)
            if res.findings:
                break
        _drain(queue, res)
        _compare(pending, res, t, spreads, position, failed, every=True)
    except Hang:
        res.seconds = time.perf_counter() - t0
        return res  # no sync, no reset: both would wait behind the hang
    except Exception as e:
        if not is_cuda_error(e):
            raise
        raise r.error(f"check's soak of {replays} replays", first, e) from e
    if start is not None:
        start()
    sync()
    res.seconds = time.perf_counter() - t0
    return res


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


def _drain(queue: list, res: SoakResult) -> None:
    while queue:
        _wait(queue.pop(0), res)


def _compare(
    pending: list[tuple[int, int, int, Fingerprint]],
    res: SoakResult,
    t: Trajectories,
    spreads: Sequence[dict[str, Change]],
    position: dict[int, int],
    failed: set[str],
    *,
    every: bool = False,
) -> None:
    """Compare the fingerprints whose replays have finished (all of them with `every`)."""
    while pending and (every or res.done >= pending[0][0]):
        n, lap, i, fp = pending.pop(0)
        k = position[i]
        res.compared += 1
        for c in compare(t.a.after[k], fp):
            if c.host or c.name in failed:
                continue
            own, seen = spreads[k].get(c.name), t.a.after[k].seen.get(c.name)
            if own is not None and seen is not None and (exact_only(seen) or within_spread(c, own)):
                continue  # judged by the check's own verdict, or within the measured spread
            failed.add(c.name)
            res.findings.append(
                Finding(
                    kind="soak-mismatch",
                    severity="fail",
                    message=f"{what(c)} {c.name}: at soak replay {n} (call {i} of lap {lap}) "
                    f"the graph's replay differs from the eager call: {c.detail}; the check's "
                    "own runs agreed, so the graph goes wrong only after many replays",
                    tensor=c.name,
                    step=i,
                )
            )
