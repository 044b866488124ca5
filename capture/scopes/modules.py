"""Module scopes: every submodule's forward runs in a scope named by its qualified path
(`layers.3.attention`), with no change to the model.

One global forward pre-hook and forward hook, as `torch.utils.module_tracker.ModuleTracker`
follows the hierarchy, removed on exit. Depth counts the parts of the qualified name; a
container whose forward never runs is a level all the same. The hooks are two module-level
functions under the same two ids on every entry, so Dynamo's guards pass and a compiled
step does not recompile. Why, in full: docs/your-model.md, "capture/scopes/modules.py".
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import warnings
from collections import Counter

import torch
from torch import nn
from torch.nn.modules.module import (
    register_module_forward_hook,
    register_module_forward_pre_hook,
)

from graph_harness.capture.scopes.names import EVERY_LEVEL, ScopeKey
from graph_harness.capture.scopes.provenance import ProvenanceLog, collecting, qualified
from graph_harness.capture.scopes.recorder import active_recorder

_active: contextvars.ContextVar[module_scopes | None] = contextvars.ContextVar(
    "graph_harness_module_scopes", default=None
)


def module_names(module: nn.Module, depth: int | None = None) -> dict[nn.Module, str]:
    """Each submodule of `module` (not the root) to its qualified name, down to `depth`.
    A module reachable by two paths (shared, tied) keeps the first, as named_modules does.
    A submodule compiled on its own (`layers[3] = torch.compile(block)`) keeps its name:
    the wrapper is `layers.3` and the `_orig_mod` inside it is named as if unwrapped, so its
    compiled nodes land in `layers.3` (Dynamo traces the scopes inside it away)."""
    if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int) or depth < 1):
        raise ValueError(
            f"depth must be an int >= 1 (parts of a qualified name: layers.3 is 2, "
            f"model.layers.3 is 3) or None for every level, got {depth!r}"
        )
    out: dict[nn.Module, str] = {}
    for raw, m in module.named_modules():
        name = qualified(raw.split("."))
        if name and m not in out and (depth is None or name.count(".") + 1 <= depth):
            out[m] = name
    return out


def repeated_blocks(module: nn.Module) -> str | None:
    """The qualified name of the model's repeated blocks' container (`layers`,
    `model.layers`), or None: the shallowest module with two or more children of one
    class that has submodules of its own (a decoder layer, not a Linear). One row per
    block is the default depth of the tables (its depth + 1)."""
    best: tuple[int, str] | None = None
    for raw, m in module.named_modules():
        name = qualified(raw.split("."))
        kids = [getattr(c, "_orig_mod", c) for c in m.children()]
        kinds = Counter(type(c) for c in kids if next(c.children(), None) is not None)
        if kinds and max(kinds.values()) >= 2:
            depth = name.count(".") + 1 if name else 0
            if best is None or depth < best[0]:
                best = (depth, name)
    return None if best is None else best[1]


def block_depth(blocks: str | None) -> int | None:
    """The depth of one row per block inside the container `blocks` (None: none found)."""
    if blocks is None:
        return None
    return (blocks.count(".") + 1 if blocks else 0) + 1


# --- the two global hooks, the same functions under the same ids on every entry ----------

_lock = threading.Lock()
_handles: list = []  # [pre, post]: made once per process, their ids reused
_entered = 0


def _pre_hook(mod: nn.Module, args: tuple[object, ...]) -> None:
    if torch.compiler.is_compiling():  # first: Dynamo traces nothing else of ours
        return
    ms = _active.get()
    if ms is not None:
        ms._pre(mod)


def _post_hook(mod: nn.Module, args: tuple[object, ...], output: object) -> None:
    if torch.compiler.is_compiling():
        return
    ms = _active.get()
    if ms is not None:
        ms._post(mod)


def _install() -> None:
    global _entered
    with _lock:
        if not _handles:
            _handles.extend(
                [
                    register_module_forward_pre_hook(_pre_hook),
                    register_module_forward_hook(_post_hook),
                ]
            )
        elif _entered == 0:
            for handle, hook in zip(_handles, (_pre_hook, _post_hook)):
                hooks = handle.hooks_dict_ref()
                if hooks is not None:
                    hooks[handle.id] = hook
        _entered += 1


def _uninstall() -> None:
    global _entered
    with _lock:
        _entered -= 1
        if _entered == 0:
            for handle in _handles:
                handle.remove()


class module_scopes:
    """Within this context, every submodule of `module` (down to `depth` parts of its
    qualified name; None: every level) runs inside a `capture.scope` named by its qualified
    path; scopes nest as the modules do, containers included.

        with capture.module_scopes(model):
            export = capture.capture_and_count(step)

    No scope opens inside a compiled region: its nodes reach their modules through
    Inductor's provenance (process-wide while open: one module_scopes at a time). `depth`
    and compiled code in full: docs/your-model.md, "module_scopes(module, depth)"."""

    def __init__(self, module: nn.Module, depth: int | None = None) -> None:
        if not isinstance(module, nn.Module):
            raise TypeError(
                f"module_scopes needs the model (a torch.nn.Module), got {type(module).__name__}"
            )
        self.module = module  # the model (a failed capture is diagnosed by its modules)
        self.depth = depth
        self.names = module_names(module, depth)
        self.all_names = module_names(module)
        self.known = set(self.all_names.values())  # every level: resolves paths
        self.blocks = repeated_blocks(module)
        # the code Dynamo compiles for this model: its modules' forwards (provenance reuse)
        self.codes = {
            f.__code__
            for m in module.modules()
            if (f := getattr(type(m), "forward", None)) is not None and hasattr(f, "__code__")
        }
        self.provenance: ProvenanceLog | None = None
        self._open = set(self.names.values())
        self._calls: list[tuple[nn.Module, list[ScopeKey]]] = []
        self._entered = False

    @property
    def recorded_depth(self) -> int | str:
        """What an export records as `module_depth`: the depth cut, or "every level"."""
        return EVERY_LEVEL if self.depth is None else self.depth

    def _pre(self, mod: nn.Module) -> None:
        name = self.all_names.get(mod)
        rec = active_recorder()
        if name is None or rec is None:
            return
        parts = name.split(".")
        opened = []
        for i in range(1, len(parts) + 1):
            label = ".".join(parts[:i])
            key = ScopeKey(None, label)
            if label in self._open and (i == len(parts) or key not in rec.stack):
                rec.open(key)
                opened.append(key)
        self._calls.append((mod, opened))

    def _post(self, mod: nn.Module) -> None:
        rec = active_recorder()
        if rec is None or not any(m is mod for m, _ in self._calls):
            return
        while self._calls:
            m, opened = self._calls.pop()
            if m is mod:
                for key in reversed(opened):
                    rec.close(key)
                return

    def __enter__(self) -> module_scopes:
        if self._entered:
            raise RuntimeError("module_scopes is already entered; use one `with` at a time")
        _install()
        try:
            self._collect = collecting()
            self.provenance = self._collect.__enter__()
            # Our global hooks make torch warn that a compiled module's hooks fire twice:
            # ours ignore the OptimizedModule wrapper (it has no name here): noise.
            self._warnings = warnings.catch_warnings()
            self._warnings.__enter__()
            warnings.filterwarnings("ignore", message=r"Using `torch.compile\(module\)` when there")
        except BaseException:
            _uninstall()
            raise
        self._entered = True
        self._token = _active.set(self)
        return self

    def __exit__(self, *exc: object) -> bool:
        _active.reset(self._token)
        self._warnings.__exit__(*exc)
        self._collect.__exit__(*exc)
        _uninstall()
        self._entered = False
        self._calls.clear()
        return False


def active_module_scopes() -> module_scopes | None:
    """The module_scopes context open in this thread or task, if any."""
    return _active.get()


def install_hooks() -> None:
    """Install the two global hooks for a while without a module_scopes (a recorded
    program's module scopes: capture/scopes/program.py); `uninstall_hooks` after."""
    _install()


def uninstall_hooks() -> None:
    _uninstall()


def activate(scopes: object) -> contextvars.Token | None:
    """Make `scopes` (an object with `_pre(mod)` and `_post(mod)`: a recorded capture's
    CaptureModules) what the global hooks call, unless a module_scopes is already open
    here (then it names the modules: None is returned and nothing changes)."""
    if _active.get() is not None:
        return None
    return _active.set(scopes)


def deactivate(token: contextvars.Token | None) -> None:
    """Undo `activate` (a token from another context is dropped: the capture ended in a
    task other than the one it began in, and that task's context dies with it)."""
    if token is None:
        return
    with contextlib.suppress(ValueError):
        _active.reset(token)
