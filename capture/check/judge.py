"""Check's verdict on its trajectories (capture/check/trajectory.py): what differs, from
which step, and why, as findings (capture/check/findings.py).

Non-determinism is measured (eager runs A and B from one state), never inferred: a tensor
A and B agree on must agree bit for bit between the step and its graph; one they disagree
on may differ by up to SLACK times their difference if floating point and held whole,
else it cannot be judged (not verified). Two starts that differ, and host values named
as the cause: docs/steps-and-check.md, "capture/check/judge.py".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import torch

from graph_harness.capture.check.findings import Finding
from graph_harness.capture.check.library_hosts import accepted, accepted_finding
from graph_harness.capture.check.messages import (
    SLACK,
    host_fail,
    host_undecided,
    host_unverified,
    left_unfilled,
    measured,
    mismatch,
    reset_misses,
    restored,
    what,
)
from graph_harness.capture.check.trajectory import POISONS, Trajectories
from graph_harness.capture.state.changes import Change, compare, disagreement, names
from graph_harness.capture.state.fingerprint import Fingerprint, Seen

if TYPE_CHECKING:
    from graph_harness.capture.check.evidence import Evidence
    from graph_harness.capture.export.nodes import NodeExport

LISTED = 12  # mismatching tensors listed one finding each; the rest in one line


@dataclass(kw_only=True)
class Judgement:
    """What judge() finds, for check_captured to build its CheckResult from once."""

    steps: int
    compared: bool
    compared_calls: list[int]
    seconds: dict[str, float]
    outputs: int
    state: int
    nondeterministic: int = 0
    poisoned_outputs: dict | None = None
    findings: list[Finding] = field(default_factory=list)


def judge(
    t: Trajectories,
    export: NodeExport,
    copies: list[Finding],
    accept: Mapping[str, str] | None = None,
) -> Judgement:
    """What the trajectories show: the findings and the counts a CheckResult is built
    from. `accept`: host values the step accepts as harmless (capture/check/
    library_hosts.py): one that moves is shown as accepted, not judged; a tensor that
    differs still fails."""
    last = t.a.after[-1]
    result = Judgement(
        steps=t.steps,
        compared=t.c is not None,
        compared_calls=list(t.at),
        seconds=dict(t.seconds),
        outputs=sum(not s.host and s.output for s in last.seen.values()),
        state=sum(not s.host and not s.output for s in last.seen.values()),
    )
    moved = host_moves(t)
    taken = [n for n in moved if accept and accepted(n, accept) is not None]
    if taken:
        result.findings.append(accepted_finding(taken, accept))
        moved = {n: v for n, v in moved.items() if n not in taken}
    start_host, start_tensors = starts(t)  # a host value the reset misses is never accepted
    # the lists below follow t.at, the calls compared: position k is call t.at[k]
    eager = [spread_at(t, k) for k in range(len(t.at))]  # A against B
    differ = any(eager)
    result.findings += _restored_findings(t)
    if start_tensors and differ:
        result.findings.append(reset_misses(start_tensors))
        return result  # no two runs start alike: nothing can be compared with anything
    spreads = eager
    depends = False  # the step's device work depends on a host value the reset misses
    if start_host:
        spreads = [{} for _ in eager]  # not non-determinism: the starts differ
        if differ and t.c is None:
            result.findings.append(host_unverified(moved, start_host))
            return result
        if differ and _replays_differ(t):
            result.findings.append(host_undecided(start_host))
            return result
        depends = differ  # the replays repeat bit for bit: only the host value can differ
    result.nondeterministic = len({n for s in spreads for n in s})
    if result.nondeterministic:
        result.findings.append(measured(spreads, t.at))
    if t.outputs is not None:
        result.poisoned_outputs = t.outputs.to_dict()
        if t.outputs.left:
            result.findings.append(left_unfilled(t.outputs.left))
    if t.c is None:  # the CPU: what cannot be verified without a graph to replay
        if moved:
            result.findings.append(host_unverified(moved, start_host))
        return result
    result.findings += _against_the_graph(t, export, spreads, moved, copies, depends, start_host)
    return result


def judged_rule(e: Evidence) -> list[Finding]:
    """Check's rule (capture/check/rules.py) of the trajectories judged."""
    return list(e.judgement.findings)


