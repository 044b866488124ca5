"""`check`: does the captured graph compute what the step computes?

From one starting state (after `step.reset`; for a step that repeats without one, the
state its warm-ups settled in), the step runs once eagerly and its graph replays twice,
the default generators set to one state before each, and the outputs and the state the
step reaches (capture/state/fingerprint.py) are compared bit for bit. The two replays run with
the allocator's free memory filled with two patterns (capture/check/poison.py): where they
disagree, the graph reads memory freed after capture. Where the step is not deterministic
(two warm-ups from its reset differ), a tensor that varied there is judged by its largest
difference instead of its bits, and said so.

Also reported, each naming the node (index, kernel, scope) where there is one: the warm-up
count and whether the step repeats, what state one call changes, host values it changes
(a graph replays what its capture saw of them), copies between host and device memory in
the graph (their host side is read or written at every replay, whatever it holds then),
and random numbers drawn (torch registers its generator with a graph, so each replay
draws anew, as an eager call would).

On the CPU there is no graph: the warm-ups' findings only, and the replay comparison said
to need a GPU. The step runs `warmup` + 1 times to be captured, plus once eagerly on a GPU.
"""

from __future__ import annotations

from graph_harness.capture.check.findings import CheckFailed, CheckResult, Finding
from graph_harness.capture.check.host_copies import host_copies
from graph_harness.capture.check.poison import poisoned
from graph_harness.capture.count import capture_and_keep
from graph_harness.capture.graph.settings import StepSettings
from graph_harness.capture.replay.guard import Replayer, sync
from graph_harness.capture.state.changes import Change, compare, names
from graph_harness.capture.state.fingerprint import fingerprint
from graph_harness.capture.state.steps import (
    Repeatability,
    StateWatch,
    require_repeatable,
    reset_of,
    rng_moved,
    rng_state,
    set_rng_state,
)
from graph_harness.capture.text import printable

POISONS = (0xFF, 0x3C)  # two fillings of free memory, differing in every byte
SLACK = 4.0  # a nondeterministic tensor may differ by this many times its warm-ups' spread
NO_GPU = (
    "the replay comparison needs a GPU (a CUDA graph to replay): run check on a CUDA "
    "machine; here, only what the warm-ups show"
)
__all__ = ["CheckFailed", "CheckResult", "Finding", "check_captured", "check_step", "gate"]


def check_step(
    step,
    *,
    warmup: int = StepSettings.warmup,
    module=None,
    depth: int | None = None,
    device=None,
    name: str = "the step",
) -> CheckResult:
    """Capture `step` (`warmup` warm-ups; with `module`, by its modules as
    `module_scopes(module, depth)` does) and check its graph (check_captured)."""
    watch = StateWatch(step)
    export, captured = capture_and_keep(
        step, warmup=warmup, device=device, watch=watch, module=module, depth=depth
    )
    return check_captured(step, export, captured, watch.repeatability, name=name)


def check_captured(step, export, captured, rep: Repeatability, *, name="the step") -> CheckResult:
    """Check a graph already captured from `step` (capture_and_keep with a StateWatch,
    whose `repeatability` is `rep`); `captured` None (the CPU): the warm-ups' findings.
    StepStateError before anything runs if the step cannot be replayed (no reset, and it
    does not repeat). Syncs."""
    name = printable(name)  # shown and recorded (check.json) as text: capture/text.py
    require_repeatable(rep, name)
    result = CheckResult(name, rep.warmups, rep, from_warmups(rep))
    if captured is None:
        result.why_not = NO_GPU
        return result
    copies = host_copies(captured.graph, export)
    result.findings += copies
    _compare(step, captured, rep, result, copies)
    return result


def from_warmups(rep: Repeatability) -> list[Finding]:
    out = [
        Finding(
            "repeatability",
            "warn" if rep.repeatable is None else "info",
            f"whether the step repeats is {rep.summary()}"
            if rep.repeatable is None
            else f"the step {rep.summary()}",
        )
    ]
    if rep.nondeterministic:
        out.append(Finding("nondeterministic", "info", _spread(rep.changed)))
    state = [c for c in rep.in_a_call if not c.host]
    if state:
        out.append(Finding("state", "info", f"one call changes {names(state)}"))
    host = [c for c in rep.in_a_call if c.host]
    if host:
        out.append(Finding("host-state", "warn", _host_line(host)))
    if rep.rebound:
        out.append(
            Finding(
                "rebound",
                "warn",
                f"a call rebinds {', '.join(rep.rebound[:3])} to new tensors; a graph keeps "
                "reading the ones its capture saw",
            )
        )
    if rep.replaced_by_reset:
        out.append(
            Finding(
                "reset",
                "warn",
                f"the reset rebinds {', '.join(rep.replaced_by_reset[:3])} to new tensors; "
                "a graph keeps reading the ones it captured: reset them in place",
            )
        )
    if rep.rng:
        out.append(Finding("rng", "info", _rng_line(rep.rng)))
    if rep.truncated:
        out.append(Finding("walk", "info", "the walk over the step's state stopped at a bound"))
    return out


