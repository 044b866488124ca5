"""One checked replay, and the process's checker that record's hooks call.

Where the program calls `graph.replay()`: the form's state is snapshotted (and the CUDA
generator's state read), the eager form runs twice from it (A, then B), the state is put
back, the program's replay runs and is synchronized, and its outputs and state are
compared with A's, judged by A against B (compare.py). The program goes on from what its
replay left. Eager code that draws random numbers is "not checked", never judged. The
steps and the cost: docs/record.md, "capture/live/checked.py".
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import torch

from graph_harness.capture.live.compare import compare, spread
from graph_harness.capture.live.forms import Adapted, EagerForm, Form, Skipped, builtin_form
from graph_harness.capture.live.lost import end_process, fatal
from graph_harness.capture.live.lost import first_line as _first_line
from graph_harness.capture.live.sample import Sample
from graph_harness.capture.live.unfinished import Launches
from graph_harness.capture.live.writers import describe_writer
from graph_harness.capture.record.keys import CaptureContext
from graph_harness.capture.record.verdict import LISTED, Difference, GraphVerdict
from graph_harness.capture.replay.progress import Marks


class Checker:
    """The process's checker (record's settings hold it while `--check` is on)."""

    def __init__(self, sample: Sample, adapters: list[tuple[str, Callable]]) -> None:
        self.sample, self.adapters = sample, adapters
        self.launches = Launches()  # which replay did not finish (unfinished.py)

    def find(self, frames: list, graph: object, index: int) -> Form | str:
        """The capture's eager form (an adapter's first), or why there is none. Called as
        the capture begins, before torch starts it (an adapter never runs inside it)."""
        for name, fn in self.adapters:
            try:
                got = fn(CaptureContext(frames, graph, index))
            except Exception as e:
                return f"eager adapter {name} raised {type(e).__name__}: {_first_line(e)}"
            if got is None:
                continue
            if not isinstance(got, EagerForm):
                return f"eager adapter {name} returned {type(got).__name__}, not an EagerForm"
            return Adapted(got)
        return builtin_form(frames, graph)

    def attach(
        self, form: Form | str, record: Any, pointers: list | None = None
    ) -> GraphCheck | None:
        """Give `record` its verdict, and the checked replays where there is a form
        (`pointers`: its nodes' addresses, to name the node that writes a difference)."""
        if isinstance(form, str):
            status = "skipped" if isinstance(form, Skipped) else "not checked"
            record.check = GraphVerdict(status=status, reason=str(form))
            return None
        record.check = GraphVerdict(source=form.source)
        check = GraphCheck(form, record.check, self.sample, self.launches, str(record.key))
        if pointers is not None:
            check.nodes = (pointers, record.export.nodes if record.export else None)
        return check

    def settle(self) -> None:
        """At the recording's end: a device-side assertion that surfaced in the program's
        own code (or not at all) lost the context after the last checked replay; the
        replay that did not finish is named, its graph's verdict "assert"."""
        if not self.launches.order or self.launches.lost:
            return
        try:
            _sync()
        except Exception as e:
            if not fatal(e):
                raise
            culprit = self.launches.first_unfinished()
            if culprit is not None:
                check, n = culprit
                check.tripped(n, e, seen="at the recording's end (in the program's own code)")


class GraphCheck:
    """One graph's checked replays: `next` is the replay number due."""

    def __init__(
        self,
        form: Form,
        verdict: GraphVerdict,
        sample: Sample,
        launches: Launches | None = None,
        label: str = "",
    ) -> None:
        self.form, self.verdict, self.sample = form, verdict, sample
        self.launches, self.label = launches or Launches(), label
        self.marks: Marks | None = None  # made at the first replay (unfinished.py)
        # the capture's device, where the replays run (attach runs as the capture ends)
        self.device = torch.cuda.current_device() if torch.cuda.is_initialized() else None
        self.next = sample.due()
        self._busy = False
        self.nodes: tuple[list, list | None] | None = None  # addresses, export nodes

    def launched(self, n: int) -> None:
        """After the program's replay `n` of this graph, checked or not, was launched."""
        self.launches.launched(self, n)

    def tripped(self, n: int, e: BaseException, *, seen: str) -> None:
        """Replay `n` of this graph, not one compared, did not finish: the device's
        count of its replays says so (unfinished.py)."""
        v = self.verdict
        v.status = "assert"
        v.assertion = (
            f"replay {n}: the replay tripped it (not a compared replay; the replays "
            f"before it finished, as the device counted them; it surfaced {seen}): "
            f"{_first_line(e)}"
        )
        v.reason = "the process's GPU context is lost, so the program cannot go on"
        self.next = math.inf

    def replay(self, graph: object, original: Callable, n: int) -> Any:
        """The program's replay `n` of this graph, checked (see the module's notes)."""
        if self._busy:  # the eager form replays this graph itself: it is no eager form
            self._stop(n, "its eager form replays the graph itself")
            return original(graph)
        self._busy = True
        try:
            return self._checked(graph, original, n)
        finally:
            self._busy = False

    def _checked(self, graph: object, original: Callable, n: int) -> Any:
        t0 = time.perf_counter()
        try:
            _sync()  # what ran before is done: an error now is not this replay's
        except Exception as e:
            if fatal(e):
                self._assertion(n, e, where="before")
            raise
        try:
            state = self.form.state()
            saved = {k: t.clone() for k, t in state.items()}
            rng = _rng()
        except Exception as e:
            self._stop(n, f"its inputs and state could not be read ({_error(e)})")
            return original(graph)
        try:
            a = self._eager(state)
            _put_back(state, saved, rng)
            b = self._eager(state)
            moved = _moved(rng)
            _put_back(state, saved, rng)
        except Exception as e:
            self._eager_failed(n, e, state, saved, rng)
            return original(graph)
        del saved
        if moved:
            self._stop(
                n,
                "the captured code draws random numbers (the CUDA generator moved), "
                "which no eager run reproduces bit for bit",
            )
            return original(graph)
        spreads = {k: spread(a[k], b[k]) for k in a}
        del b
        spent = time.perf_counter() - t0
        result = original(graph)
        try:
            _sync()
        except Exception as e:
            if fatal(e):
                self._assertion(n, e, where="replay")
            raise
        t1 = time.perf_counter()
        try:
            replayed = {**self.form.outputs(), **state}
            got = compare(a, spreads, replayed)
        except Exception as e:
            self._stop(n, f"the replay's outputs could not be read ({_error(e)})")
            return result
        self._judge(n, got, replayed)
        self.verdict.seconds += spent + time.perf_counter() - t1
        return result

    def _eager(self, state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        out = self.form.eager()
        # copies: an output may alias the state or a buffer the next run or the replay
        # writes (an adapter's static output, an Inductor output viewing an input)
        kept = {k: t.detach().clone() for k, t in {**out, **state}.items()}
        _sync()  # an assertion in the eager code is the eager code's
        return kept

    def _judge(self, n: int, got: Any, replayed: dict[str, torch.Tensor]) -> None:
        v = self.verdict
        v.compared_at(n)
        v.nondeterministic = sorted(set(v.nondeterministic) | set(got.nondeterministic))
        if got.differ:
            v.status = "differs"
            v.differences = [
                Difference(replay=n, tensor=t, detail=d, max_diff=m, node=self._writer(t, replayed))
                for t, d, m in got.differ[:LISTED]
            ]
            self.next = math.inf  # the first difference is the finding: checking stops
        elif got.undecided:
            v.status = "not verified"
            v.reason = (
                f"at replay {n}, two eager runs from one state disagree on integer "
                f"tensors, which cannot be judged: {', '.join(got.undecided[:3])}"
            )
            self.next = math.inf
        else:
            self.next = self.sample.next_after(n)

    def _writer(self, name: str, replayed: dict[str, torch.Tensor]) -> str | None:
        """The node that writes tensor `name`, in words, where its addresses tell it."""
        t = replayed.get(name)
        if self.nodes is None or not isinstance(t, torch.Tensor):
            return None
        # here, on a difference only: graph_harness.kernels imports Triton (a second or
        # more), which a recorded program's process is not made to pay otherwise
        from graph_harness.kernels.guard import byte_range

        try:
            return describe_writer(byte_range(t), *self.nodes)
        except Exception:  # naming the node is a help, never the check's failure
            return None

    def _stop(self, n: int, why: str) -> None:
        """Checking ends at replay `n` for `why` (what was compared before stands)."""
        v = self.verdict
        if v.compared_count == 0:
            v.status, v.reason = "not checked", why
        else:
            v.reason = f"checking stopped at replay {n}: {why}"
        self.next = math.inf

    def _eager_failed(self, n: int, e: Exception, state: dict, saved: dict, rng: Any) -> None:
        if fatal(e):
            self._assertion(n, e, where="eager")
        try:
            _put_back(state, saved, rng)
        except Exception as e2:  # the program cannot be left as it was: say so, loudly
            raise RuntimeError(
                f"graph-harness record --check could not restore the state after the eager "
                f"form failed at replay {n}: {_error(e2)}"
            ) from e
        self._stop(n, f"the eager form raised {_error(e)}")

    def _assertion(self, n: int, e: BaseException, *, where: str) -> None:
        """A CUDA error that loses the context, in the replay (the graph's finding), in
        the eager form (the graph not judged), or before either (an unchecked replay's or
        the program's own work, surfacing at the first synchronization)."""
        v = self.verdict
        lost = "the process's GPU context is lost, so the program cannot go on"
        self.launches.lost = True  # said here: the recording's end does not say it again
        if where == "replay":
            v.status = "assert"
            v.assertion = f"replay {n}: the replay tripped it: {_first_line(e)}"
            v.reason = f"the eager form ran to the end from the same state; {lost}"
        elif where == "eager":
            v.status = "not checked"
            v.reason = (
                f"at replay {n} the eager form tripped a device-side assertion "
                f"({_first_line(e)}), so the graph was not judged; {lost}"
            )
        else:
            culprit = self.launches.first_unfinished()
            if culprit is not None:
                check, k = culprit
                check.tripped(k, e, seen=f"before replay {n} of graph {self.label}")
                end_process(f"graph {check.label}: {check.verdict.assertion}; {lost}", e)
                return
            v.status = "assert"
            v.assertion = (
                f"before replay {n}: an unchecked replay (at or before {n - 1}) or the "
                f"program's own work tripped it: {_first_line(e)}"
            )
            v.reason = lost
        self.next = math.inf
        end_process(f"graph {self.label} ({v.source}): {v.assertion or v.reason}; {lost}", e)


def _error(e: BaseException) -> str:
    return f"{type(e).__name__}: {_first_line(e)}"


def _sync() -> None:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def _rng() -> tuple[torch.Tensor, list[torch.Tensor] | None]:
    """The CPU generator's state, and every CUDA device's where CUDA is in use."""
    cuda = torch.cuda.is_available() and torch.cuda.is_initialized()
    return torch.get_rng_state(), torch.cuda.get_rng_state_all() if cuda else None


def _moved(rng: tuple[torch.Tensor, list[torch.Tensor] | None]) -> bool:
    now = _rng()
    if not torch.equal(now[0], rng[0]):
        return True
    return rng[1] is not None and any(not torch.equal(a, b) for a, b in zip(now[1], rng[1]))


def _put_back(state: dict[str, torch.Tensor], saved: dict[str, torch.Tensor], rng: Any) -> None:
    with torch.no_grad():
        for k, t in state.items():
            t.copy_(saved[k])
    torch.set_rng_state(rng[0])
    if rng[1] is not None:
        torch.cuda.set_rng_state_all(rng[1])
