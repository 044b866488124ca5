"""What check finds before any replay: from the warm-ups (does the step repeat, what a
call changes, host values, rebinding, random numbers) and, on the CPU, from the counted
operations (a value read back to the host). capture/check/step.py adds them to its
result before the trajectories run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from graph_harness.capture.check.findings import Finding
from graph_harness.capture.check.library_hosts import accepted
from graph_harness.capture.graph.diagnose.classes import HOST_READ_OPS
from graph_harness.capture.state.changes import Change, names
from graph_harness.capture.state.steps import Repeatability

if TYPE_CHECKING:
    from graph_harness.capture.check.evidence import Evidence
    from graph_harness.capture.export.nodes import NodeExport


def warmups_rule(e: Evidence) -> list[Finding]:
    """Check's rule (capture/check/rules.py) of what the warm-ups show."""
    return from_warmups(e.rep, e.accept)


def host_reads_rule(e: Evidence) -> list[Finding]:
    """Check's rule of the counted operations that read back to the host: the CPU only."""
    return host_reads(e.export) if e.captured is None else []


def rng_rule(e: Evidence) -> list[Finding]:
    """Check's rule of random numbers the trajectory drew where the warm-ups saw none."""
    if e.t.drawn and not e.rep.rng:
        return [Finding(kind="rng", severity="info", message=rng_line(e.t.drawn))]
    return []


def host_reads(export: NodeExport) -> list[Finding]:
    """On the CPU: each counted op that reads a value back to the host or makes a
    data-dependent shape; on a GPU it breaks the capture (capture/graph/diagnose/failure.py)."""
    out = []
    for n in export.nodes:
        op = str(n.get("kernel") or "").rsplit(".", 1)[0]
        if op in HOST_READ_OPS:
            out.append(
                Finding(
                    kind="host-read",
                    severity="unverified",
                    message=f"CPU dispatch {n['index']} ({n['kernel']}, in "
                    f"{n.get('scope')}) reads a value back to the host or makes a "
                    "data-dependent shape: on a GPU its capture fails there (keep the value "
                    "on the GPU, or move the read before the step)",
                    node=n["index"],
                    kernel=n.get("kernel"),
                    scope=n.get("scope"),
                )
            )
    return out


def from_warmups(rep: Repeatability, accept: Mapping[str, str] | None = None) -> list[Finding]:
    out = [
        Finding(
            kind="repeatability",
            severity="warn" if rep.repeatable is None else "info",
            message=f"whether the step repeats is {rep.summary()}"
            if rep.repeatable is None
            else f"the step {rep.summary()}",
        )
    ]
    if rep.nondeterministic:  # measured by the trajectory's two eager runs, not inferred here
        out.append(
            Finding(
                kind="repeatability",
                severity="info",
                message=f"two warm-ups from its reset differ ({names(list(rep.changed))}): "
                "kernels that are not deterministic, or a reset that misses some state; the "
                "trajectory's two eager runs tell which",
            )
        )
    state = [c for c in rep.in_a_call if not c.host]
    if state:
        changes = f"one call changes {names(state)}"
        out.append(Finding(kind="state", severity="info", message=changes))
    host = [c for c in rep.in_a_call if c.host and not (accept and accepted(c.name, accept))]
    if host:
        line = _host_line(host)
        out.append(Finding(kind="host-state", severity="warn", message=line, tensor=host[0].name))
    if rep.rebound:
        out.append(
            Finding(
                kind="rebound",
                severity="warn",
                message=f"a call rebinds {', '.join(rep.rebound[:3])} to new tensors; a graph "
                "keeps reading the ones its capture saw",
            )
        )
    if rep.replaced_by_reset:
        out.append(
            Finding(
                kind="reset",
                severity="warn",
                message=f"the reset rebinds {', '.join(rep.replaced_by_reset[:3])} to new tensors; "
                "a graph keeps reading the ones it captured: reset them in place",
            )
        )
    if rep.rng:
        out.append(Finding(kind="rng", severity="info", message=rng_line(rep.rng)))
    if rep.truncated:
        bound = "the walk over the step's state stopped at a bound"
        out.append(Finding(kind="walk", severity="info", message=bound))
    return out


def _host_line(host: list[Change]) -> str:
    shown = "; ".join(f"{c.name}: {c.detail}" for c in host[:3])
    return (
        f"a call changes host values ({shown}): a graph replays what its capture saw of "
        "them and never reads them again"
    )


def rng_line(drawn: Sequence[str]) -> str:
    return (
        f"the step draws random numbers ({'; '.join(drawn)}); torch registers the generator "
        "with a graph, so each replay draws anew as an eager call would; check runs its "
        "eager call and replays from one generator state"
    )
