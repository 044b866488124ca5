"""Modules imported on a thread while a command waits (reports/cli/prefetch.py): imported
by the time the wait is over, and none started once it is (a short program's wait hid
nothing: what is left is imported where it is needed)."""

from __future__ import annotations

import sys
import threading
import types

import pytest

from graph_harness.reports.cli.prefetch import prefetched


@pytest.fixture
def modules(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    gate = types.ModuleType("gh_prefetch_gate")
    gate.started, gate.release = threading.Event(), threading.Event()
    monkeypatch.setitem(sys.modules, "gh_prefetch_gate", gate)
    (tmp_path / "gh_prefetch_a.py").write_text("value = 1\n")
    (tmp_path / "gh_prefetch_slow.py").write_text(
        "import sys\n"
        "gate = sys.modules['gh_prefetch_gate']\n"
        "gate.started.set()\n"
        "gate.release.wait(10)\n"
    )
    (tmp_path / "gh_prefetch_b.py").write_text("value = 2\n")
    yield gate
    for name in [m for m in sys.modules if m.startswith("gh_prefetch_")]:
        sys.modules.pop(name, None)


def test_imported_while_the_block_runs(modules):
    with prefetched(["gh_prefetch_a", "gh_prefetch_slow", "gh_prefetch_b"]):
        assert modules.started.wait(10)
        modules.release.set()
        while "gh_prefetch_b" not in sys.modules:  # the block outlasts every import
            threading.Event().wait(0.01)
    assert sys.modules["gh_prefetch_b"].value == 2


def test_none_started_once_the_block_is_over(modules):
    threading.Timer(0.3, modules.release.set).start()
    with prefetched(["gh_prefetch_a", "gh_prefetch_slow", "gh_prefetch_b"]):
        assert modules.started.wait(10)  # the block ends while the slow import runs
    assert "gh_prefetch_slow" in sys.modules, "the import under way was waited for"
    assert "gh_prefetch_b" not in sys.modules, "and none started after the block"


def test_a_module_that_fails_is_left_to_fail_where_it_is_needed(modules, tmp_path):
    (tmp_path / "gh_prefetch_bad.py").write_text("raise ImportError('broken')\n")
    modules.release.set()
    with prefetched(["gh_prefetch_bad", "gh_prefetch_a"]):
        while "gh_prefetch_a" not in sys.modules:
            threading.Event().wait(0.01)
    with pytest.raises(ImportError, match="broken"):
        import gh_prefetch_bad  # noqa: F401
