"""The layering the package docstrings state, read off every import in the source (those
inside functions too): capture's sub-packages each import only those before them in the
pipeline, nothing in capture imports reports, and kernels and pools import neither."""

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# capture/__init__.py's order: each may import itself and what comes before it. The root's
# shared modules come first; count.py sits between state/ and round/.
ORDER = [
    {"errors", "paths", "files", "stats", "environment", "text", "results"},
    {"scopes"},
    {"graph"},
    {"attribution"},
    {"export"},
    {"state"},
    {"count"},
    {"round"},
    {"replay"},
    {"check"},
    {"profile"},
    {"advise"},
    {"budget"},
]
RANK = {name: i for i, names in enumerate(ORDER) for name in names}


def imports(path: Path, module: str) -> list[str]:
    """Every graph_harness module `path` (the module `module`) imports, relative ones
    resolved."""
    out = []
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            out += [f"{base}.{a.name}" for a in node.names] if base else []
    return [m for m in out if m.startswith("graph_harness.")]


def modules(top: str):
    for path in sorted((REPO / top).rglob("*.py")):
        rel = path.relative_to(REPO).with_suffix("").parts
        rel = rel[:-1] if rel[-1] == "__init__" else rel
        yield path, "graph_harness." + ".".join(rel)


def capture_part(module: str) -> str | None:
    """The sub-package (or root module) of capture a dotted name falls in."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "capture" else None


def test_every_capture_module_has_a_place_in_the_order():
    places = {capture_part(m) for _, m in modules("capture")} - {None}
    assert places == set(RANK), places ^ set(RANK)


@pytest.mark.parametrize("top", ["capture", "kernels", "pools"])
def test_imports_flow_one_way(top):
    bad = []
    for path, me in modules(top):
        if me == "graph_harness.capture":
            continue  # the lazy table of public names points at everything
        for target in imports(path, me):
            if top in ("kernels", "pools"):
                allowed = ("graph_harness.pools",) + (
                    ("graph_harness.kernels",) * (top == "kernels")
                )
                if not target.startswith(allowed):
                    bad.append(f"{me} -> {target}")
                continue
            if target.startswith(("graph_harness.reports", "graph_harness.pytest_plugin")):
                bad.append(f"{me} -> {target}")
                continue
            mine, theirs = capture_part(me), capture_part(target)
            if theirs is not None and RANK[theirs] > RANK[mine]:
                bad.append(f"{me} -> {target}")
    assert not bad, "\n".join(bad)


def test_the_check_sees_a_forbidden_import(tmp_path):
    # Not vacuous: the reader finds an upward import written inside a function.
    f = tmp_path / "m.py"
    f.write_text("def g():\n    from graph_harness.capture.round.params import VARIANTS\n")
    (target,) = imports(f, "graph_harness.capture.export.m")
    assert RANK[capture_part(target)] > RANK["export"]
