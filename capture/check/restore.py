"""One start for every run of check (capture/check/trajectory.py): where the reset leaves a
watched tensor other than it was at run A's start, it is put back, in place (same
address: a graph keeps reading it), before the next run; the soak's laps start from the
same state (put_back). Host values are never put back: only the step knows them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from graph_harness.capture.state.changes import compare
from graph_harness.capture.state.fingerprint import Fingerprint, reachable


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


def put_back(step: Callable[[], object], like: Fingerprint | None, names: list[str]) -> None:
    """The watched tensors `names` back to their values in `like`, in place: the soak's
    laps start from the state the check's runs started from (restore's, by name)."""
    if not names or like is None:
        return
    live = {n: v for n, v, o in reachable(step, with_output=False)[0] if not o}
    with torch.no_grad():
        for name in names:
            was, t = like.seen.get(name), live.get(name)
            if was is None or was.hashed or was.host or not isinstance(t, torch.Tensor):
                continue
            t.copy_(was.value.to(t.device))
