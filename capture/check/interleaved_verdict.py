"""What the interleaved check (capture/check/interleaved.py) found: one replayed call judged
against its eager reference, and the result over every size (plain data, and comparisons
of fingerprints held on the host: no device).

A call is judged as capture/check/judge.py judges a call of its trajectory; host values
are not judged here (the size's own check does). The verdict names the size whose replay
differs and the sizes that ran since its previous call. In full: docs/sweep.md,
"capture/check/interleaved_verdict.py".
"""

from __future__ import annotations

from dataclasses import dataclass, field

from graph_harness.capture.check.findings import Finding, SkippableStatus
from graph_harness.capture.check.judge import classify
from graph_harness.capture.check.messages import SLACK, what
from graph_harness.capture.state.changes import Change, compare, names
from graph_harness.capture.state.fingerprint import Fingerprint


@dataclass
class Judged:
    """One replayed call against its eager reference: tensors that differ beyond what the
    step itself does not repeat (`bad`), ones that cannot be judged (`unjudged`), and
    ones within SLACK times the measured spread (`within`: the change and that spread)."""

    bad: list[Change] = field(default_factory=list)
    unjudged: list[Change] = field(default_factory=list)
    within: list[tuple[Change, float]] = field(default_factory=list)
    compared: int = 0  # tensors compared


def judge_call(reference: Fingerprint, own: dict[str, Change], replayed: Fingerprint) -> Judged:
    """The replay's fingerprint against the eager call's (`reference`), `own` being what the
    two eager runs disagree on there (capture/state/changes.py: `disagreement`)."""
    out = Judged(compared=reference.tensors())
    for c in compare(reference, replayed):
        if c.host:
            continue
        mine = own.get(c.name)
        verdict = classify(c, mine, reference.seen.get(c.name) or replayed.seen[c.name])
        if verdict == "bad":
            out.bad.append(c)
        elif verdict == "unjudged":
            out.unjudged.append(c)
        else:
            out.within.append((c, mine.max_diff))
    return out


def suspects(order: list[tuple[int, int]], k: int, captured: list[int]) -> tuple[list[int], str]:
    """Who may have overwritten what the size of `order[k]` reads: the other sizes that ran
    since its previous call, the last first, and how they ran ("replayed since its previous
    call"); before any other ran, the size captured after it in the shared pool (the one
    before it, for the last captured), "captured after it" ("before it")."""
    size = order[k][0]
    since: list[int] = []
    for b, _ in reversed(order[:k]):
        if b == size:
            break
        if b not in since:
            since.append(b)
    if since:
        return since, "replayed since its previous call"
    at = captured.index(size)
    if at + 1 < len(captured):
        return [captured[at + 1]], "captured after it into the shared pool"
    if at:
        return [captured[at - 1]], "captured before it into the shared pool"
    return [], "no other size"


def mismatch(
    size: int,
    call: int,
    k: int,
    total: int,
    bad: list[Change],
    others: list[int],
    how: str,
    *,
    place: str | None = None,
) -> Finding:
    """A replay that differs from its eager call: both sizes, the call and the tensors (the
    first with how it differs). `place`: the words that place the replay, where they are
    not its place in the serving order (the updated-executable check's walk)."""
    differ = f"{names(bad)} {'differs' if len(bad) == 1 else 'differ'}"
    place = place or f"batch {size}, call {call} (replay {k + 1} of {total} in the serving order)"
    first = bad[0]
    if others:
        before = f"; before it batch {', '.join(map(str, others[1:]))}" if others[1:] else ""
        who = f"after batch {others[0]} ({how}{before})"
        cause = (
            f"batch {others[0]}'s capture or replays wrote memory that batch {size}'s graph "
            f"reads: a buffer or workspace of batch {size} freed or re-allocated while its "
            "graph still uses it, or state the two sizes share; keep each size's buffers "
            "alive, and apart, for as long as its graph"
        )
    else:
        who = "with no other size captured"
        cause = "no other size ran: the size's own check says more"
    return Finding(
        kind="interleaved",
        severity="fail",
        message=f"{place}: {differ} from batch {size}'s eager call ({first.name}: "
        f"{first.detail}), {who}; {cause}",
        tensor=first.name,
        step=call,
    )


