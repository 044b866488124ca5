"""What the updated-executable check (capture/check/updated.py) found: its findings' words,
each update the walk made and what it cost, and the result over every size (plain data).

The findings name the size, the update that brought the executable to it, the visit, the
call, the tensor and by how much it differs; their kinds are **update** and **serving**
(fail), **refused** (info), **none-updated** (unverified), and the launch flags of
capture/check/updated_launches.py. What each means: docs/sweep.md,
"capture/check/updated_verdict.py".
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from graph_harness.capture.check.findings import Finding, SkippableStatus
from graph_harness.capture.check.messages import what
from graph_harness.capture.check.updated_launches import LaunchFlag
from graph_harness.capture.state.changes import Change, names


@dataclass(frozen=True)
class Transition:
    """One visit that switched the executable: from which size (None: instantiated for the
    walk's first), to which, the driver's answer, the node it named, and the update's host
    time (us; None where none was made)."""

    visit: int
    before: int | None
    after: int
    result: str  # "success", "instantiated", or the driver's reason for refusing
    node: str | None = None
    host_us: float | None = None

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Cost:
    """A size's update against its re-capture: nodes, the median update into it (us, and
    per node), and capturing + instantiating its graph again (us; None without a GPU)."""

    batch: int
    nodes: int
    updates: int
    update_us: float | None
    capture_us: float | None = None
    instantiate_us: float | None = None

    @property
    def per_node_us(self) -> float | None:
        return None if self.update_us is None or not self.nodes else self.update_us / self.nodes

    @property
    def recapture_us(self) -> float | None:
        if self.capture_us is None or self.instantiate_us is None:
            return None
        return self.capture_us + self.instantiate_us

    def to_dict(self) -> dict:
        return {**self.__dict__, "per_node_us": self.per_node_us,
                "recapture_us": self.recapture_us}  # fmt: skip


def costs_of(
    transitions: list[Transition], nodes: dict[int, int], recaptured: dict[int, tuple | None]
) -> list[Cost]:
    """Each size's Cost, from the updates into it that succeeded."""
    out = []
    for b, n in nodes.items():
        us = [t.host_us for t in transitions if t.after == b and t.result == "success"]
        again = recaptured.get(b) or (None, None)
        median = statistics.median(us) if us else None
        out.append(Cost(b, n, len(us), median, again[0], again[1]))
    return out


def where(t: Transition, k: int, total: int, call: int) -> str:
    """The words that place a visit: its size, the update that brought it there, the call."""
    how = (
        f"the executable instantiated from batch {t.after}'s graph"
        if t.before is None or t.result != "success"
        else f"updated from batch {t.before} to batch {t.after}"
    )
    return f"batch {t.after}, call {call} (visit {k + 1} of {total}, {how})"


def update_differs(t: Transition, k: int, total: int, call: int, bad: list[Change]) -> Finding:
    first = bad[0]
    return Finding(
        kind="update",
        severity="fail",
        message=f"{where(t, k, total, call)}: {names(bad)} "
        f"{'differs' if len(bad) == 1 else 'differ'} from batch {t.after}'s own executable "
        f"launched from the same state ({first.name}: {first.detail}): the update did not "
        f"give what instantiating batch {t.after}'s graph gives; an engine sharing one "
        "executable computes this; instantiate each size's graph instead, and report the "
        "driver and graph (the check's document has both)",
        tensor=first.name,
        step=call,
    )


def refused(t: Transition) -> Finding:
    node = f" at {t.node}" if t.node else ""
    return Finding(
        kind="refused",
        severity="info",
        message=f"the update from batch {t.before} to batch {t.after} was refused by the "
        f"driver ({t.result}{node}): an engine instantiates batch {t.after}'s graph there "
        "instead, as the check did",
    )


def none_updated(refusals: int) -> Finding:
    return Finding(
        kind="none-updated",
        severity="unverified",
        message=f"the driver refused every update ({refusals}): no updated executable ran, "
        "so none was checked; an engine instantiates each size's graph here (the refusals "
        "say why)",
    )


def random_unjudged(batch: int, drew: list[str], alone: bool) -> Finding:
    told = (
        "its own check compared torch's replays with the eager step"
        if alone
        else "check each size alone (sweep --check updated does) to compare them"
    )
    return Finding(
        kind="random",
        severity="info" if alone else "unverified",
        message=f"batch {batch}'s step draws from {', '.join(drew)}: its executables are "
        "launched without torch's replay, which advances the generator, so they are "
        f"compared with each other only, not with the eager step; {told}",
    )


