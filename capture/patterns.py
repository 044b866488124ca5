"""A user's regular expressions, bounded: `delta --step-key` and the rules of a
`--families` file are Python patterns, and Python's engine backtracks. `(a+)+b` on a
31-character name, or `(\\d+) piece` on a 100,000-character one, runs for minutes.
Three bounds:
- a pattern whose quantifiers nest (`(a+)+`, `(\\w+\\s?)*`) is refused as it is read;
- a pattern sees a name's first MAX_NAME characters (a longer one is cut, and said);
- matching runs under a deadline (main thread, where no alarm of the caller's is set),
  one per pass or, within `matching_budget()`, one for a command's passes together:
  past it, a usage error names the pattern that was running (docs/families.md).
"""

from __future__ import annotations

import contextlib
import re
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

from graph_harness.capture.errors import UsageError

MAX_NAME = 4096  # characters of a name a pattern is matched against
DEADLINE_S = 5.0  # seconds of matching for one pass over the names
# seconds for all of a command's passes together (matching_budget): a pass over a large
# graph's names with the built-in rules alone takes tens of milliseconds, so a command of
# thousands of graphs stays inside it, while passes each just under DEADLINE_S cannot
# add up to more
COMMAND_S = 60.0

_REPEATS = ("MAX_REPEAT", "MIN_REPEAT")  # the repeats that backtrack (not possessive ones)


class PatternError(UsageError, ValueError):
    """A pattern refused, or one that ran past its deadline (exit 2)."""


def nested_quantifier(pattern: re.Pattern) -> str | None:
    """Why `pattern` can backtrack without end (a repeat holding a repeat of varying
    length), or None."""
    try:
        from re import _parser  # Python's own parse of the pattern
    except ImportError:  # Python 3.10
        import sre_parse as _parser

    return _nested(_parser.parse(pattern.pattern, pattern.flags), inside=False)


def _nested(items: object, *, inside: bool) -> str | None:
    for op, arg in items:
        name = op.name
        if name == "ATOMIC_GROUP" or name == "POSSESSIVE_REPEAT":
            continue  # gives back nothing it matched: no backtracking into it
        if name in _REPEATS:
            lo, hi, body = arg
            if inside and lo != hi:
                return "a repeat inside a repeat (as in `(a+)+`)"
            why = _nested(body, inside=inside or hi > 1)
            if why:
                return why
            continue
        for sub in _parts(name, arg):
            why = _nested(sub, inside=inside)
            if why:
                return why
    return None


def _parts(name: str, arg: object) -> list:
    """The sub-patterns of one parsed item (a group's, each branch's)."""
    if name == "SUBPATTERN":
        return [arg[-1]]
    if name == "BRANCH":
        return list(arg[1])
    if name in ("ASSERT", "ASSERT_NOT"):
        return [arg[1]]
    if name == "GROUPREF_EXISTS":
        return [b for b in arg[1:] if b is not None]
    return []


def checked(pattern: re.Pattern, what: str) -> re.Pattern:
    """`pattern`, or a PatternError naming it (`what`: the flag or file line it came from)
    where its quantifiers nest."""
    why = nested_quantifier(pattern)
    if why:
        raise PatternError(
            f"{what} {pattern.pattern!r}: {why} can take minutes on one name; "
            "write it without the nesting (`a+` for `(a+)+`)"
        )
    return pattern


@dataclass
class Running:
    """The pattern being matched now, for the deadline's message."""

    what: str = "a pattern"
    pattern: str = ""


@dataclass
class _Budget:
    seconds: float  # the whole budget
    left: float


_budgets: list[_Budget] = []  # the budgets in force, innermost last


@contextlib.contextmanager
def matching_budget(seconds: float = COMMAND_S) -> Iterator[None]:
    """One deadline shared by every pass in the block (the module's notes)."""
    _budgets.append(_Budget(seconds, seconds))
    try:
        yield
    finally:
        _budgets.pop()


@contextlib.contextmanager
def deadline(seconds: float | None = None) -> Iterator[Running]:
    """Matching bounded to `seconds`: set `.what`/`.pattern` of the object yielded as
    each pattern runs; past the deadline, a PatternError names the one running. Only on
    the main thread, where no SIGALRM handler or timer of the caller's is set (else
    unbounded: the caller's alarm is theirs)."""
    running = Running()
    seconds = DEADLINE_S if seconds is None else seconds
    if not _free():
        yield running
        return
    budget = _budgets[-1] if _budgets else None
    said = f"{seconds:g} s of matching"  # the bound that will stop it, named in the error
    if budget is not None and budget.left < seconds:
        said = f"the {budget.seconds:g} s of matching its command's passes share"
        seconds = max(budget.left, 1e-3)  # 0 would switch the timer off
    start = time.monotonic()
    armed = [True]  # disarmed first thing once the block ends: a late signal is then a no-op

    def expired(signum: int, frame: object) -> None:
        if armed[0]:
            raise _Expired

    signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        try:
            yield running
        finally:  # a signal before the disarming lands in the `except` below
            armed[0] = False
            signal.setitimer(signal.ITIMER_REAL, 0)
    except _Expired:
        raise PatternError(
            f"{running.what} {running.pattern!r} ran past {said} (its "
            "backtracking grows without bound on these names): simplify it"
        ) from None
    finally:
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        if budget is not None:
            budget.left -= time.monotonic() - start


class _Expired(BaseException):
    """The timer's signal: a BaseException, so that no `except Exception` of the code the
    timer interrupts (pandas, a rule's own) swallows or rewrites it."""


def _free() -> bool:
    if not hasattr(signal, "setitimer"):
        return False
    if threading.current_thread() is not threading.main_thread():
        return False
    return signal.getsignal(signal.SIGALRM) in (signal.SIG_DFL, None) and signal.getitimer(
        signal.ITIMER_REAL
    ) == (0.0, 0.0)
