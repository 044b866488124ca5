"""Check's rules, in the order their findings are shown, and the revisions made to those
findings, in the order they are made. A rule reads what the check saw (Evidence) and
returns its findings; a revision takes the findings so far and returns them revised. A
new rule is a function in a module of its own and one line here."""

from __future__ import annotations

from collections.abc import Callable

from graph_harness.capture.check.evidence import Evidence
from graph_harness.capture.check.findings import Finding, once_each
from graph_harness.capture.check.host_copies import copies_rule
from graph_harness.capture.check.host_probe import probed
from graph_harness.capture.check.judge import judged_rule
from graph_harness.capture.check.library_hosts import with_library_causes
from graph_harness.capture.check.warmups import host_reads_rule, rng_rule, warmups_rule

Rule = Callable[[Evidence], list[Finding]]
Revision = Callable[[Evidence, list[Finding]], list[Finding]]

RULES: tuple[Rule, ...] = (
    warmups_rule,  # does the step repeat, what a call changes, host values, rebinding
    host_reads_rule,  # the CPU: a counted op that reads a value back to the host
    copies_rule,  # a GPU: the graph's copies from or to host memory
    rng_rule,  # random numbers drawn along the trajectory
    judged_rule,  # the trajectories judged: what differs, from which step, and why
)
REVISIONS: tuple[Revision, ...] = (
    probed,  # host values that move, tried at later values
    with_library_causes,  # a value a library keeps: the library named
)


def findings_of(e: Evidence) -> list[Finding]:
    """Every rule's findings, in RULES' order, revised by each of REVISIONS in turn, each
    thing said once (findings.py once_each)."""
    findings = [f for rule in RULES for f in rule(e)]
    for revise in REVISIONS:
        findings = revise(e, findings)
    return once_each(findings)
