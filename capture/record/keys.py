"""An engine's own name for its graphs: the key adapter.

An adapter is a callable that takes a capture's `CaptureContext` as it begins and returns
the key (a str; None: the next rule decides, capture/record/sites.py). Named with `record
--key MODULE:FUNCTION` (or `FILE.py:FUNCTION`) or `record(key=...)`, or installed as an
entry point in `graph_harness.record_keys`. It runs just before torch begins the capture
(capturing.py); whatever it raises (SystemExit included) never breaks the program: the
graph takes the next rule's key and `key_note` says why. A signal's exception goes on to the
program (interrupts.py). How it is loaded, and why: docs/record.md, "Key adapters".
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import os
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from graph_harness.capture.errors import UsageError
from graph_harness.capture.record.interrupts import raised_by_signals
from graph_harness.capture.text import printable

ENTRY_POINT_GROUP = "graph_harness.record_keys"


@dataclass(frozen=True)
class CaptureContext:
    """What an adapter is given when a capture begins: the site's `frames` (innermost
    first, torch's capture machinery left out), the `graph` (torch.cuda.CUDAGraph)
    being captured, and its capture `index` in this process."""

    frames: list[types.FrameType]
    graph: object
    index: int

    def find(self, name: str, default: object = None) -> object:
        """The innermost frame's local `name` among the site's frames (`bs`, `self`)."""
        for f in self.frames:
            if name in f.f_locals:
                return f.f_locals[name]
        return default


KeyFn = Callable[[CaptureContext], "str | None"]


class AdapterError(UsageError, ValueError):
    """A key adapter that cannot be loaded, with what to do (a usage error: exit 2)."""


def _is_path(where: str) -> bool:
    return where.endswith(".py") or os.sep in where or "/" in where


def findable(module: str, path: list[str] | None = None) -> bool:
    """Whether `module`'s top-level package is found on `path` (default: sys.path), as
    the importer would find it, without importing anything."""
    import importlib.machinery

    top = module.split(".")[0]
    if top in sys.modules or top in sys.builtin_module_names:
        return True
    try:
        return importlib.machinery.PathFinder.find_spec(top, path or sys.path) is not None
    except (ImportError, ValueError):
        return False


def check_spec(spec: str, path: list[str] | None = None, flag: str = "--key") -> str:
    """Refuse, before a program runs, a spec that cannot name an adapter: its form, a file
    that is not there or binds no such name, a module not found on `path` (the program's
    own search path: its folder, PYTHONPATH, this Python's). The spec as every recorded
    process reads it: a file's path made absolute (a program that changes its folder
    still finds it)."""
    where, sep, name = spec.rpartition(":")
    if not sep or not where or not name.isidentifier():
        raise AdapterError(
            f"{flag} takes MODULE:FUNCTION or path/to/file.py:FUNCTION, got {spec!r}"
        )
    if not _is_path(where):
        if not findable(where, path):
            raise AdapterError(f"{flag}: no module {where!r} on the program's path")
        return spec
    path = Path(where)
    if not path.is_file():
        raise AdapterError(f"{flag}: adapter file {where!r} does not exist")
    try:
        tree = ast.parse(path.read_bytes())
    except (OSError, SyntaxError, ValueError) as e:
        raise AdapterError(f"{flag}: adapter file {where!r} cannot be read: {e}") from None
    if name not in bound_names(tree.body):
        raise AdapterError(f"{flag}: {where!r} binds no name {name!r} at its top level")
    return f"{path.resolve()}:{name}"


def bound_names(body: list[ast.stmt]) -> set[str]:
    """The names a module's top level binds: defs, classes, assignments (annotated too),
    imports (their aliases), in `if`, `try` and `with` blocks as well."""
    out: set[str] = set()
    for n in body:
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out.add(n.name)
        elif isinstance(n, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            out |= {x.id for t in targets for x in ast.walk(t) if isinstance(x, ast.Name)}
        elif isinstance(n, ast.Import | ast.ImportFrom):
            out |= {(a.asname or a.name).split(".")[0] for a in n.names}
        elif isinstance(n, ast.If | ast.Try | ast.With):
            blocks = [n.body, getattr(n, "orelse", []), getattr(n, "finalbody", [])]
            blocks += [h.body for h in getattr(n, "handlers", [])]
            for b in blocks:
                out |= bound_names(b)
    return out


def load_adapter(spec: str, flag: str = "--key") -> KeyFn:
    """`MODULE:FUNCTION` or `path/to/file.py:FUNCTION` as the callable it names."""
    check_spec(spec, flag=flag)
    where, _, name = spec.rpartition(":")
    if _is_path(where):
        path = Path(where)
        main = sys.modules.get("__main__")
        main_file = getattr(main, "__file__", None)
        if main_file and Path(main_file).resolve() == path.resolve():
            # the program's own script: its running module, not a second copy of it
            # (whose globals, the engine's forward context among them, would be others)
            fn = getattr(main, name, None)
            if not callable(fn):
                raise AdapterError(f"key adapter {spec!r}: the program has no callable {name!r}")
            return fn
        mod_name = f"graph_harness_key_adapter_{abs(hash(str(path.resolve())))}"
        module = sys.modules.get(mod_name)
        if module is None:
            loaded = importlib.util.spec_from_file_location(mod_name, path)
            if loaded is None or loaded.loader is None:
                raise AdapterError(f"key adapter file {where!r} cannot be imported")
            module = importlib.util.module_from_spec(loaded)
            sys.modules[mod_name] = module
            loaded.loader.exec_module(module)
    else:
        module = importlib.import_module(where)
    fn = getattr(module, name, None)
    if not callable(fn):
        raise AdapterError(f"key adapter {spec!r}: {where} has no callable {name!r}")
    return fn


class Lazy:
    """An adapter loaded at its first call, in the capture that needs it: a recorder
    starts while `import torch` runs, before the program (or an engine's package) has
    defined what the adapter reads. A load that fails raises at each call, which `ask`
    turns into the graph's key_note."""

    def __init__(self, load: Callable[[], KeyFn]) -> None:
        self._load = load
        self._fn: KeyFn | None = None

    def __call__(self, ctx: CaptureContext) -> str | None:
        if self._fn is None:
            self._fn = self._load()
        return self._fn(ctx)


def named_adapter(spec: str, flag: str = "--key") -> tuple[str, KeyFn]:
    """The adapter `spec` names (load_adapter's forms), loaded at its first call."""
    return spec, Lazy(lambda: load_adapter(spec, flag))


def entry_point_adapters() -> list[tuple[str, KeyFn]]:
    """The installed adapters (entry points of ENTRY_POINT_GROUP), each with its name,
    each loaded at its first call."""
    from importlib.metadata import entry_points

    try:
        eps = list(entry_points(group=ENTRY_POINT_GROUP))
    except Exception:  # a broken installation: no adapters
        return []
    return [(f"{ep.name} ({ep.value})", Lazy(ep.load)) for ep in eps]


def ask(adapters: list[tuple[str, KeyFn]], ctx: CaptureContext) -> tuple[str | None, str | None]:
    """The first key an adapter gives, and a note on any that failed. Never raises what
    an adapter raised, nor what its returned value or its exception raised as they were
    read; only what a signal handler raised while one ran (the module's notes)."""
    notes: list[str] = []
    for name, fn in adapters:
        with raised_by_signals() as signalled:
            try:
                key = _key_from(name, fn, ctx, notes)
            except BaseException as e:
                if any(e is s for s in signalled):
                    raise  # a signal handler's: the program's, not the adapter's
                notes.append(f"key adapter {name} raised {_said(e)}")
                continue
        if key is not None:
            return key, "; ".join(notes) or None
    return None, printable("; ".join(notes)) if notes else None


def _key_from(name: str, fn: KeyFn, ctx: CaptureContext, notes: list[str]) -> str | None:
    """The key `fn` gives, or None (and why, in `notes`). Only an exact `str` is a key: a
    subclass's methods are the adapter's code too, and would run as it is read."""
    got = fn(ctx)
    if got is None:
        return None
    if type(got) is not str or not got.strip():
        notes.append(f"key adapter {name} returned {type(got).__name__}, not a key (a str)")
        return None
    return printable(got)


def _said(e: BaseException) -> str:
    """`Type: message`, or a plain phrase where reading either raises."""
    try:
        return f"{type(e).__name__}: {e}"
    except BaseException:  # its class's name may be the adapter's code too
        return "an exception whose type and message could not be read"
