"""The `node_budget` and `graph_check` pytest fixtures: a test fails when a change brings
nodes back, or when a step's graph computes something else than the step. Registered
through the `pytest11` entry point (pyproject.toml): no conftest needed.

`node_budget(step, total=..., per_scope=..., record=..., module=..., depth=...)` captures
`step` as `capture.capture_and_count` does (on CUDA syncing the device), checks the counts
and returns the NodeExport; over budget it raises NodeBudgetExceeded (an AssertionError)
with a table. Budgets with room left are listed at the end of the run. Imports only pytest
until a fixture is used (no torch in every pytest run). Names, patterns, recorded budgets
and `--update-node-budgets`: docs/budgets.md, "The fixture, its names and its file"."""

from __future__ import annotations

import inspect
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from graph_harness.capture.budget import UPDATE_FLAG  # a constant: imports nothing heavy
from graph_harness.graph_check import LOST, GraphCheck

if TYPE_CHECKING:  # torch and the harness load when the fixture is used, not before
    import torch

    from graph_harness.capture import NodeExport

_notes = pytest.StashKey[list]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("graph-harness", "graph-harness node budgets")
    group.addoption(
        UPDATE_FLAG,
        action="store_true",
        default=False,
        help="write today's node counts into the files named by node_budget(record=...) "
        "instead of checking against them",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_notes] = []


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if LOST in session.config.stash:
        session.config.stash[LOST] = int(exitstatus) or 1


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """After a graph_check lost the CUDA context (a replay's device-side assertion), the
    session's report is out: leave now, with its status, before the interpreter's exit
    frees CUDA objects whose destructors would abort the process (a core dump in place
    of pytest's status)."""
    status = config.stash.get(LOST, None)
    if status is not None:
        import sys

        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        os._exit(status)


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    notes = config.stash.get(_notes, [])
    if notes:
        terminalreporter.write_sep("-", "node budgets")
        for line in notes:
            terminalreporter.write_line(line)


@pytest.fixture
def node_budget(request: pytest.FixtureRequest) -> NodeBudget:
    """Check a step's nodes against a budget: `node_budget(step, total=..., per_scope=...)`
    or `node_budget(step, record="budgets/x.json")`; see graph_harness.pytest_plugin."""
    return NodeBudget(request.node.nodeid, request.config)


