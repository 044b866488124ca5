"""The words of check's findings (capture/check/judge.py decides them): one line each,
naming the step, the tensor, the module that holds it where its name says, and the fix."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

from graph_harness.capture.check.findings import Finding, Severity
from graph_harness.capture.check.outputs import OUTPUT_POISON
from graph_harness.capture.state.changes import Change, names

if TYPE_CHECKING:
    from graph_harness.capture.check.trajectory import Trajectories
    from graph_harness.capture.export.nodes import NodeExport

SLACK = 4.0  # a nondeterministic tensor may differ by this many times its measured spread
HOST_FIX = (
    "keep it on the GPU, a tensor the step advances in place (`pos.add_(1)`), or write it "
    "into a static buffer from step.feed (docs/steps-and-check.md)"
)


# --- findings ------------------------------------------------------------------------------


def what(c: Change) -> str:
    return "output" if c.output else "state"


def values(vs: list) -> str:
    shown = ", ".join(repr(v) for v in vs[:5])
    return shown + (", ..." if len(vs) > 5 else "")


def module_of(name: str, export: NodeExport) -> str:
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


def mismatch(
    k: int,
    c: Change,
    t: Trajectories,
    export: NodeExport,
    moved: dict[str, list],
    copies: list[Finding],
    freed: bool,
) -> Finding:
    why = []
    if moved:
        why.append(f"host values change along the calls: {', '.join(list(moved)[:3])}")
    if copies:
        why.append(f"node {copies[0].node} copies host memory at every replay")
    if freed:
        why.append("the graph reads freed memory")
    i = t.at[k]  # k: the position among the calls compared
    if c.output and _holds_pattern(t, k, c):
        why.append(
            f"the graph never wrote it: after the replay it still holds {OUTPUT_POISON:#04x} in "
            "every byte, the pattern check filled it with before the call"
        )
    hint = f" ({'; '.join(why)})" if why else ""
    first = " (its first call)" if i == 0 else ""
    return Finding(
        kind="mismatch",
        severity="fail",
        message=f"{what(c)} {c.name}: after step {i}{first} the graph's replay differs from "
        f"the eager call: {c.detail}{module_of(c.name, export)}{hint}",
        tensor=c.name,
        step=i,
    )


def _holds_pattern(t: Trajectories, k: int, c: Change) -> bool:
    """The replayed run's `c` after compared call k holds the outputs' pattern in every
    byte."""
    s = t.c.after[k].seen.get(c.name) if t.c is not None else None
    if s is None or s.hashed or not isinstance(s.value, torch.Tensor) or not s.value.numel():
        return False
    raw = s.value.contiguous().view(-1).view(torch.uint8)
    return bool((raw == OUTPUT_POISON).all())


def left_unfilled(left: dict[str, str]) -> Finding:
    shown = "; ".join(f"{n} ({why})" for n, why in list(left.items())[:3])
    return Finding(
        kind="output-unfilled",
        severity="info",
        message=f"not filled before each call: {shown}; a graph that never writes it reads "
        "as a match wherever its value repeats from call to call",
        tensor=next(iter(left)),
    )


def host_fail(
    moved: dict[str, list], start_host: list[Change], first: tuple[int, Change] | None
) -> Finding:
    missed = {h.name for h in start_host}
    if moved:
        name, vs = next(iter(moved.items()))
        what = f"host value {name} changes along the calls ({values(vs)})"
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


def host_undecided(start_host: list[Change]) -> Finding:
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


def restored(names_: list[str], severity: Severity) -> Finding:
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


def host_unverified(moved: dict[str, list], start_host: list[Change]) -> Finding:
    if moved:
        name, vs = next(iter(moved.items()))
        what = f"a call changes host value {name} ({values(vs)})"
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


def reset_misses(tensors: list[Change]) -> Finding:
    return Finding(
        kind="reset",
        severity="unverified",
        message=f"the reset does not return {names(tensors)} to their start "
        f"({tensors[0].detail}), and they are too large to put back (held as digests): no "
        "two runs start alike, so the graph cannot be compared with the step; reset them in "
        "place",
        tensor=tensors[0].name,
    )


def measured(spreads: Sequence[dict[str, Change]], at: Sequence[int]) -> Finding:
    """`spreads` follow `at`, the calls compared (position k is call at[k])."""
    first: dict[str, tuple[int, Change]] = {}
    for k, s in enumerate(spreads):
        for n, c in s.items():
            first.setdefault(n, (at[k], c))
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