def _against_the_graph(
    t: Trajectories,
    export: NodeExport,
    spreads: list[dict],
    moved: dict,
    copies: list[Finding],
    depends: bool,
    start_host: list[Change],
) -> list[Finding]:
    """The replays against the eager runs (a GPU's trajectories): memory freed under the
    graph, the tensors that differ, a host value behind them, and those the eager runs'
    own spread leaves unjudged or within it."""
    out = []
    freed = _freed(t, spreads)
    if freed:
        out.append(_freed_finding(t, freed))
    bad, unjudged, within = _against_eager(t, spreads)
    for k, c in bad[:LISTED]:
        out.append(mismatch(k, c, t, export, moved, copies, bool(freed)))
    if len(bad) > LISTED:
        out.append(
            Finding(
                kind="mismatch",
                severity="fail",
                message=f"and {len(bad) - LISTED} more tensors differ "
                f"({names([c for _, c in bad[LISTED:]])})",
            )
        )
    if depends or (bad and moved):
        first = (t.at[bad[0][0]], bad[0][1]) if bad else None
        out.append(host_fail(moved, start_host, first))
    for k, c in unjudged:
        i = t.at[k]
        out.append(
            Finding(
                kind="unjudged",
                severity="unverified",
                message=f"{what(c)} {c.name}: after step {i} the graph's replay differs from "
                f"the eager call ({c.detail}), and two eager runs from one state already "
                f"disagree there ({exact_kind(_seen(t, k, c))}): the step itself cannot be "
                "told from its graph here",
                tensor=c.name,
                step=i,
            )
        )
    for k, c, own in within:
        i = t.at[k]
        out.append(
            Finding(
                kind="nondeterministic",
                severity="info",
                message=f"{what(c)} {c.name}: after step {i} graph and eager call differ by "
                f"up to {c.max_diff:.3g}, within {SLACK:g} times what two eager runs from one "
                f"state differ by there ({own:.3g})",
                tensor=c.name,
                step=i,
            )
        )
    return out


def _restored_findings(t: Trajectories) -> list[Finding]:
    """What the check put back after its runs: the step's output buffers (info), and any
    other tensor (warn)."""
    last = t.a.after[-1]
    out_addrs = {s.meta[0] for s in last.seen.values() if s.output and not s.host}
    buffers = [n for n in t.restored if _addr(last, n) in out_addrs]  # the step's output
    others = [n for n in t.restored if n not in buffers]
    return [restored(ns, sev) for ns, sev in ((others, "warn"), (buffers, "info")) if ns]


def _freed_finding(t: Trajectories, freed: list) -> Finding:
    k, c = freed[0]
    i = t.at[k]
    return Finding(
        kind="freed-memory",
        severity="fail",
        message=f"the graph reads memory freed after its capture: after step {i}, "
        f"{names([c for _, c in freed])} differ between two replayed runs from one "
        f"state, with free memory filled with {POISONS[0]:#04x} then "
        f"{POISONS[1]:#04x}; keep every tensor the step uses alive for as long as its "
        "graph",
        tensor=c.name,
        step=i,
    )


# --- what the runs show ------------------------------------------------------------------


def starts(t: Trajectories) -> tuple[list[Change], list[Change]]:
    """What still differs between the starts of the runs once the watched tensors were put
    back (capture/check/trajectory.py): (host values, tensors that could not be put back)."""
    if not t.sequential:
        return [], []
    seen: dict[str, Change] = {}
    for other in (t.b, t.c, t.d):
        if other is not None:
            for c in compare(t.a.start, other.start, outputs=False):
                seen.setdefault(c.name, c)
    host = [c for c in seen.values() if c.host]
    return host, [c for c in seen.values() if not c.host]


def host_moves(t: Trajectories) -> dict[str, list]:
    """Host values that change along eager run A: name -> their values, start first."""
    prints = ([t.a.start] if t.a.start is not None else []) + t.a.after
    out: dict[str, list] = {}
    for fp in prints:
        for name, s in fp.seen.items():
            if s.host and not s.output:
                out.setdefault(name, []).append(s.value)
    return {n: v for n, v in out.items() if len(set(map(repr, v))) > 1}


