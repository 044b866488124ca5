"""The smoke selection the README offers (`python -m pytest -m smoke`): registered, a
handful of tests, and every package under it. Read from the sources: collecting the suite
to find them would cost what the selection saves."""

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("pools", "kernels", "capture", "capture/record", "capture/check", "reports")


def _smoke_tests() -> list[str]:
    found = []
    for path in sorted((REPO / "tests").rglob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and any(
                ast.unparse(d) == "pytest.mark.smoke" for d in node.decorator_list
            ):
                found.append(f"{path.relative_to(REPO / 'tests').as_posix()}::{node.name}")
    return found


def test_the_smoke_selection_covers_every_package_and_is_small():
    found = _smoke_tests()
    assert 8 <= len(found) <= 20, found
    for package in PACKAGES:
        assert any(t.startswith(f"{package}/") for t in found), (package, found)


def test_the_smoke_marker_is_registered_and_offered():
    assert re.search(r'^\s*"smoke: ', (REPO / "pyproject.toml").read_text(), re.M)
    assert "`python -m pytest -m smoke`" in (REPO / "README.md").read_text()
