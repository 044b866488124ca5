"""Check's verdict on its trajectories (capture/check/trajectory.py): what differs, from
which step, and why, as findings (capture/check/findings.py).

- **Non-determinism is measured**, never inferred: the tensors two eager runs from one
  state (A and B) disagree on after call i, and by how much. A tensor they agree on bit
  for bit must agree bit for bit between the step and its graph (A and C). One they
  disagree on may differ by up to SLACK times their own difference, if it is floating
  point and held whole; an integer or boolean one, or one compared by digest, cannot be
  judged at all: the check is then not verified, never passed.
- **Two starts that differ** (a reset that misses some state) are not non-determinism.
  If only host values differ there, and the two runs' tensors differ too, the step's
  device work depends on a host value: a graph, which replays what its capture saw of
  it, cannot compute what the step computes (FAIL, the value named). If tensors differ
  at the start, no run can be compared with another: not verified.
- **Host values a call changes** that the replays diverge with are named as the cause,
  with the fix.
"""

from __future__ import annotations

import torch

from graph_harness.capture.check.findings import CheckResult, Finding
from graph_harness.capture.check.trajectory import POISONS, Trajectories
from graph_harness.capture.state.changes import Change, compare, names
from graph_harness.capture.state.fingerprint import Fingerprint, Seen

SLACK = 4.0  # a nondeterministic tensor may differ by this many times its measured spread
LISTED = 12  # mismatching tensors listed one finding each; the rest in one line
HOST_FIX = (
    "keep it on the GPU, a tensor the step advances in place (`pos.add_(1)`), or write it "
    "into a static buffer from step.feed (README: Steps with state)"
)