def spread_at(t: Trajectories, k: int) -> dict[str, Change]:  # also the soak's
    """The tensors the two eager runs disagree on after compared call k (both from one
    state)."""
    return disagreement(t.a.after[k], t.b.after[k])


def _seen(t: Trajectories, k: int, c: Change) -> Seen:
    fp: Fingerprint = t.a.after[k]
    return fp.seen.get(c.name) or t.c.after[k].seen[c.name]


def exact_only(s: Seen) -> bool:
    """Compared by its bits alone: an integer or boolean tensor, or one held as a digest."""
    v = s.value
    return (
        s.hashed or not isinstance(v, torch.Tensor) or not (v.is_floating_point() or v.is_complex())
    )


def exact_kind(s: Seen) -> str:
    return "compared by digest" if s.hashed else "an integer or boolean tensor"


TensorVerdict = Literal["bad", "unjudged", "within"]


def classify(c: Change, own: Change | None, seen: Seen) -> TensorVerdict:
    """One tensor a replay left other than the eager call did, judged: within the step's
    own spread there (`own`: what its two eager runs from one state disagree on), so no
    defect ("within"); an exact-only tensor (`seen`, exact_only) the step itself does not
    repeat, so the graph cannot be told from the step ("unjudged"); or wrong ("bad"). The
    one rule for check's runs, its soak and the interleaved check."""
    if own is None:
        return "bad"
    if exact_only(seen):
        return "unjudged"
    return "within" if within_spread(c, own) else "bad"


def within_spread(c: Change, own: Change | None) -> bool:
    return (
        own is not None
        and own.max_diff is not None
        and c.max_diff is not None
        and c.max_diff <= SLACK * own.max_diff
    )


def _freed(t: Trajectories, spreads: Sequence[dict[str, Change]]) -> list[tuple[int, Change]]:
    """(compared call's position, change) for what differs between the two replayed runs,
    at its first compared call, beyond what the step itself does not repeat."""
    first: dict[str, tuple[int, Change]] = {}
    for k in range(len(t.at)):
        for c in compare(t.c.after[k], t.d.after[k]):
            if c.host or c.name in first:
                continue
            own = spreads[k].get(c.name)
            if own is not None and (within_spread(c, own) or exact_only(_seen(t, k, c))):
                continue
            first[c.name] = (k, c)
    return sorted(first.values(), key=order)


def order(x: tuple) -> int:
    return x[0]


def _against_eager(
    t: Trajectories, spreads: Sequence[dict[str, Change]]
) -> tuple[list[tuple[int, Change]], list[tuple[int, Change]], list[tuple[int, Change, float]]]:
    """The graph (C) against the step (A), compared call by compared call (positions in
    t.at), each tensor at its first: (mismatches, ones that cannot be judged, ones within
    the measured spread)."""
    bad: dict[str, tuple[int, Change]] = {}
    unjudged: dict[str, tuple[int, Change]] = {}
    within: dict[str, tuple[int, Change, float]] = {}
    for k in range(len(t.at)):
        for c in compare(t.a.after[k], t.c.after[k]):
            if c.host or c.name in bad:
                continue
            own = spreads[k].get(c.name)
            verdict = classify(c, own, _seen(t, k, c))
            if verdict == "bad":
                bad[c.name] = (k, c)
            elif verdict == "unjudged":
                unjudged.setdefault(c.name, (k, c))
            else:
                within.setdefault(c.name, (k, c, own.max_diff))
    return (
        sorted(bad.values(), key=order),
        sorted((v for k, v in unjudged.items() if k not in bad), key=order),
        sorted((v for k, v in within.items() if k not in bad), key=order),
    )


def _replays_differ(t: Trajectories) -> bool:
    return any(
        c for k in range(len(t.at)) for c in compare(t.c.after[k], t.d.after[k]) if not c.host
    )


def _addr(fp: Fingerprint, name: str) -> int | None:
    s = fp.seen.get(name)
    return None if s is None or s.host else s.meta[0]
