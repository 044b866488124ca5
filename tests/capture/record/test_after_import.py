"""A call made once a module's import completes (capture/record/after_import.py): after the
module's own code, once, and not at all when taken back first."""

from __future__ import annotations

import sys

import pytest

from graph_harness.capture.record.after_import import when_imported


@pytest.fixture
def module_dir(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in [m for m in sys.modules if m.startswith("gh_after_")]:
        del sys.modules[name]


def _write(folder, name, body):
    (folder / f"{name}.py").write_text(body)


def test_the_call_follows_the_modules_own_code_once(module_dir):
    _write(module_dir, "gh_after_a", "import sys\nsys.modules[__name__].ran = True\n")
    seen = []
    finders = len(sys.meta_path)
    when_imported("gh_after_a", lambda: seen.append(sys.modules["gh_after_a"].ran))
    import gh_after_a

    assert seen == [True], "called once the module's code has run"
    assert len(sys.meta_path) == finders, "the finder left sys.meta_path"
    del sys.modules["gh_after_a"]
    import gh_after_a  # noqa: F401, F811

    assert seen == [True], "once: a second import calls nothing"


def test_a_module_already_imported_is_called_at_once(module_dir):
    _write(module_dir, "gh_after_b", "")
    import gh_after_b  # noqa: F401

    seen = []
    when_imported("gh_after_b", lambda: seen.append(1))
    assert seen == [1]


def test_a_call_taken_back_is_never_made(module_dir):
    _write(module_dir, "gh_after_c", "")
    seen = []
    leave = when_imported("gh_after_c", lambda: seen.append(1))
    leave()
    import gh_after_c  # noqa: F401

    assert seen == []


def test_a_submodule_is_waited_for_by_its_full_name(module_dir):
    (module_dir / "gh_after_pkg").mkdir()
    _write(module_dir / "gh_after_pkg", "__init__", "")
    _write(module_dir / "gh_after_pkg", "sub", "value = 3\n")
    seen = []
    when_imported("gh_after_pkg.sub", lambda: seen.append(sys.modules["gh_after_pkg.sub"].value))
    import gh_after_pkg

    assert seen == [], "the package alone is not the submodule"
    import gh_after_pkg.sub

    assert seen == [3]
    del sys.modules["gh_after_pkg"], sys.modules["gh_after_pkg.sub"]
    assert gh_after_pkg is not None