class NodeBudget:
    """The fixture's value, one per test: call it once per budget."""

    def __init__(self, nodeid: str, config: pytest.Config) -> None:
        from graph_harness.capture.text import printable  # imports nothing heavy

        # a test file's name can hold a lone surrogate; as text, as the file records it
        self.nodeid = printable(nodeid)
        self.config = config
        self._used: set[tuple[Path, str]] = set()

    def __call__(
        self,
        step,
        *,
        total: int | None = None,
        per_scope: Mapping[str, int] | Iterable[str] | None = None,
        record: str | Path | None = None,
        name: str | None = None,
        module: torch.nn.Module | None = None,
        depth: int | None = None,
        **capture_options,
    ) -> NodeExport:
        __tracebackhide__ = True
        from graph_harness.capture import capture_and_count
        from graph_harness.capture.budget.limits import BudgetError

        try:
            self._check_arguments(total, per_scope, record, name, module, depth)
            _check_step_and_options(step, module, capture_options)
            path = key = None
            if record is not None:
                path, key = self._entry(record, name)
        except BudgetError as e:
            raise e.with_traceback(None) from None  # the message, not our frames
        export = capture_and_count(step, module=module, depth=depth, **capture_options)
        try:
            self._check(export, total, per_scope, record, path, key)
        except BudgetError as e:
            raise e.with_traceback(None) from None
        return export

    def _check_arguments(self, total, per_scope, record, name, module, depth) -> None:
        from graph_harness.capture.budget.limits import BudgetError

        if record is None:
            if total is None and per_scope is None:
                raise BudgetError("node_budget needs total=, per_scope= or record= (a budget file)")
            if per_scope is not None and not isinstance(per_scope, Mapping):
                raise BudgetError(
                    "per_scope maps scope names to budgets, e.g. {'attention': 12}; a list "
                    "of names goes with record="
                )
            if name is not None:
                raise BudgetError("name= names an entry of a budget file: give record= too")
        else:
            if total is not None:
                raise BudgetError(
                    "give total= or record=, not both: with record= the budgets come from the file"
                )
            if isinstance(per_scope, Mapping | str) or not (
                per_scope is None or isinstance(per_scope, Iterable)
            ):
                raise BudgetError(
                    "with record=, per_scope lists the names to record, e.g. "
                    "per_scope=['attention', 'mlp'] (their budgets come from the file)"
                )
            if not isinstance(record, str | os.PathLike) or isinstance(record, bytes):
                raise BudgetError(
                    f"record= is the budget file's path (a str or Path), got "
                    f"{type(record).__name__}"
                )
        if depth is not None and module is None:
            raise BudgetError("depth= is the depth of module scopes: give module= too")

    def _entry(self, record, name) -> tuple[Path, str]:
        from graph_harness.capture.budget.limits import BudgetError
        from graph_harness.capture.text import printable

        path = Path(record)
        if not path.is_absolute():
            path = self.config.rootpath / path
        key = self.nodeid if name is None else name
        if not isinstance(key, str) or not key:
            raise BudgetError(f"name= is a non-empty str, got {key!r}")
        key = printable(key)  # as the file, read back, holds it (capture/text.py)
        if (path, key) in self._used:
            raise BudgetError(
                f"this test already used the budget {key!r} of {record}: give each "
                "node_budget call of one test its own name="
            )
        self._used.add((path, key))
        return path, key

    def _check(self, export, total, per_scope, record, path, key) -> None:
        __tracebackhide__ = True
        from graph_harness.capture.budget import file as budget_file
        from graph_harness.capture.budget import limits as budget
        from graph_harness.reports import budget as words

        notes = self.config.stash.get(_notes, [])
        if record is None:
            check = budget.check_budget(export, total=total, per_scope=per_scope)
        else:
            # as text, as the scopes were recorded and as the file holds them
            names = None if per_scope is None else [budget.check_name(n) for n in per_scope]
            if self.config.getoption(UPDATE_FLAG):
                entry = budget_file.record(path, key, export, names)
                # checked as it will be read back: the note says what each budget holds
                check = budget.check_budget(export, total=entry.total, per_scope=entry.scopes)
                notes.append(words.recorded_note(key, str(record), check))
                return
            entry = budget_file.lookup(path, key, export.source, shown=str(record))
            if names is not None and set(names) != set(entry.scopes):
                raise budget.BudgetError(
                    f"{record}: the budget for {key!r} records scopes "
                    f"{sorted(entry.scopes)}, the test names {sorted(names)}: re-record "
                    f"with {UPDATE_FLAG}"
                )
            check = budget.check_budget(
                export,
                total=entry.total,
                per_scope=entry.scopes,
                origin=f"{record}, entry {key!r} [{export.source}]",
                recorded=entry.recorded,
            )
        if not check.ok:
            raise budget.NodeBudgetExceeded(words.budget_failure(check, export), check)
        if check.slack:
            notes.append(words.slack_note(key or self.nodeid, check))


def _check_step_and_options(step, module, options: dict) -> None:
    """What node_budget hands to capture_and_count, checked here so that a mistake in the
    test reads as one, not as a TypeError from deep inside the capture."""
    import torch

    from graph_harness.capture import capture_and_count
    from graph_harness.capture.budget.limits import BudgetError

    if not callable(step):
        raise BudgetError(
            f"node_budget's first argument is the step to capture (a zero-argument "
            f"callable), got {type(step).__name__}"
        )
    if module is not None and not isinstance(module, torch.nn.Module):
        raise BudgetError(
            f"module= is the model whose modules name the scopes (a torch.nn.Module), got "
            f"{type(module).__name__}"
        )
    own = ("fn", "name", "module", "depth")  # node_budget takes these itself
    known = [p for p in inspect.signature(capture_and_count).parameters if p not in own]
    unknown = sorted(set(options) - set(known))
    if unknown:
        takes = "total=, per_scope=, record=, name=, module=, depth=, " + ", ".join(
            f"{k}=" for k in known
        )
        raise BudgetError(f"node_budget has no option {unknown[0]}= (it takes {takes})")
    warmup = options.get("warmup", 0)
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise BudgetError(f"warmup= is a number of calls, an int >= 0, got {warmup!r}")


@pytest.fixture
def graph_check(request: pytest.FixtureRequest) -> GraphCheck:
    """Check that a step's CUDA graph computes what the step computes, call after call:
    `graph_check(step, steps=4, module=model)`; see GraphCheck."""
    return GraphCheck(request.node.nodeid, request.config)
