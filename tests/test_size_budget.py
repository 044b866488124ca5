"""A size budget that only goes down (issue 61): no module of the library over 350 lines,
no function over 60 lines or of McCabe complexity above 10, no docstring over 10 lines (a
package's __init__ excepted: its table of contents), except those named in
tests/size_budget.json, each at no more than its size there. The file only shrinks: a new
offender or one that grew fails, and so does an entry that is larger than what it names
(lower it) or names what is no longer an offender (remove it), and a file holding more
entries than issue 61's ceilings (10 long functions, 15 complex ones). Complexity is counted from
the source's syntax tree as ruff's C901 counts it (tests/size_budget.py); the last test
holds that count to ruff's own."""

import json
import re
import subprocess
import sys

import pytest

from tests.size_budget import (
    BUDGET,
    COMPLEXITY,
    DOCSTRING_LINES,
    FUNCTION_LINES,
    LIBRARY,
    MODULE_LINES,
    REPO,
    measure,
    offenders,
    read_budget,
)

_WHAT = {
    "modules_over_350_lines": (f"lines (at most {MODULE_LINES})", "split the module by idea"),
    "functions_over_60_lines": (
        f"lines (at most {FUNCTION_LINES})",
        "split the function by idea (a helper, or a module of its own)",
    ),
    "functions_over_complexity_10": (
        f"of McCabe complexity (at most {COMPLEXITY})",
        "move a branch's work into a function of its own, or a table",
    ),
    "docstrings_over_10_lines": (
        f"docstring lines (at most {DOCSTRING_LINES})",
        "keep what a reader needs there and move the rest to docs/",
    ),
}


# Issue 61's ceilings on the budget file itself: an entry added to let a new offender in
# fails here once the file would hold more than these.
CEILINGS = {
    "modules_over_350_lines": 0,
    "functions_over_60_lines": 10,
    "functions_over_complexity_10": 15,
    "docstrings_over_10_lines": 0,
}


@pytest.fixture(scope="module")
def found():
    return offenders(measure())


@pytest.mark.parametrize("kind", list(_WHAT))
def test_no_offender_beyond_the_budget(found, kind):
    budget = read_budget()[kind]
    unit, fix = _WHAT[kind]
    errors = []
    for name, size in found[kind].items():
        allowed = budget.get(name)
        if allowed is None:
            errors.append(f"{name}: {size} {unit}, a new offender: {fix}")
        elif size > allowed:
            errors.append(f"{name}: grew to {size} {unit}, budget {allowed}: {fix}")
    assert not errors, "\n".join(errors) + f"\n(the budget, {BUDGET.name}, only shrinks)"


@pytest.mark.parametrize("kind", list(_WHAT))
def test_the_budget_is_kept_honest(found, kind):
    """Each entry names an offender at its size today: shrunk, its entry goes down with
    it; no longer an offender, it leaves the file."""
    stale = []
    for name, allowed in read_budget()[kind].items():
        size = found[kind].get(name)
        if size is None:
            stale.append(f"{name}: no longer an offender: remove it from {BUDGET.name}")
        elif size < allowed:
            stale.append(f"{name}: now {size}: lower its entry in {BUDGET.name} to {size}")
    assert not stale, "\n".join(stale)


@pytest.mark.parametrize("kind", list(_WHAT))
def test_the_budget_holds_no_more_than_its_ceiling(kind):
    entries = read_budget()[kind]
    assert len(entries) <= CEILINGS[kind], (
        f"{BUDGET.name} names {len(entries)} {kind.replace('_', ' ')}; at most "
        f"{CEILINGS[kind]}: split one by idea before another is let in"
    )


def test_complexity_is_ruffs():
    """The syntax tree's count equals ruff's C901 for every function of the library."""
    pytest.importorskip("ruff")
    sizes = measure()
    ruff_c901 = [
        *(sys.executable, "-m", "ruff", "check", "--ignore-noqa", "--exit-zero"),
        *("--select", "C901", "--config", "lint.mccabe.max-complexity=0"),
        *("--output-format", "json", *LIBRARY),
    ]
    out = subprocess.run(
        ruff_c901,
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    named = {(n.split("::")[0], line): n for n, line in sizes.def_lines.items()}
    ruff = {}
    for d in json.loads(out):
        rel = d["filename"].removeprefix(f"{REPO}/")
        count = int(re.search(r"\((\d+) > 0\)", d["message"]).group(1))
        ruff[named[rel, d["location"]["row"]]] = count
    assert ruff == sizes.complexity
