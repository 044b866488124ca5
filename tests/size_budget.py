"""The library's sizes, measured from its source (no import, no GPU): each module's lines,
each function's lines and its McCabe complexity. tests/test_size_budget.py holds them to
tests/size_budget.json; `python -m tests.size_budget` prints today's offenders in that
file's form, to write it again after a split."""

from __future__ import annotations

import ast
import json
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BUDGET = REPO / "tests" / "size_budget.json"
# The library's code; tests, benchmarks and examples are not measured.
LIBRARY = ("pools", "kernels", "capture", "reports", "graph_harness")
MODULE_LINES = 350  # a module over this many lines is an offender
FUNCTION_LINES = 60  # a function (def line to last line, docstring in) over this many
COMPLEXITY = 10  # a function of McCabe complexity above this
DOCSTRING_LINES = 10  # a docstring (module, class, function) over this many; the rest: docs/
# A package's table of contents (its modules, what it may import) is its docstring: the
# __init__.py of each sub-package, and the namespace modules that stand for the top ones'.
CONTENTS = tuple(f"graph_harness/{p}.py" for p in ("pools", "kernels", "capture", "reports"))

ABOUT = [
    "The library's size offenders (issue 61), each at its size today; this file only",
    "shrinks. Split an offender by idea, then lower or remove its entry (the test says",
    "which). Goal: no module over 350 lines, at most 10 functions over 60 lines, at most",
    "15 of complexity above 10, docstrings of 10 lines or fewer (a package's __init__",
    "excepted: its table of contents). Written by `python -m tests.size_budget`.",
]

_Function = ast.FunctionDef | ast.AsyncFunctionDef


def complexity(fn: _Function) -> int:
    """McCabe complexity as ruff's C901 counts it (its mccabe rule): 1, plus 1 for each
    if, elif, for, while, except, try's else, match case and nested def, each counted
    wherever it stands in the body, nested functions' bodies included; boolean operators
    and comprehensions add nothing. tests/test_size_budget.py checks it against ruff."""
    return 1 + _branches(fn.body)


def _branches(body: list[ast.stmt]) -> int:
    n = 0
    for s in body:
        if isinstance(s, ast.If):
            n += 1 + _branches(s.body)
            # an elif is an If alone in orelse, counted as its own branch
            n += _branches(s.orelse)
        elif isinstance(s, ast.For | ast.AsyncFor | ast.While):
            n += 1 + _branches(s.body) + _branches(s.orelse)
        elif isinstance(s, ast.With | ast.AsyncWith):
            n += _branches(s.body)
        elif isinstance(s, ast.Try | getattr(ast, "TryStar", ast.Try)):
            n += _branches(s.body) + _branches(s.orelse) + _branches(s.finalbody)
            n += 1 if s.orelse else 0
            n += sum(1 + _branches(h.body) for h in s.handlers)
        elif isinstance(s, ast.Match):
            n += sum(1 + _branches(c.body) for c in s.cases)
        elif isinstance(s, _Function):
            n += 1 + _branches(s.body)
        elif isinstance(s, ast.ClassDef):
            n += _branches(s.body)
    return n


@dataclass(frozen=True)
class Sizes:
    modules: dict[str, int]  # "capture/count.py" -> lines
    function_lines: dict[str, int]  # "capture/count.py::Class.method" -> lines
    complexity: dict[str, int]  # the same names -> McCabe complexity
    def_lines: dict[str, int]  # the same names -> the line of their `def`
    docstrings: dict[str, int]  # "path" (the module's) or "path::qualname" -> its lines


def measure(repo: Path = REPO) -> Sizes:
    """Every module's and every function's (methods and nested functions too, named by
    their qualified name) size in the library."""
    modules, lines, cx, where, docs = {}, {}, {}, {}, {}
    for folder in LIBRARY:
        for path in sorted((repo / folder).rglob("*.py")):
            rel = path.relative_to(repo).as_posix()
            text = path.read_text(encoding="utf-8")
            modules[rel] = len(text.splitlines())
            tree = ast.parse(text)
            if path.name != "__init__.py" and rel not in CONTENTS:
                docs[rel] = _docstring_lines(tree)
            for qualname, fn in _functions(tree, ""):
                name = f"{rel}::{qualname}"
                lines[name] = fn.end_lineno - fn.lineno + 1
                cx[name] = complexity(fn)
                where[name] = fn.lineno
                docs[name] = _docstring_lines(fn)
            for qualname, cls in _classes(tree, ""):
                docs[f"{rel}::{qualname}"] = _docstring_lines(cls)
    return Sizes(modules, lines, cx, where, docs)


def _docstring_lines(node: ast.AST) -> int:
    """The lines of `node`'s docstring, quotes included (0 where it has none)."""
    body = getattr(node, "body", [])
    first = body[0] if body else None
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        return first.end_lineno - first.lineno + 1
    return 0


def _classes(node: ast.AST, prefix: str) -> list[tuple[str, ast.ClassDef]]:
    found = []
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.ClassDef):
            found.append((prefix + child.name, child))
            found += _classes(child, f"{prefix}{child.name}.")
        elif isinstance(child, _Function):
            found += _classes(child, f"{prefix}{child.name}.")
        else:
            found += _classes(child, prefix)
    return found


def _functions(node: ast.AST, prefix: str) -> list[tuple[str, _Function]]:
    found = []
    for child in ast.iter_child_nodes(node):
        if isinstance(child, _Function):
            found.append((prefix + child.name, child))
            found += _functions(child, f"{prefix}{child.name}.")
        elif isinstance(child, ast.ClassDef):
            found += _functions(child, f"{prefix}{child.name}.")
        else:
            found += _functions(child, prefix)
    return found


def offenders(sizes: Sizes) -> dict[str, dict[str, int]]:
    """What the budget file lists: each measure's offenders with their size."""
    return {
        "modules_over_350_lines": {k: v for k, v in sizes.modules.items() if v > MODULE_LINES},
        "functions_over_60_lines": {
            k: v for k, v in sizes.function_lines.items() if v > FUNCTION_LINES
        },
        "functions_over_complexity_10": {
            k: v for k, v in sizes.complexity.items() if v > COMPLEXITY
        },
        "docstrings_over_10_lines": {
            k: v for k, v in sizes.docstrings.items() if v > DOCSTRING_LINES
        },
    }


def read_budget() -> dict[str, dict[str, int]]:
    return {k: v for k, v in json.loads(BUDGET.read_text()).items() if not k.startswith("_")}


if __name__ == "__main__":
    found = offenders(measure())
    for kind, entries in found.items():
        print(f"{kind}: {len(entries)}", file=sys.stderr)
    ordered = {k: dict(sorted(v.items(), key=lambda kv: (-kv[1], kv[0]))) for k, v in found.items()}
    print(json.dumps({"_about": ABOUT, **ordered}, indent=2))