def _spread(changed) -> str:
    worst = max((c.max_diff for c in changed if c.max_diff is not None), default=None)
    by = f" by up to {worst:.3g}" if worst is not None else ""
    return (
        f"not deterministic: two warm-ups from its reset state differ{by} ({names(list(changed))});"
        " those tensors are judged by their largest difference, not bit for bit"
    )


def _host_line(host: list[Change]) -> str:
    shown = "; ".join(f"{c.name}: {c.detail}" for c in host[:3])
    return (
        f"a call changes host values ({shown}): a graph replays what its capture saw of "
        "them and never reads them again"
    )


def _rng_line(drawn) -> str:
    return (
        f"the step draws random numbers ({'; '.join(drawn)}); torch registers the generator "
        "with a graph, so each replay draws anew as an eager call would; check runs its "
        "eager call and replays from one generator state"
    )


def _compare(step, captured, rep, result: CheckResult, copies) -> None:
    reset = reset_of(step)
    if reset is not None:
        reset()
    rng0 = rng_state()
    before = fingerprint(step, with_output=False, clone_to="cpu")
    out = step()
    sync()
    drawn = rng_moved(rng0, rng_state())
    eager = fingerprint(step, out, clone_to="cpu")
    del out
    r = Replayer(captured.graph, result.name, reset=reset, repeatability=rep)
    replays = []
    for pattern in POISONS:
        with r.window(f"check's replay with free memory filled with {pattern:#04x}"):
            set_rng_state(rng0)
            with poisoned(pattern) as p:
                r.replay()
                sync()
                replays.append(fingerprint(step, captured.output, clone_to="cpu"))
        result.poisoned.append(p.to_dict())
    r.finish()
    result.compared = True
    result.outputs = sum(not s.host and s.output for s in eager.seen.values())
    result.state = sum(not s.host and not s.output for s in eager.seen.values())
    if drawn and not rep.rng:
        result.findings.append(Finding("rng", "info", _rng_line(drawn)))
    spread = {c.name: c.max_diff for c in rep.changed} if rep.nondeterministic else {}
    # host values: a graph never runs host code, so only the eager call moves them
    freed = [c for c in compare(replays[0], replays[1]) if not c.host and not _within(c, spread)]
    if freed:
        result.findings.append(
            Finding(
                "freed-memory",
                "fail",
                f"the graph reads memory freed after its capture: {names(freed)} differ "
                f"between two replays from one state, with free memory filled with "
                f"{POISONS[0]:#04x} then {POISONS[1]:#04x}; keep every tensor the step "
                "uses alive for as long as its graph",
                tensor=freed[0].name,
            )
        )
    host = [c for c in compare(before, eager, outputs=False) if c.host]
    for c in compare(eager, replays[0]):
        if c.host:
            continue
        result.findings.append(_mismatch(c, spread, host, copies, bool(freed)))


def _within(c: Change, spread: dict) -> bool:
    """A difference no larger than SLACK times what the step's own warm-ups showed."""
    own = spread.get(c.name)
    return own is not None and c.max_diff is not None and c.max_diff <= SLACK * own


def _mismatch(c: Change, spread: dict, host: list[Change], copies, freed: bool) -> Finding:
    what = "output" if c.output else "state"
    own = spread.get(c.name)
    if _within(c, spread):
        return Finding(
            "nondeterministic",
            "info",
            f"{what} {c.name}: graph and eager call differ by up to {c.max_diff:.3g}, "
            f"within the step's own spread ({own:.3g} between warm-ups)",
            tensor=c.name,
        )
    if c.name in spread and (own is None or c.max_diff is None):  # varied, and not measured
        return Finding(
            "nondeterministic",
            "warn",
            f"{what} {c.name}: graph and eager call differ ({c.detail}); the step's own "
            "warm-ups differ there too, so this is not judged bit for bit",
            tensor=c.name,
        )
    why = []
    if host:
        why.append(_host_line(host))
    if copies:
        why.append(f"node {copies[0].node} copies host memory at every replay")
    if freed:
        why.append("the graph reads freed memory")
    hint = f" ({'; '.join(why)})" if why else ""
    return Finding(
        "mismatch",
        "fail",
        f"{what} {c.name}: the graph's replay differs from the eager call: {c.detail}{hint}",
        tensor=c.name,
    )


def gate(results: dict[str, CheckResult]) -> None:
    """`--check` on count and profile: CheckFailed if any check failed."""
    bad = [r for r in results.values() if not r.passed]
    if bad:
        raise CheckFailed(f"{bad[0].verdict()}; nothing was written")
