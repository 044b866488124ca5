"""Where in the user's code an error came from: the innermost frame of theirs, as
`file:line (in function)`."""

from __future__ import annotations

import os
import traceback
from pathlib import Path
from types import ModuleType

from graph_harness.reports.cli import user_imports


def root_of(mod: ModuleType) -> Path | None:
    """The folder of a module's file (None for a module with no file)."""
    f = getattr(mod, "__file__", None)
    return Path(f).resolve().parent if f else None


def origin(exc: BaseException, root: Path | None) -> str | None:
    """`file:line (in function)` of the innermost frame of `exc` in the user's code (the
    target module's folder), else the innermost frame outside graph-harness; None if none."""
    frames = traceback.extract_tb(exc.__traceback__)
    # Not the user's: graph-harness itself, and anything installed (a venv may well sit
    # inside the user's project folder) or in the standard library.
    ours = user_imports.library_folders()

    def theirs(f: traceback.FrameSummary) -> bool:
        return not any(user_imports.under(f.filename, o) for o in ours)

    pick = None
    if root is not None:
        pick = next(
            (f for f in reversed(frames) if theirs(f) and user_imports.under(f.filename, root)),
            None,
        )
    if pick is None:
        pick = next((f for f in reversed(frames) if theirs(f)), None)
    if pick is None:
        return None
    return f"{_short(pick.filename)}:{pick.lineno} (in {pick.name})"


def _short(filename: str) -> str:
    try:
        return os.path.relpath(filename)
    except ValueError:  # pragma: no cover - another drive
        return filename
