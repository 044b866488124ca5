"""Where a dotted `--target` MODULE's source is, found as its import would find it, with
nothing imported and none of the user's code run: each name on the way is asked of the
same finders (sys.meta_path's, then the user's folders for the top level: user_imports.py),
and each package's `__init__.py` is found, not run. Told only where every step is plain
Python source; a module already imported, a package already imported that is not one, an
extension, a zip, a finder's own loader or a nested namespace package leave it untold
(None), for the import to say. Imports no torch."""

from __future__ import annotations

import importlib.machinery
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib.machinery import ModuleSpec


@dataclass(frozen=True, kw_only=True)
class ModuleSource:
    """A dotted MODULE as the finders see it, before anything of it runs."""

    missing: str | None  # the first name no finder has (`pkg.stepz`), as the import says it
    path: str | None  # the module's own .py source (a package's `__init__.py`); None if missing
    packages: tuple[str, ...]  # the `__init__.py` of each package that would run on the way
    folders: tuple[str, ...]  # a package's own folders (where its submodules are), else ()


def find_source(name: str, user_folders: Sequence[str]) -> ModuleSource | None:
    """`name` found without importing it (module docstring); `user_folders`: where the
    import would look for its top level after every finder. None where it cannot be told."""
    if name in sys.modules:  # imported already: its own namespace says, at the import
        return None
    try:
        return _walk(name, user_folders)
    except Exception:  # a finder's own failure (a nested namespace package's): untold
        return None


def _walk(name: str, user_folders: Sequence[str]) -> ModuleSource | None:
    """find_source's search: each package on the way (`a`, `a.b`), then the module."""
    runs: list[str] = []  # what each package on the way runs, then the module's own source
    folders: list[str] | None = None
    parts = name.split(".")
    for prefix in (".".join(parts[: i + 1]) for i in range(len(parts))):
        outer = prefix != name
        if outer and prefix in sys.modules:  # its code ran already: its own path says
            folders = _own_folders(getattr(sys.modules[prefix], "__path__", None))
            if folders is None:
                return None  # no package: the import says so
            continue
        spec = _find(prefix, folders, user_folders)
        if spec is None:  # the packages on the way still run before the import fails
            inits = tuple(r for r in runs if r)
            return ModuleSource(missing=prefix, path=None, packages=inits, folders=())
        folders = _own_folders(spec.submodule_search_locations)
        source = _runs(spec)
        if source is None or (outer and folders is None):
            return None  # not plain source, or a module that is no package (the import says)
        runs.append(source)
    *packages, path = runs
    if not path:  # a namespace package: its attributes are its submodules
        return None
    inits = tuple(p for p in packages if p)
    return ModuleSource(missing=None, path=path, packages=inits, folders=tuple(folders or ()))


def _find(name: str, path: list[str] | None, user_folders: Sequence[str]) -> ModuleSpec | None:
    """The spec sys.meta_path's finders give `name` (in `path`: its package's folders),
    the user's folders last for a top-level name, as user_imports.py's finder answers."""
    from graph_harness.reports.cli.user_imports import is_user_finder

    for finder in sys.meta_path:
        if is_user_finder(finder):
            continue
        spec = finder.find_spec(name, path)  # a finder with find_module only: untold (raises)
        if spec is not None:
            return spec
    if path is None and user_folders:
        return importlib.machinery.PathFinder.find_spec(name, list(user_folders))
    return None


def _own_folders(locations: Iterable[str] | None) -> list[str] | None:
    """A package's folders, as a list (a namespace package's computed now); None for a
    module that is no package."""
    return None if locations is None else [str(f) for f in locations]


def _runs(spec: ModuleSpec) -> str | None:
    """The .py file whose source the import of `spec` runs; "" for a namespace package
    (nothing runs); None for anything else (compiled, zipped, a finder's own loader)."""
    if spec.origin is None and spec.submodule_search_locations is not None:
        namespace = spec.loader is None or type(spec.loader).__name__ == "NamespaceLoader"
        return "" if namespace else None
    origin = spec.origin
    plain = type(spec.loader) is importlib.machinery.SourceFileLoader
    return origin if plain and isinstance(origin, str) and origin.endswith(".py") else None
