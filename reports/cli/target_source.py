"""A `path/to/file.py:FUNCTION` target read without running it: whether FUNCTION is surely
missing, told from the file's syntax tree before torch's import and the user's code.
Surely missing: the file spells the name nowhere (no binding, attribute, keyword or
string of it) and has no means to bind one unseen (`import *`, a module `__getattr__`,
`globals()`, `exec`, `setattr`, `sys.modules`, ...: `_DYNAMIC_*` list them). Anything else
(a dotted MODULE, a dunder name, a file that does not parse) is left to the import."""

from __future__ import annotations

import ast
import os
from collections.abc import Iterator

# Names that read or write a namespace by a name known only at run time.
_DYNAMIC_CALLS = frozenset(
    {"globals", "vars", "locals", "exec", "eval", "setattr", "__import__", "_getframe"}
)
_DYNAMIC_ATTRIBUTES = frozenset({"__dict__", "modules", "f_globals", "_getframe", "__setattr__"})
_LARGEST = 10 * 2**20  # bytes: a bigger file is left to the import


def missing_factory(spec: str) -> str | None:
    """The refusal for `path/to/file.py:FUNCTION` whose file surely binds no FUNCTION
    (module docstring), in load_factory's words; None when it may, or cannot be told."""
    from graph_harness.reports.cli.target import is_file_spec

    module_name, _, func = spec.rpartition(":")
    if not module_name.endswith(".py") or not is_file_spec(module_name):
        return None  # a dotted MODULE, or a file importlib would not load as Python
    if not func.isidentifier() or func.startswith("__"):  # a module's own __dict__, __doc__
        return None
    tree = _parsed(module_name)
    if tree is None or not _surely_unbound(tree, func):
        return None
    names = _functions(tree)
    shown = ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
    listed = f"; its functions: {shown}" if names else ""
    return f"--target {spec!r}: module {module_name!r} has no {func!r}{listed}"


def _parsed(path: str) -> ast.Module | None:
    """The file's syntax tree; None where it cannot be read or parsed here."""
    if not os.path.isfile(path):  # a FIFO or a folder: the import says what it is
        return None
    try:
        with open(path, "rb") as f:
            source = f.read(_LARGEST + 1)
        if len(source) > _LARGEST:
            return None
        return ast.parse(source, filename=path)
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _surely_unbound(tree: ast.Module, name: str) -> bool:
    """Whether `tree` names `name` nowhere, in no role (bound, read, an attribute, a
    keyword, in a string), defines no module `__getattr__` and has no means to bind a
    name unseen (module docstring)."""
    for node in ast.walk(tree):
        names = _identifiers(node)
        if name in names or "__getattr__" in names or _dynamic(node):
            return False
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and name in node.value:
            return False
    return True


def _identifiers(node: ast.AST) -> set[str]:
    """The identifiers `node` itself spells, in whatever role."""
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        return set(node.names)
    if isinstance(node, ast.alias):
        return {node.name.partition(".")[0], node.asname or ""}
    if isinstance(node, ast.MatchMapping):
        return {node.rest or ""}
    fields = ("id", "attr", "name", "arg")  # Name, Attribute, defs and handlers, arg, keyword
    return {v for v in (getattr(node, f, None) for f in fields) if isinstance(v, str)}


def _dynamic(node: ast.AST) -> bool:
    """Whether `node` could bind a name the tree does not spell."""
    if isinstance(node, ast.alias) and node.name == "*":
        return True
    if isinstance(node, ast.Name) and node.id in _DYNAMIC_CALLS:
        return True
    return isinstance(node, ast.Attribute) and node.attr in _DYNAMIC_ATTRIBUTES


def _functions(tree: ast.Module) -> list[str]:
    """The public functions the file defines at its top level (in `if`, `try`, `with`
    and loop blocks too, whichever branch would run), in source order: what load_factory
    lists after the import, where every def runs."""
    names: list[str] = []
    for stmt in _top_level(tree.body):
        defines = isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef))
        if defines and not stmt.name.startswith("_") and stmt.name not in names:
            names.append(stmt.name)
    return names


def _top_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement that runs in the module's own namespace, in source order."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue  # their bodies run in a namespace of their own
        for field in ("body", "orelse", "finalbody"):
            yield from _top_level(getattr(stmt, field, []))
        for handler in getattr(stmt, "handlers", []):
            yield from _top_level(handler.body)
