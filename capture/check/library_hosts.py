"""Host values that libraries keep, and those a step accepts: what check says when a host value
that moves is not the user's own, and how a user marks one they judged harmless.

- **A library's counter**: the object holding the value is a known library class
  (KNOWN): the finding names the library's counter and what a user can do.
- **`step.accept_host`**: names (or fnmatch patterns) of host values judged harmless; an
  accepted value that moves is a warning, never a plain pass.
In full: docs/steps-and-check.md, "capture/check/library_hosts.py".
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from graph_harness.capture.check.findings import Finding
from graph_harness.capture.state.steps import StepStateError
from graph_harness.capture.text import a_type

if TYPE_CHECKING:
    from graph_harness.capture.check.evidence import Evidence


@dataclass(frozen=True)
class LibraryHost:
    """A host value a library keeps: its class (by qualified name, matched anywhere in the
    holder's MRO), the attribute, what it is, and what a user can do."""

    cls: str
    attr: str
    what: str
    can_do: str


KNOWN = (
    LibraryHost(
        cls="transformers.cache_utils.StaticSlidingWindowLayer",
        attr="cumulative_length_int",
        what="transformers' sliding-window cache layer (StaticSlidingWindowLayer: Gemma2, "
        "Gemma3, Mistral, Qwen2 with max_window_layers) counts the tokens it took in this "
        "Python int and picks its update from it: it writes at the position until the "
        "window is full, then rolls the window (Gemma3 also takes positions from it); a "
        "graph replays the path its capture saw, and no step.feed can move the counter",
        can_do="check no further than the window (--steps N, with the start position plus "
        "N at most the sliding window: until it fills, the layer writes where a full static "
        "layer would); or capture one graph per phase; or use a cache that keeps its "
        "window on the device; if you judged it harmless for your step, name it in "
        "step.accept_host (shown as accepted, never as a plain pass); docs/huggingface.md, "
        '"Sliding-window caches"',
    ),
)


def _qualnames(cls: type) -> set[str]:
    return {f"{c.__module__}.{c.__qualname__}" for c in getattr(cls, "__mro__", (cls,))}


def library_host(name: str, owner: type | None) -> LibraryHost | None:
    """The known library value a host value named `name`, held by an `owner`, is; or None."""
    if owner is None:
        return None
    attr = name.rsplit(".", 1)[-1]
    mro = _qualnames(owner)
    return next((k for k in KNOWN if k.attr == attr and k.cls in mro), None)


def library_cause(names: Iterable[str], owners: Mapping[str, type]) -> str:
    """`; it is LIBRARY's ...: what you can do` for the first known value among `names`,
    else ""."""
    for n in names:
        k = library_host(n, owners.get(n))
        if k is not None:
            return f". It is not your step's own: {k.what}. What you can do: {k.can_do}"
    return ""


def accepted_of(step: Callable[[], object]) -> dict[str, str]:
    """`step.accept_host` as {pattern: reason} (module docstring); {} where there is none.
    StepStateError if it is neither a mapping of names to reasons nor a sequence of names."""
    v = getattr(step, "accept_host", None)
    if v is None:
        return {}
    if isinstance(v, Mapping):
        out = dict(v)
    elif isinstance(v, Iterable) and not isinstance(v, str | bytes):
        out = {n: "" for n in v}
    else:
        out = None
    if out is None or not all(isinstance(k, str) and isinstance(r, str) for k, r in out.items()):
        raise StepStateError(
            f"step.accept_host is {a_type(v)}: set it to a dict of host value names (or "
            "fnmatch patterns, as check names them) to the reason each is harmless, or a "
            "list of names (docs/steps-and-check.md)"
        )
    return out


def accepted(name: str, accept: Mapping[str, str]) -> str | None:
    """The reason `name` is accepted (\"\" if none given), or None if it is not."""
    for pattern, why in accept.items():
        if name == pattern or fnmatch.fnmatchcase(name, pattern):
            return why
    return None


def accepted_finding(names: list[str], accept: Mapping[str, str]) -> Finding:
    reasons = sorted({accepted(n, accept) or "" for n in names} - {""})
    why = f" ({'; '.join(reasons)})" if reasons else ""
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return Finding(
        kind="host-accepted",
        severity="warn",
        message=f"host value {shown} changes along the calls and the step accepts it as "
        f"harmless (step.accept_host{why}): check did not verify that; a graph replays "
        "what its capture saw of it",
        tensor=names[0],
    )


def with_library_causes(e: Evidence, findings: list[Finding]) -> list[Finding]:
    """Check's revision (capture/check/rules.py): host-value findings about a value a
    library keeps, with the library named as the cause and what a user can do."""
    host = [f for f in findings if f.kind == "host-state" and f.tensor]
    if not host:
        return findings
    from graph_harness.capture.state.fingerprint import host_owners  # torch: here only

    owners = host_owners(e.step)
    out = []
    for f in findings:
        cause = library_cause([f.tensor], owners) if f in host else ""
        out.append(replace(f, message=f.message + cause) if cause else f)
    return out
