"""Module scopes: every submodule's forward runs in a scope named by its qualified path
(`layers.3.attention`), with no change to the model.

Built the way `torch.utils.module_tracker.ModuleTracker` (which FlopCounterMode uses)
follows the module hierarchy: one global forward pre-hook and one global forward hook
(`torch.nn.modules.module.register_module_forward_pre_hook` / `..._forward_hook`), removed
on exit, so the model itself never carries a hook. ModuleTracker is not used directly: it
keeps an unordered set of names and offers no call at entry and exit, where a scope has to
record its boundary (and, on a capturing stream, the capture's frontier).

Depth counts the parts of the qualified name: `layers` is 1, `layers.3` is 2 (a
ModuleList is a level), `layers.3.attention` is 3. The root module opens no scope; its own
work lands in whatever scope is open around the call.
"""

from __future__ import annotations

import contextvars
import warnings

import torch
from torch import nn
from torch.nn.modules.module import (
    register_module_forward_hook,
    register_module_forward_pre_hook,
)

from graph_harness.capture.provenance import ProvenanceLog, collecting
from graph_harness.capture.scopes import ScopeKey, active_recorder

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
            f"depth must be an int >= 1 (parts of a qualified name: layers.3 is 2) or None "
            f"for every level, got {depth!r}"
        )
    out: dict[nn.Module, str] = {}
    for raw, m in module.named_modules():
        name = ".".join(p for p in raw.split(".") if p != "_orig_mod")
        if name and m not in out and (depth is None or name.count(".") + 1 <= depth):
            out[m] = name
    return out


class module_scopes:
    """Within this context, every submodule of `module` (down to `depth`) runs inside a
    `capture.scope` named by its qualified path; scopes nest as the modules do.

        with capture.module_scopes(model, depth=2):
            export = capture.capture_and_count(step)

    Like `capture.scope`, its hooks do nothing while nothing is recording and while
    torch.compile traces: no scope opens inside a compiled region. Its nodes still reach
    their modules through Inductor's kernel provenance (capture/provenance.py) for every
    compile that happens inside this context (the warm-up of a step compiled lazily, as
    `torch.compile` does): each generated kernel and extern call goes to the module its
    FX nodes came from, a kernel fused across modules to their deepest common module (its
    node carries `fused_modules`). While open, Inductor compiles with provenance tracking
    on and its caches off (process-wide: one module_scopes at a time; see
    capture/provenance.py). A step compiled before the context was entered keeps its
    compiled nodes in the innermost scope open around the compiled call, and the export's
    options say so (`compiled_attribution`)."""

    def __init__(self, module: nn.Module, depth: int | None = None) -> None:
        if not isinstance(module, nn.Module):
            raise TypeError(
                f"module_scopes needs the model (a torch.nn.Module), got {type(module).__name__}"
            )
        self.module = module  # the model (a failed capture is diagnosed by its modules)
        self.names = module_names(module, depth)
        self.known = set(module_names(module).values())  # every level: resolves paths
        self.provenance: ProvenanceLog | None = None
        self._handles: list = []

    def _pre(self, mod: nn.Module, args) -> None:
        if torch.compiler.is_compiling():
            return
        name = self.names.get(mod)
        rec = active_recorder()
        if name is not None and rec is not None:
            rec.open(ScopeKey(None, name))

    def _post(self, mod: nn.Module, args, output) -> None:
        if torch.compiler.is_compiling():
            return
        name = self.names.get(mod)
        rec = active_recorder()
        if name is not None and rec is not None:
            rec.close(ScopeKey(None, name))

    def __enter__(self) -> module_scopes:
        if self._handles:
            raise RuntimeError("module_scopes is already entered; use one `with` at a time")
        self._handles = [
            register_module_forward_pre_hook(self._pre),
            register_module_forward_hook(self._post),
        ]
        try:
            self._collect = collecting()
            self.provenance = self._collect.__enter__()
            # Our global hooks make torch warn that a compiled module's hooks fire twice:
            # ours ignore the OptimizedModule wrapper (it has no name here): noise.
            self._warnings = warnings.catch_warnings()
            self._warnings.__enter__()
            warnings.filterwarnings("ignore", message=r"Using `torch.compile\(module\)` when there")
        except BaseException:
            for h in self._handles:
                h.remove()
            self._handles = []
            raise
        self._token = _active.set(self)
        return self

    def __exit__(self, *exc) -> bool:
        _active.reset(self._token)
        self._warnings.__exit__(*exc)
        self._collect.__exit__(*exc)
        for h in self._handles:
            h.remove()
        self._handles = []
        return False


def active_module_scopes() -> module_scopes | None:
    """The module_scopes context open in this thread or task, if any."""
    return _active.get()
