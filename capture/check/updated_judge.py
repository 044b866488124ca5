"""The updated-executable check's walks judged (capture/check/updated.py): every visit of
the shared executable against the same visit of the size's own executable, and against
the size's eager call; each update that succeeded, its graphs' kernel launches compared;
each refusal said. On fingerprints held on the host and records read from the graphs: no
device. The words are capture/check/updated_verdict.py's (and, for a visit that differs
from the eager call alone, the interleaved check's)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from graph_harness.capture.check.findings import Finding
from graph_harness.capture.check.interleaved_verdict import (
    judge_call,
    mismatch,
    suspects,
    unjudged,
    within,
)
from graph_harness.capture.check.size_runs import SizeRuns
from graph_harness.capture.check.updated_launches import compare_launches, function_changes
from graph_harness.capture.check.updated_verdict import (
    Transition,
    launch_flag,
    none_updated,
    random_unjudged,
    refused,
    unjudged_update,
    update_differs,
    where,
)
from graph_harness.capture.graph.attributes import GraphLaunches
from graph_harness.capture.state.changes import disagreement
from graph_harness.capture.state.fingerprint import Fingerprint

_RANK = {"passed": 0, "unverified": 1, "failed": 2}
_OF = {"fail": "failed", "unverified": "unverified"}


@dataclass
class Judged:
    """What the walks show: the findings, each size's status, and the counts."""

    findings: list[Finding] = field(default_factory=list)
    by_size: dict[int, str] = field(default_factory=dict)
    compared: int = 0
    tensors: int = 0
    function_changes: int = 0
    said: set[tuple] = field(default_factory=set)  # (batch, what) told once

    def add(self, f: Finding, batch: int | None = None, once: tuple | None = None) -> None:
        if once is not None:
            if once in self.said:
                return
            self.said.add(once)
        self.findings.append(f)
        status = _OF.get(f.severity)
        if batch is not None and status is not None:
            now = self.by_size.get(batch, "passed")
            self.by_size[batch] = max(now, status, key=_RANK.__getitem__)


def judge_walk(
    order: list[tuple[int, int]],
    runs: dict[int, SizeRuns],
    walks: tuple[list[Fingerprint], list[Fingerprint], list[Fingerprint]],
    transitions: list[Transition],
    launches: dict[int, GraphLaunches],
    alone: bool,
) -> Judged:
    """`walks`: the own executables' two walks and the shared executable's, a fingerprint
    per visit of `order`. `alone`: each size's own check ran (capture/check/updated.py)."""
    out = Judged()
    first, second, got = walks
    at = {t.visit: t for t in transitions}
    captured = list(runs)
    fresh = True  # the twins start from one state until the first difference
    for k, (b, i) in enumerate(order):
        t = at.get(k) or max((x for x in transitions if x.visit <= k), key=lambda x: x.visit)
        out.compared += 1
        if fresh:
            fresh = _against_own(out, t, k, len(order), i, (first[k], second[k], got[k]))
        _against_eager(out, runs[b], t, k, order, captured, got[k], alone, own_agreed=fresh)
    _switches(out, transitions, launches)
    return out


def _against_own(
    out: Judged, t: Transition, k: int, total: int, call: int, fps: Sequence[Fingerprint]
) -> bool:
    """A visit against the own executable's; False once they differ."""
    one, two, got = fps
    judged = judge_call(one, disagreement(one, two), got)
    out.tensors += judged.compared
    if judged.bad:
        out.add(update_differs(t, k, total, call, judged.bad), t.after)
        return False
    for c in judged.unjudged:
        out.add(unjudged_update(t, k, total, call, c), t.after, once=(t.after, "own", c.name))
    return True


def _against_eager(
    out: Judged,
    s: SizeRuns,
    t: Transition,
    k: int,
    order: list[tuple[int, int]],
    captured: list[int],
    got: Fingerprint,
    alone: bool,
    *,
    own_agreed: bool,
) -> None:
    """A visit against its size's eager call, as the interleaved check judges one;
    `own_agreed`: the own executable's twin of this visit was compared, and agreed."""
    b, i = order[k]
    drew = sorted(w for w in s.drew if w.startswith("the CUDA"))
    if drew:  # its launches do not advance the generator: no eager call matches them
        out.add(random_unjudged(b, drew, alone), b, once=(b, "random"))
        return
    if out.by_size.get(b) == "failed":  # its first difference named; no more
        return
    judged = judge_call(s.after[i], s.spreads[i], got)
    out.tensors += judged.compared
    if judged.bad:
        others, how = suspects(order, k, captured)
        place = where(t, k, len(order), i)
        f = mismatch(b, i, k, len(order), judged.bad, others, how, place=place)
        own = (
            f"; batch {b}'s own executable, launched in the same walk, computes the same: "
            "not the update's doing"
            if own_agreed
            else ""
        )
        out.add(Finding(kind="serving", severity="fail", message=f.message + own,
                        tensor=f.tensor, step=f.step), b)  # fmt: skip
        return
    for c in judged.unjudged:
        out.add(unjudged(b, i, c), b, once=(b, "eager", c.name))
    for c, spread_of in judged.within:
        out.add(within(b, i, c, spread_of), b, once=(b, "within", c.name))


def _switches(
    out: Judged, transitions: list[Transition], launches: dict[int, GraphLaunches]
) -> None:
    """Each refusal said; each update that succeeded, its launches compared with those of
    the graph the executable was instantiated from (flags told once per node and
    attribute, with how many updates showed them)."""
    origin: int | None = None
    seen: dict[tuple, list] = {}
    refusals = 0
    for t in transitions:
        if t.result != "success":
            origin = t.after  # instantiated there (the first visit, or after a refusal)
            if t.result != "instantiated":
                refusals += 1
                out.add(refused(t))
            continue
        out.function_changes += function_changes(launches[origin], launches[t.after])
        for f in compare_launches(launches[origin], launches[t.after]):
            key = (f.kind, f.attribute) if f.kind == "attribute-unreadable" else (
                f.kind, f.index, f.attribute)  # fmt: skip
            seen.setdefault(key, [f, origin, t.after, 0])[3] += 1
    for f, o, target, times in seen.values():
        out.add(launch_flag(f, o, target, times), target)
    if refusals and refusals == len(transitions) - 1:
        out.add(none_updated(refusals))
