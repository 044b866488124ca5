"""A call made once a module's import completes: what a recorder sets up for a library the
program may never import (Inductor, whose import takes a second or more) waits for it.

The same hook as graph_harness/_record_boot/sitecustomize.py's for torch: a finder first
on sys.meta_path that, asked for the module, leaves sys.meta_path, finds its spec as the
import system would, and wraps its loader's `exec_module` so the call follows the
module's own code."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable


def when_imported(name: str, call: Callable[[], None]) -> Callable[[], None]:
    """`call()` once module `name` is imported: now, where it is already in sys.modules;
    else right after its import's own code has run (in the importing thread). `call`
    must not raise: an exception would fail the program's import. Returns a function that
    takes back a call not made yet."""
    if name in sys.modules:
        call()
        return lambda: None
    finder = _AfterImport(name, call)
    sys.meta_path.insert(0, finder)
    return finder.leave


class _AfterImport:
    def __init__(self, name: str, call: Callable[[], None]) -> None:
        self.name = name
        self.call = call

    def leave(self) -> None:
        if self in sys.meta_path:
            sys.meta_path.remove(self)

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> object:
        if fullname != self.name:
            return None
        self.leave()  # once; the search below must not find this finder again
        spec = importlib.util.find_spec(fullname)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        original = loader.exec_module
        call = self.call

        def exec_module(module: object) -> None:
            original(module)
            call()

        loader.exec_module = exec_module
        return spec