def judge(t: Trajectories, result: CheckResult, export, copies: list[Finding]) -> None:
    """Fill `result` (findings, counts) from the trajectories."""
    result.steps, result.compared = t.steps, t.c is not None
    last = t.a.after[-1]
    result.outputs = sum(not s.host and s.output for s in last.seen.values())
    result.state = sum(not s.host and not s.output for s in last.seen.values())
    moved = _host_moves(t)
    start_host, start_tensors = _starts(t)
    eager = [_spread(t, i) for i in range(t.steps)]  # A against B
    differ = any(eager)
    out_addrs = {s.meta[0] for s in last.seen.values() if s.output and not s.host}
    buffers = [n for n in t.restored if _addr(last, n) in out_addrs]  # the step's output
    others = [n for n in t.restored if n not in buffers]
    if others:
        result.findings.append(_restored(others, "warn"))
    if buffers:
        result.findings.append(_restored(buffers, "info"))
    if start_tensors and differ:
        result.findings.append(_reset_misses(start_tensors))
        return  # no two runs start alike: nothing can be compared with anything
    spreads = eager
    depends = False  # the step's device work depends on a host value the reset misses
    if start_host:
        spreads = [{} for _ in eager]  # not non-determinism: the starts differ
        if differ and t.c is None:
            result.findings.append(_host_unverified(moved, start_host))
            return
        if differ and _replays_differ(t):
            result.findings.append(_host_undecided(start_host))
            return
        depends = differ  # the replays repeat bit for bit: only the host value can differ
    result.nondeterministic = len({n for s in spreads for n in s})
    if result.nondeterministic:
        result.findings.append(_measured(spreads))
    if t.c is None:  # the CPU: what cannot be verified without a graph to replay
        if moved:
            result.findings.append(_host_unverified(moved, start_host))
        return
    freed = _freed(t, spreads)
    if freed:
        i, c = freed[0]
        result.findings.append(
            Finding(
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
        )
    bad, unjudged, within = _against_eager(t, spreads)
    for i, c in bad[:LISTED]:
        result.findings.append(_mismatch(i, c, t, export, moved, copies, bool(freed)))
    if len(bad) > LISTED:
        result.findings.append(
            Finding(
                kind="mismatch",
                severity="fail",
                message=f"and {len(bad) - LISTED} more tensors differ "
                f"({names([c for _, c in bad[LISTED:]])})",
            )
        )
    if depends or (bad and moved):
        result.findings.append(_host_fail(moved, start_host, bad[0] if bad else None))
    for i, c in unjudged:
        result.findings.append(
            Finding(
                kind="unjudged",
                severity="unverified",
                message=f"{_what(c)} {c.name}: after step {i} the graph's replay differs from "
                f"the eager call ({c.detail}), and two eager runs from one state already "
                f"disagree there ({_exact_kind(_seen(t, i, c))}): the step itself cannot be "
                "told from its graph here",
                tensor=c.name,
                step=i,
            )
        )
    for i, c, own in within:
        result.findings.append(
            Finding(
                kind="nondeterministic",
                severity="info",
                message=f"{_what(c)} {c.name}: after step {i} graph and eager call differ by "
                f"up to {c.max_diff:.3g}, within {SLACK:g} times what two eager runs from one "
                f"state differ by there ({own:.3g})",
                tensor=c.name,
                step=i,
            )
        )


# --- what the runs show ------------------------------------------------------------------


def _starts(t: Trajectories) -> tuple[list[Change], list[Change]]:
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


def _host_moves(t: Trajectories) -> dict[str, list]:
    """Host values that change along eager run A: name -> their values, start first."""
    prints = ([t.a.start] if t.a.start is not None else []) + t.a.after
    out: dict[str, list] = {}
    for fp in prints:
        for name, s in fp.seen.items():
            if s.host and not s.output:
                out.setdefault(name, []).append(s.value)
    return {n: v for n, v in out.items() if len(set(map(repr, v))) > 1}


def _spread(t: Trajectories, i: int) -> dict[str, Change]:
    """The tensors the two eager runs disagree on after call i (both from one state)."""
    return {c.name: c for c in compare(t.a.after[i], t.b.after[i]) if not c.host}


def _seen(t: Trajectories, i: int, c: Change) -> Seen:
    fp: Fingerprint = t.a.after[i]
    return fp.seen.get(c.name) or t.c.after[i].seen[c.name]


def _exact_only(s: Seen) -> bool:
    """Compared by its bits alone: an integer or boolean tensor, or one held as a digest."""
    v = s.value
    return (
        s.hashed or not isinstance(v, torch.Tensor) or not (v.is_floating_point() or v.is_complex())
    )


def _exact_kind(s: Seen) -> str:
    return "compared by digest" if s.hashed else "an integer or boolean tensor"


def _within(c: Change, own: Change | None) -> bool:
    return (
        own is not None
        and own.max_diff is not None
        and c.max_diff is not None
        and c.max_diff <= SLACK * own.max_diff
    )


def _freed(t: Trajectories, spreads) -> list[tuple[int, Change]]:
    """(step, change) for what differs between the two replayed runs, at its first step,
    beyond what the step itself does not repeat."""
    first: dict[str, tuple[int, Change]] = {}
    for i in range(t.steps):
        for c in compare(t.c.after[i], t.d.after[i]):
            if c.host or c.name in first:
                continue
            own = spreads[i].get(c.name)
            if own is not None and (_within(c, own) or _exact_only(_seen(t, i, c))):
                continue
            first[c.name] = (i, c)
    return sorted(first.values(), key=order)


def order(x: tuple) -> int:
    return x[0]


def _against_eager(t: Trajectories, spreads):
    """The graph (C) against the step (A), call by call, each tensor at its first step:
    (mismatches, ones that cannot be judged, ones within the measured spread)."""
    bad: dict[str, tuple[int, Change]] = {}
    unjudged: dict[str, tuple[int, Change]] = {}
    within: dict[str, tuple[int, Change, float]] = {}
    for i in range(t.steps):
        for c in compare(t.a.after[i], t.c.after[i]):
            if c.host or c.name in bad:
                continue
            own = spreads[i].get(c.name)
            if own is None:
                bad[c.name] = (i, c)
            elif _exact_only(_seen(t, i, c)):
                unjudged.setdefault(c.name, (i, c))
            elif _within(c, own):
                within.setdefault(c.name, (i, c, own.max_diff))
            else:
                bad[c.name] = (i, c)
    return (
        sorted(bad.values(), key=order),
        sorted((v for k, v in unjudged.items() if k not in bad), key=order),
        sorted((v for k, v in within.items() if k not in bad), key=order),
    )


# --- findings ------------------------------------------------------------------------------


def _what(c: Change) -> str:
    return "output" if c.output else "state"


def _values(vs: list) -> str:
    shown = ", ".join(repr(v) for v in vs[:5])
    return shown + (", ..." if len(vs) > 5 else "")


def _module_of(name: str, export) -> str:
    """Where a tensor named `module parameter|buffer|attribute PATH` lives: its module and
    the nodes the export attributes to it; "" for any other tensor."""
    for kind in ("module parameter ", "module buffer ", "module attribute "):
        if name.startswith(kind):
            module = name[len(kind) :].rpartition(".")[0]
            break
    else:
        return ""
    if not module:
        return ""
    nodes = [
        n["index"]
        for n in export.nodes
        if n.get("scope") == module or str(n.get("scope", "")).startswith(module + ".")
    ]
    if not nodes:
        return f"; it belongs to module {module}"
    shown = ", ".join(map(str, nodes[:6])) + (", ..." if len(nodes) > 6 else "")
    return f"; it belongs to module {module} (its nodes: {shown})"


def _mismatch(i, c: Change, t, export, moved, copies, freed: bool) -> Finding:
    why = []
    if moved:
        why.append(f"host values change along the calls: {', '.join(list(moved)[:3])}")
    if copies:
        why.append(f"node {copies[0].node} copies host memory at every replay")
    if freed:
        why.append("the graph reads freed memory")
    hint = f" ({'; '.join(why)})" if why else ""
    first = " (its first call)" if i == 0 else ""
    return Finding(
        kind="mismatch",
        severity="fail",
        message=f"{_what(c)} {c.name}: after step {i}{first} the graph's replay differs from "
        f"the eager call: {c.detail}{_module_of(c.name, export)}{hint}",
        tensor=c.name,
        step=i,
    )


def _replays_differ(t: Trajectories) -> bool:
    return any(c for i in range(t.steps) for c in compare(t.c.after[i], t.d.after[i]) if not c.host)


def _host_fail(moved: dict, start_host: list[Change], first) -> Finding:
    missed = {h.name for h in start_host}
    if moved:
        name, vs = next(iter(moved.items()))
        what = f"host value {name} changes along the calls ({_values(vs)})"
        if name in missed:
            what += " and is not returned to its start by the reset"
    else:
        name = start_host[0].name
        detail = start_host[0].detail
        what = f"host value {name} is not returned to its start by the reset ({detail})"
    missed = [n for n in missed if n != name]
    also = f", and the reset does not return {', '.join(missed[:3])} to its start" if missed else ""
    if first is not None:
        i, c = first
        seen = f"the replays diverge from the eager calls from step {i} on ({c.name})"
    else:  # the eager runs tell it: one device state, two host values, two results
        i, seen = None, "two eager runs from one device state differ with it"
    return Finding(
        kind="host-state",
        severity="fail",
        message=f"{what}{also}; the step's device work depends on it ({seen}), and a graph "
        f"replays what its capture saw of it; {HOST_FIX}",
        tensor=name,
        step=i,
    )


def _host_undecided(start_host: list[Change]) -> Finding:
    h = start_host[0]
    return Finding(
        kind="host-state",
        severity="unverified",
        message=f"the reset does not return host value {h.name} to its start ({h.detail}), "
        "the two eager runs differ, and so do two replays from one state: whether that is "
        "the host value or kernels that are not deterministic cannot be told; reset it too, "
        f"or {HOST_FIX}",
        tensor=h.name,
    )


def _addr(fp: Fingerprint, name: str):
    s = fp.seen.get(name)
    return None if s is None or s.host else s.meta[0]


def _restored(names_: list[str], severity: str) -> Finding:
    shown = ", ".join(names_[:3]) + (f" and {len(names_) - 3} more" if len(names_) > 3 else "")
    what = " (the buffer the step returns its output in)" if severity == "info" else ""
    return Finding(
        kind="reset",
        severity=severity,
        message=f"the reset does not return {shown}{what} to its start: check put it back (its "
        "values at its first run's start) so that every run starts from one state; a graph "
        "replayed from your reset alone starts from other values there",
        tensor=names_[0],
    )


def _host_unverified(moved: dict, start_host: list[Change]) -> Finding:
    if moved:
        name, vs = next(iter(moved.items()))
        what = f"a call changes host value {name} ({_values(vs)})"
    else:
        what = f"the reset does not return host value {start_host[0].name} to its start"
    return Finding(
        kind="host-state",
        severity="unverified",
        message=f"{what}, and on a GPU a graph replays what its capture saw of it; whether "
        "the step's device work depends on it only replays can show, and there is no graph "
        f"to replay here: run check on a CUDA machine, or {HOST_FIX}",
        tensor=name if moved else start_host[0].name,
    )


def _reset_misses(tensors: list[Change]) -> Finding:
    return Finding(
        kind="reset",
        severity="unverified",
        message=f"the reset does not return {names(tensors)} to their start "
        f"({tensors[0].detail}), and they are too large to put back (held as digests): no "
        "two runs start alike, so the graph cannot be compared with the step; reset them in "
        "place",
        tensor=tensors[0].name,
    )


def _measured(spreads) -> Finding:
    first: dict[str, tuple[int, Change]] = {}
    for i, s in enumerate(spreads):
        for n, c in s.items():
            first.setdefault(n, (i, c))
    worst = max((c.max_diff for _, c in first.values() if c.max_diff is not None), default=None)
    by = f", by up to {worst:.3g}" if worst is not None else ""
    i0 = min(i for i, _ in first.values())
    return Finding(
        kind="nondeterministic",
        severity="info",
        message=f"not deterministic, measured: two eager runs from one state with the same "
        f"inputs disagree on {names([c for _, c in first.values()])} (first after step {i0}"
        f"{by}); the graph is held to that spread there, and bit for bit everywhere else",
    )
