"""A target's module read without running it: whether its FUNCTION is surely missing, told
from the syntax tree of each file its import would run, before torch's import and the
user's code. Surely missing: no such file runs a spelling of the name (no binding,
attribute, keyword or string of it) or has means to bind one unseen (`import *`, a module
`__getattr__`, `globals()`, `exec`, `setattr`, `sys.modules`, ...: `_DYNAMIC_*` list them).
A dotted MODULE is found as its import would find it (module_source.py); a module no
finder has is refused too; a package on the way that could move its folders
(`_PACKAGE_PATHS`), a file that imports another module of its own package, and anything
not told here (a dunder name, a file that does not parse, not plain Python) are left to
the import."""

from __future__ import annotations

import ast
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

# Names that read or write a namespace by a name known only at run time.
_DYNAMIC_CALLS = frozenset(
    {"globals", "vars", "locals", "exec", "eval", "setattr", "__import__", "_getframe"}
)
_DYNAMIC_ATTRIBUTES = frozenset({"__dict__", "modules", "f_globals", "_getframe", "__setattr__"})
# Names a package spells to move where its submodules are found, or how.
_PACKAGE_PATHS = ("__path__", "declare_namespace", "meta_path", "path_hooks")
_LARGEST = 10 * 2**20  # bytes: a bigger file is left to the import


def missing_factory(spec: str, files_before: Sequence[str] = ()) -> str | None:
    """The refusal for a target whose module surely binds no FUNCTION, or whose dotted
    MODULE no finder has (module docstring), in load_factory's words; None when it may, or
    cannot be told. `files_before`: the file targets the command loads before this one."""
    from graph_harness.reports.cli.target import is_file_spec

    module_name = spec.rpartition(":")[0]
    if not is_file_spec(module_name):
        return _dotted_problem(spec, [Path(f) for f in files_before])
    if not module_name.endswith(".py"):
        return None  # a file importlib would not load as Python
    return _lacks(spec, [_parsed(module_name)], ())


def _dotted_problem(spec: str, files_before: list[Path]) -> str | None:
    """missing_factory for a dotted MODULE, found as its import would find it; each
    package's `__init__.py` on the way is read too, and must not spell a package path's
    names (`_PACKAGE_PATHS`) either."""
    from graph_harness.reports.cli.module_source import find_source
    from graph_harness.reports.cli.target import no_module
    from graph_harness.reports.cli.user_imports import folders_before

    module_name, _, func = spec.rpartition(":")
    found = find_source(module_name, folders_before(files_before))
    if found is None:
        return None
    inits = [_parsed(p) for p in found.packages]
    if not all(t is not None and _surely_unbound(t, _PACKAGE_PATHS) for t in inits):
        return None
    top = module_name.partition(".")[0]
    own = [*inits, _parsed(found.path) if found.path else None]
    if any(t is not None and _imports_own_package(t, top) for t in own):
        return None  # a module of the package, not read here, may add the name or a finder
    if found.missing is not None:
        return no_module(spec, found.missing)
    if found.path is None or _has_entry(found.folders, func):
        return None  # a package's submodule of that name: importing it binds the name
    return _lacks(spec, [_parsed(found.path), *inits], _PACKAGE_PATHS)


def _lacks(spec: str, trees: list[ast.Module | None], also: tuple[str, ...]) -> str | None:
    """The refusal when no tree of `trees` (the module's, then its packages') binds
    FUNCTION or spells any of `also`; else None."""
    from graph_harness.reports.cli.target import no_factory

    func = spec.rpartition(":")[2]
    if not func.isidentifier() or func.startswith("__"):  # a module's own __dict__, __doc__
        return None
    module = trees[0]
    if module is None or not all(t and _surely_unbound(t, (func, *also)) for t in trees):
        return None
    return no_factory(spec, _functions(module))


def _has_entry(folders: Sequence[str], name: str) -> bool:
    """Whether a folder holds `name` or `name.*` (a submodule's file or folder), or cannot
    be listed."""
    for folder in folders:
        try:
            entries = os.listdir(folder)
        except OSError:
            return True
        if any(e == name or e.startswith(f"{name}.") for e in entries):
            return True
    return False


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


def _surely_unbound(tree: ast.Module, names: tuple[str, ...]) -> bool:
    """Whether `tree` spells none of `names` anywhere, in no role (bound, read, an
    attribute, a keyword, in a string), defines no module `__getattr__` and has no means
    to bind a name unseen (module docstring)."""
    for node in ast.walk(tree):
        spelled = _identifiers(node)
        if "__getattr__" in spelled or _dynamic(node) or not spelled.isdisjoint(names):
            return False
        text = node.value if isinstance(node, ast.Constant) else None
        if isinstance(text, str) and any(name in text for name in names):
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


def _imports_own_package(tree: ast.Module, top: str) -> bool:
    """Whether `tree` imports another module of its own top-level package `top` (a
    relative import, or `top.` by name): one that could bind names in it unseen."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                return True
            named = [node.module or ""]
        elif isinstance(node, ast.Import):
            named = [a.name for a in node.names]
        else:
            continue
        if any(n.partition(".")[0] == top for n in named):
            return True
    return False


def _dynamic(node: ast.AST) -> bool:
    """Whether `node` could bind a name the tree does not spell (the module's own name
    handed to a call: `export(__name__, ...)` may set attributes on it)."""
    if isinstance(node, ast.alias) and node.name == "*":
        return True
    if isinstance(node, ast.Call):
        given = [*node.args, *(k.value for k in node.keywords)]
        if any(isinstance(a, ast.Name) and a.id == "__name__" for a in given):
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
