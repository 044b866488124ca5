"""The layering the package docstrings state, read off every import in the source (those
inside functions and under TYPE_CHECKING too).

- capture's sub-packages each import only those before them in the pipeline (ORDER, as
  capture/__init__.py lists them); nothing in capture imports reports; kernels imports
  pools only, pools nothing of ours.
- Each package's docstring says what it may import in a "May import:" sentence, and that
  sentence names exactly what the package imports: no more (a stale line), no less.
  The root's shared modules (errors, paths, files, ...) are used by all and not named.
- Tests and benchmarks import shared helpers from modules of their own under tests/ (not
  named test_*.py) or get fixtures from a conftest.py, never from another test module.
"""

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# capture/__init__.py's order: each may import itself and what comes before it. The root's
# shared modules come first; record/ sits between export/ and state/ (count.py counts a
# step that captures its own graphs by recording them); count.py between state/ and replay/;
# commands.py (each command that is not one stage's call) above everything, the round too.
SHARED = {
    "errors",
    "paths",
    "files",
    "stats",
    "environment",
    "text",
    "results",
    "descriptors",
    "settings",
    "rows",
    "patterns",
}
ORDER = [
    SHARED,
    {"scopes"},
    {"graph"},
    {"attribution"},
    {"export"},
    {"record"},
    {"state"},
    {"count", "step"},
    {"replay"},
    {"check"},
    {"live"},
    {"sweep"},
    {"profile"},
    {"advise"},
    {"budget"},
    {"round"},
    {"commands"},
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


def init_file(package: Path) -> Path:
    """The file that is a package's own module: its __init__.py, or, for the four top-level
    packages, whose folders have none, graph_harness/NAME.py (graph_harness/__init__.py's
    `_folder` says why)."""
    if package.parent == REPO:
        return REPO / "graph_harness" / f"{package.name}.py"
    return package / "__init__.py"


def modules(top: str):
    if "/" not in top:
        yield init_file(REPO / top), f"graph_harness.{top}"
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
                # _folder: the package path their own module sets (graph_harness/__init__.py)
                allowed = ("graph_harness.pools", "graph_harness._folder") + (
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


def round_imports(path: Path, module: str) -> list[str]:
    return [f"{module} -> {t}" for t in imports(path, module) if capture_part(t) == "round"]


@pytest.mark.parametrize("part", ["replay", "profile", "advise", "budget"])
def test_generic_measurement_imports_nothing_of_the_round(part, tmp_path):
    # The round sits at the top and registers what it adds (round/chains.py, advice.py).
    found = [x for path, me in modules(f"capture/{part}") for x in round_imports(path, me)]
    assert found == []
    # Not vacuous: the old order (advise pricing through the round's chains) is caught.
    old = tmp_path / "groups.py"
    old.write_text("from graph_harness.capture.round.pricing import step_chain\n")
    assert round_imports(old, f"graph_harness.capture.{part}.groups") != []


def test_the_check_sees_a_forbidden_import(tmp_path):
    # Not vacuous: the reader finds an upward import written inside a function.
    f = tmp_path / "m.py"
    f.write_text("def g():\n    from graph_harness.capture.round.params import VARIANTS\n")
    (target,) = imports(f, "graph_harness.capture.export.m")
    assert RANK[capture_part(target)] > RANK["export"]


# --- each package's "May import:" sentence ------------------------------------------------

PACKAGES = sorted(
    [REPO / "kernels", REPO / "pools"]
    + [p.parent for p in (REPO / "capture").rglob("__init__.py")]  # not capture's own module:
)  # its lazy table names everything
NAME = re.compile(r"\bcapture\.(\w+)|\b(kernels|pools)\b")


def stated(docstring: str) -> set[str]:
    """What a "May import:" sentence names: capture's parts as `capture.X`, and `kernels`,
    `pools`; the sentence ends at the first full stop followed by a space or the end."""
    m = re.search(r"May import:(.*?)(?:\.\s|\.$)", docstring, re.S)
    if m is None:
        return set()
    return {a or b for a, b in NAME.findall(m.group(1))}


def imported(package: Path) -> set[str]:
    """What the package's modules import from outside it, in the same words: capture's
    parts (those the package is not part of), kernels and pools; capture's shared root
    modules are left out."""
    dotted = "graph_harness." + ".".join(package.relative_to(REPO).parts)
    out = set()
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(REPO).with_suffix("").parts
        me = "graph_harness." + ".".join(rel[:-1] if rel[-1] == "__init__" else rel)
        for target in imports(path, me):
            if target == dotted or target.startswith(dotted + "."):
                continue
            part = capture_part(target)
            if part is not None and part not in SHARED:
                out.add(part)
            elif target.split(".")[1] in ("kernels", "pools"):
                out.add(target.split(".")[1])
    # A top-level sub-package's own part is itself; a nested one (graph/diagnose) names the
    # package around it when it imports from there.
    nested = len(package.relative_to(REPO).parts) > 2
    return out if nested else out - {capture_part(dotted)}


def _label(package: Path) -> str:
    return "/".join(package.relative_to(REPO).parts)


@pytest.mark.parametrize("package", PACKAGES, ids=_label)
def test_may_import_names_exactly_what_is_imported(package):
    doc = ast.get_docstring(ast.parse(init_file(package).read_text())) or ""
    assert "May import:" in doc, f'{_label(package)}/__init__.py has no "May import:" sentence'
    want, got = imported(package), stated(doc)
    assert got == want, (
        f"{_label(package)}/__init__.py: its May import: names {sorted(got)}, its modules "
        f"import {sorted(want)} (missing {sorted(want - got)}, stale {sorted(got - want)})"
    )


def test_the_sentence_reader_is_not_vacuous():
    doc = "Stuff.\n\nMay import: capture.graph, capture.scopes (labels), kernels.\nMore. pools."
    assert stated(doc) == {"graph", "scopes", "kernels"}
    # a package that imports what its sentence does not name is caught
    assert imported(REPO / "capture" / "round") - stated("May import: capture.graph.") != set()


def test_command_modules_never_import_each_other():
    """reports/cli/commands/: each command imports shared helpers (args, console, target,
    targets, refs), never another command."""
    bad = []
    for path, me in modules("reports/cli/commands"):
        for target in imports(path, me):
            if target.startswith("graph_harness.reports.cli.commands.") and not target.startswith(
                me
            ):
                bad.append(f"{me} -> {target}")
    assert not bad, "\n".join(bad)


# --- tests import helpers, never another test module --------------------------------------

GENERATED_IMPORT = re.compile(r"\b(?:from|import)\s+(tests(?:\.\w+)+)")


def is_test(module: str) -> bool:
    """Whether a dotted name is, or is inside, a test module (test_*.py)."""
    return any(part.startswith("test_") for part in module.split("."))


def imported_test_modules(path: Path) -> list[str]:
    """The test modules (test_*.py) `path` imports: in its import statements (inside
    functions too, relative ones included) and in code it writes out as text (a target
    file it generates)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names if a.name.split(".")[0] == "tests"]
        elif isinstance(node, ast.ImportFrom) and (node.level or node.module.startswith("tests")):
            base = "." * node.level + (node.module or "")
            names = [base] if is_test(base) else [f"{base}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names = GENERATED_IMPORT.findall(node.value)
        out += [n for n in names if is_test(n)]
    return out


def imports_of_tests(root: Path) -> list[str]:
    """Every import of a test module by a module of tests/ or benchmarks/ under `root`."""
    return [
        f"{path.relative_to(root)}: {name}"
        for top in ("tests", "benchmarks")
        for path in sorted((root / top).rglob("*.py"))
        for name in imported_test_modules(path)
    ]


def test_tests_import_helpers_never_another_test_module():
    """A helper two test modules share lives in a module of its own under tests/ (named
    for its idea, not test_*.py), or a conftest.py for a fixture; importing it from a
    test module runs that module's imports and module-level work, and hides the helper."""
    bad = imports_of_tests(REPO)
    assert not bad, "\n".join(bad)


def test_the_test_import_check_is_not_vacuous(tmp_path):
    # The sample's imports are spelled `T.` here and written as `tests.`: this file's own
    # text holds none.
    (tmp_path / "tests" / "a").mkdir(parents=True)
    (tmp_path / "benchmarks").mkdir()
    sample = (
        "from T.a.test_two import helper\n"
        "from T.a import test_three\n"
        "from T.a.helpers import fine\n"
        "def f():\n"
        "    from .test_four import x\n"
        "    import T.a.test_five\n"
        "TARGET = 'from T.a.test_six import step\\n'\n"
    )
    (tmp_path / "tests" / "a" / "test_one.py").write_text(sample.replace("T.", "tests."))
    bench = "from T.a.test_one import y\n"
    (tmp_path / "benchmarks" / "bench.py").write_text(bench.replace("T.", "tests."))
    assert sorted(imports_of_tests(tmp_path)) == [
        "benchmarks/bench.py: tests.a.test_one",
        "tests/a/test_one.py: .test_four",
        "tests/a/test_one.py: tests.a.test_five",
        "tests/a/test_one.py: tests.a.test_six",
        "tests/a/test_one.py: tests.a.test_three",
        "tests/a/test_one.py: tests.a.test_two",
    ]
