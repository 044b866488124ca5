"""The user's folders answer the user's imports, and only theirs.

`--target mod:fn` finds `mod` in the current folder, and a file target's siblings in its
folder, searched after everything installed (as `python -m` would, but last). A folder on
sys.path would answer every import, though: sympy's `import gmpy2` (an optional speed-up
it tries when torch imports it) would run the user's unrelated `gmpy2.py`, and the error
would blame their file. So the folders are not put on sys.path: a finder placed after
every other one looks in them only for an import made by code in them (the module that
runs `import x` lives there), or for the target module itself.
"""

from __future__ import annotations

import importlib.machinery
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence
    from types import ModuleType

_MACHINERY = ("<frozen importlib", os.path.dirname(importlib.__file__))


def library_folders() -> list[Path]:
    """graph-harness's own folders and everything installed or standard: code there is
    not the user's, even when a virtual environment sits inside their project."""
    from graph_harness import capture, kernels, pools, reports

    ours = [Path(m.__file__).resolve().parent for m in (capture, kernels, pools, reports)]
    installed = {Path(p).resolve() for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    return ours + sorted(installed)


def under(filename: str, root: Path) -> bool:
    try:
        Path(filename).resolve().relative_to(root)
    except (ValueError, OSError):
        return False
    return True


class _UserFolders:
    """A meta-path finder for top-level modules in the user's folders (see the module
    docstring); it never answers for submodules, whose package's own path finds them."""

    def __init__(self) -> None:
        self.folders: list[Path] = []
        self.tops: set[str] = set()  # the target modules' own top-level names
        self.library: list[Path] | None = None
        self.lock = threading.Lock()

    def find_spec(
        self, name: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if path is not None or not self.folders or "." in name:
            return None
        if name not in self.tops and not self._asked_by_user():
            return None
        return importlib.machinery.PathFinder.find_spec(name, [str(f) for f in self.folders])

    def invalidate_caches(self) -> None:
        pass

    def _asked_by_user(self) -> bool:
        frame = sys._getframe(2)
        while frame is not None and frame.f_code.co_filename.startswith(_MACHINERY):
            frame = frame.f_back
        if frame is None:
            return False
        filename = frame.f_code.co_filename
        if self.library is None:
            self.library = library_folders()
        if any(under(filename, lib) for lib in self.library):
            return False
        return any(under(filename, f) for f in self.folders)


_finder = _UserFolders()


def add_folder(folder: Path, *, top: str | None = None) -> None:
    """Let `folder` answer the user's imports (and `top`, the target's own module name,
    whoever imports it), after everything else."""
    with _finder.lock:
        if folder not in _finder.folders:
            _finder.folders.append(folder)
        if top:
            _finder.tops.add(top)
        if _finder not in sys.meta_path:
            sys.meta_path.append(_finder)


def is_user_finder(finder: object) -> bool:
    """Whether `finder` is the one that searches the user's folders (this module's)."""
    return finder is _finder


def folders_before(files: Sequence[Path]) -> list[str]:
    """The folders that will answer a MODULE:FUNCTION target's top-level name once the
    file targets loaded before it (`files`) have added theirs, in the order searched:
    those added already, the files' folders, then the current folder (target.py)."""
    with _finder.lock:
        held = list(_finder.folders)
    return [str(f) for f in [*held, *(p.resolve().parent for p in files), Path(os.getcwd())]]