def unjudged(size: int, call: int, c: Change) -> Finding:
    return Finding(
        kind="unjudged",
        severity="unverified",
        message=f"batch {size}, call {call}: {what(c)} {c.name} differs from the eager call "
        f"({c.detail}), and two eager runs of batch {size} from one state already disagree "
        "there (an integer or boolean tensor, or one compared by digest): the graph cannot "
        "be told from the step here",
        tensor=c.name,
        step=call,
    )


def within(size: int, call: int, c: Change, own: float) -> Finding:
    return Finding(
        kind="nondeterministic",
        severity="info",
        message=f"batch {size}, call {call}: {what(c)} {c.name}: graph and eager call differ "
        f"by up to {c.max_diff:.3g}, within {SLACK:g} times what two eager runs from one "
        f"state differ by there ({own:.3g})",
        tensor=c.name,
        step=call,
    )


@dataclass(frozen=True)
class InterleavedResult(SkippableStatus):
    """The interleaved check over every size: the shape of check's CheckResult where the
    command line reads one (name, warmup, steps, fed, findings, status, verdict, to_dict),
    with what is its own: the sizes in capture order, the seed and the serving order, the
    replays and comparisons made, and each size's status. Complete when made, and frozen
    (capture/check/interleaved.py builds it once, after the turns)."""

    name: str
    sizes: list[int]  # in capture order: largest first
    steps: int  # calls per size
    seed: int
    warmup: int
    fed: bool = False  # a size's step.feed wrote each call's inputs
    order: list[tuple[int, int]] = field(default_factory=list)  # (batch, call), as replayed
    findings: list[Finding] = field(default_factory=list)
    by_size: dict[int, str] = field(default_factory=dict)  # batch -> status
    replays: int = 0
    compared: int = 0  # calls compared (a size's calls after its first mismatch are not)
    tensors: int = 0  # tensor comparisons over those calls
    why_not: str | None = None  # why it did not run (the CPU)

    @classmethod
    def skipped(
        cls, name: str, sizes: list[int], steps: int, seed: int, warmup: int, why: str
    ) -> InterleavedResult:
        skipped = dict.fromkeys(sizes, "skipped")
        return cls(name, sizes, steps, seed, warmup, by_size=skipped, why_not=why)

    def headline(self) -> str:
        """The verdict in one line (its findings name the sizes and tensors once)."""
        return self.verdict()

    def verdict(self) -> str:
        status = self.status
        if status == "skipped":
            return f"interleaved check not run for {self.name}: {self.why_not}"
        if status == "failed":
            bad = [f for f in self.findings if f.severity == "fail"]
            sizes = ", ".join(str(b) for b, s in self.by_size.items() if s == "failed")
            return (
                f"interleaved check FAILED for {self.name} (failed: batch {sizes}; order seed "
                f"{self.seed}): {len(bad)} finding(s) fail; first: {bad[0].message}"
            )
        if status == "unverified":
            why = [f.message for f in self.findings if f.severity == "unverified"]
            return f"interleaved check could NOT verify {self.name}: {why[0]}"
        return (
            f"interleaved check passed for {self.name}: batch "
            f"{', '.join(map(str, self.sizes))} captured largest first into one pool, then "
            f"{self.replays} replays in a serving order shuffled with seed {self.seed}, "
            f"{self.steps} calls per size from its start; every replay agreed with its "
            f"size's eager call ({self.compared} calls, {self.tensors} tensor comparisons)"
        )

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "status": self.status,
            "passed": self.passed,
            "verdict": self.verdict(),
            "sizes": self.sizes,
            "steps": self.steps,
            "seed": self.seed,
            "warmup": self.warmup,
            "fed": self.fed,
            "order": [list(x) for x in self.order],
            "replays": self.replays,
            "compared": self.compared,
            "tensors": self.tensors,
            "by_size": {str(b): s for b, s in self.by_size.items()},
            "why_not": self.why_not,
            "findings": [f.to_dict() for f in self.findings],
        }
