"""Module scopes in a program nobody named the model of: `graph-harness record
--module-scopes`.

The model is found where a capture begins: the outermost `nn.Module` any frame on the
Python stack is a method of (else one an object on the stack holds, else the first module
called inside the capture) is the root, every module named by its path in it. Nothing is
tracked outside captures; a module not part of the root opens no scope. How the root is
found: docs/your-model.md, "capture/scopes/program.py".
"""

from __future__ import annotations

import types
import weakref

from torch import nn

from graph_harness.capture.scopes.modules import module_names, repeated_blocks
from graph_harness.capture.scopes.recorder import Recorder, ScopeKey

_names: weakref.WeakKeyDictionary[nn.Module, dict[nn.Module, str]] = weakref.WeakKeyDictionary()


def names_of(root: nn.Module) -> dict[nn.Module, str]:
    """Every submodule of `root` by its qualified name (every level), made once per root."""
    got = _names.get(root)
    if got is None:
        got = module_names(root)
        _names[root] = got
    return got


_CALLS = ("forward", "_call_impl", "_wrapped_call_impl")  # a module's call, running


def running_modules(frames: list[types.FrameType]) -> tuple[nn.Module | None, list[nn.Module]]:
    """The root (the outermost module any frame in `frames`, innermost first, is a method
    of: HF's model under its own `generate()`) and the modules whose call is running,
    outermost first, each once."""
    root, out = None, []
    for f in reversed(frames):
        code = f.f_code
        # only a method's frame is read (f_locals keeps a snapshot of a frame's locals
        # alive until the frame returns, on Python before 3.13: not of every frame)
        if not (code.co_argcount and code.co_varnames[0] == "self"):
            continue
        me = f.f_locals.get("self")
        if not isinstance(me, nn.Module):
            continue
        if root is None:
            root = me
        if f.f_code.co_name in _CALLS and not any(m is me for m in out):
            out.append(me)
    return root, out


def held_models(frames: list[types.FrameType]) -> list[nn.Module]:
    """The `nn.Module` attributes of the objects whose methods are running in `frames`
    (innermost first), outermost first, each once: an engine's `self.model`. Only a
    method's `self` is read (as running_modules reads it), and only its own attributes."""
    out: list[nn.Module] = []
    for f in reversed(frames):
        code = f.f_code
        if not (code.co_argcount and code.co_varnames[0] == "self"):
            continue
        me = f.f_locals.get("self")
        if isinstance(me, nn.Module):
            continue
        try:
            attrs = list(vars(me).values())
        except TypeError:  # no __dict__ (slots, builtins)
            continue
        out += [v for v in attrs if isinstance(v, nn.Module) and not any(v is m for m in out)]
    return out


class CaptureModules:
    """One capture's module scopes (the object modules.py's global hooks call while the
    capture is recorded): opens a scope per module called inside it, named in `root`."""

    def __init__(self, recorder: Recorder, frames: list[types.FrameType]) -> None:
        self.recorder = recorder
        root, running = running_modules(frames)
        self.root: nn.Module | None = root
        self.names = names_of(root) if root is not None else {}
        self._held = held_models(frames) if root is None else []
        self._calls: list[tuple[nn.Module, list[ScopeKey]]] = []
        self._base: list[ScopeKey] = []
        for m in running:  # already inside them: their scopes open at the start
            self._base += self._open(m)

    @property
    def blocks(self) -> str | None:
        return repeated_blocks(self.root) if self.root is not None else None

    @property
    def known(self) -> set[str]:
        return set(self.names.values())

    def _open(self, mod: nn.Module) -> list[ScopeKey]:
        name = self.names.get(mod)
        if name is None:
            return []
        rec, opened = self.recorder, []
        parts = name.split(".")
        for i in range(1, len(parts) + 1):
            key = ScopeKey(None, ".".join(parts[:i]))
            if i == len(parts) or key not in rec.stack:
                rec.open(key)
                opened.append(key)
        return opened

    # The interface modules.py's hooks call (as they call module_scopes'). They run in the
    # program's forward: they never raise into it. A scope that cannot be recorded (the
    # capture was invalidated, or ended where these did not hear of it) ends the
    # recording of scopes for this capture, and `broken` says why.
    broken: str | None = None

    def _pre(self, mod: nn.Module) -> None:
        if self.broken is not None:
            return
        try:
            if self.root is None:  # nothing ran around the capture (module docstring)
                self.root = next((m for m in self._held if mod in names_of(m)), mod)
                self.names, self._held = names_of(self.root), []
            self._calls.append((mod, self._open(mod)))
        except Exception as e:
            self.broken = f"{type(e).__name__}: {e}"

    def _post(self, mod: nn.Module) -> None:
        if self.broken is not None or not any(m is mod for m, _ in self._calls):
            return
        try:
            while self._calls:
                m, opened = self._calls.pop()
                if m is mod:
                    for key in reversed(opened):
                        self.recorder.close(key)
                    return
        except Exception as e:
            self.broken = f"{type(e).__name__}: {e}"