def launch_flag(f: LaunchFlag, origin: int, target: int, times: int) -> Finding:
    again = f" (and at {times - 1} more update(s))" if times > 1 else ""
    words = {
        "attribute-differs": f"launch attribute {f.attribute} differs ({f.detail}): an "
        "executable's attributes cannot be read back, and an update may keep its origin's "
        "(sgl-project/sglang #37657); a fresh executable launches with the new one",
        "attribute-unreadable": f"launch attribute {f.attribute} cannot be read back "
        f"({f.detail}) where the node's function changed: an update may keep the origin's "
        "value unseen (sgl-project/sglang #37657: a hang); the outputs agreed here",
        "one-name": f"kernel {f.kernel} is another function ({f.detail}): two modules "
        "define one name, and a tool keyed on kernel names takes them for one",
        "unpaired": f"the graphs' nodes cannot be paired in the driver's order ({f.detail}): "
        "no launch attribute was compared",
    }
    node = "" if f.index is None else f"node {f.index}: "
    return Finding(
        kind=f.kind,
        severity=f.severity,
        message=f"the executable instantiated from batch {origin}'s graph, updated to batch "
        f"{target}'s: {node}{words[f.kind]}{again}",
        node=f.index,
        kernel=f.kernel or None,
    )


def unjudged_update(t: Transition, k: int, total: int, call: int, c: Change) -> Finding:
    return Finding(
        kind="unjudged",
        severity="unverified",
        message=f"{where(t, k, total, call)}: {what(c)} {c.name} differs from the size's own "
        f"executable ({c.detail}), and two launches of that one from one state already "
        "disagree there (an integer or boolean tensor, or one compared by digest)",
        tensor=c.name,
        step=call,
    )


@dataclass(frozen=True)
class UpdatedResult(SkippableStatus):
    """The updated-executable check over every size, in the shape the command line reads
    (name, warmup, steps, fed, findings, status, verdict, to_dict): the sizes in capture
    order, the seed and the walk, each switch of the executable, each size's cost and
    status. Built once, after the walk (capture/check/updated.py)."""

    name: str
    sizes: list[int]  # in capture order: largest first
    steps: int  # calls per size before a size starts again from its reset
    seed: int
    warmup: int
    fed: bool = False
    order: list[tuple[int, int]] = field(default_factory=list)  # (batch, call), as visited
    findings: list[Finding] = field(default_factory=list)
    by_size: dict[int, str] = field(default_factory=dict)
    transitions: list[Transition] = field(default_factory=list)
    costs: list[Cost] = field(default_factory=list)
    attributes: list[str] = field(default_factory=list)  # the launch attributes read
    function_changes: int = 0  # kernel nodes whose function an update that succeeded changed
    compared: int = 0  # visits compared
    tensors: int = 0  # tensor comparisons over those visits
    why_not: str | None = None  # why it did not run (the CPU)

    @classmethod
    def skipped(cls, name: str, sizes: list[int], steps: int, seed: int, warmup: int,
                why: str) -> UpdatedResult:  # fmt: skip
        return cls(name, sizes, steps, seed, warmup, by_size=dict.fromkeys(sizes, "skipped"),
                   why_not=why)  # fmt: skip

    @property
    def updates(self) -> int:
        return sum(t.result == "success" for t in self.transitions)

    def headline(self) -> str:
        return self.verdict()

    def verdict(self) -> str:
        status, who = self.status, self.name
        if status == "skipped":
            return f"updated-executable check not run for {who}: {self.why_not}"
        if status in ("failed", "unverified"):
            severity, head = {"failed": ("fail", "FAILED for")}.get(
                status, ("unverified", "could NOT verify")
            )
            first = next(f for f in self.findings if f.severity == severity)
            return f"updated-executable check {head} {who} (walk seed {self.seed}): {first.message}"
        refused = len(self.transitions) - 1 - self.updates
        return (
            f"updated-executable check passed for {who}: one executable switched between "
            f"batch {', '.join(map(str, self.sizes))} by {self.updates} updates"
            f"{f' ({refused} refused, instantiated anew)' if refused else ''} in a walk "
            f"through every transition (seed {self.seed}); every launch agreed with the "
            f"size's own executable and its eager call ({self.compared} visits, "
            f"{self.tensors} tensor comparisons)"
        )

    def to_dict(self) -> dict:
        return {
            **{k: getattr(self, k) for k in ("name", "status", "passed", "sizes", "steps")},
            **{k: getattr(self, k) for k in ("seed", "warmup", "fed", "updates", "compared")},
            "verdict": self.verdict(),
            "tensors": self.tensors,
            "function_changes": self.function_changes,
            "attributes": self.attributes,
            "order": [list(x) for x in self.order],
            "by_size": {str(b): s for b, s in self.by_size.items()},
            "transitions": [t.to_dict() for t in self.transitions],
            "costs": [c.to_dict() for c in self.costs],
            "why_not": self.why_not,
            "findings": [f.to_dict() for f in self.findings],
        }
