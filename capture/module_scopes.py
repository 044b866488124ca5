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

import torch
from graph_harness.capture.scopes import ScopeKey, active_recorder
from torch import nn
from torch.nn.modules.module import (
    register_module_forward_hook,
    register_module_forward_pre_hook,
)


def module_names(module: nn.Module, depth: int | None = None) -> dict[nn.Module, str]:
    """Each submodule of `module` (not the root) to its qualified name, down to `depth`.
    A module reachable by two paths (shared, tied) keeps the first, as named_modules does."""
    if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int) or depth < 1):
        raise ValueError(
            f"depth must be an int >= 1 (parts of a qualified name: layers.3 is 2) or None "
            f"for every level, got {depth!r}"
        )
    return {
        m: name
        for name, m in module.named_modules()
        if name and (depth is None or name.count(".") + 1 <= depth)
    }


class module_scopes:
    """Within this context, every submodule of `module` (down to `depth`) runs inside a
    `capture.scope` named by its qualified path; scopes nest as the modules do.

        with capture.module_scopes(model, depth=2):
            export = capture.capture_and_count(step)

    Like `capture.scope`, a no-op while nothing is recording and while torch.compile
    traces (a compiled module's own submodules are then attributed to the scope open
    around the compiled call, or by Inductor's provenance where that is read)."""

    def __init__(self, module: nn.Module, depth: int | None = None) -> None:
        if not isinstance(module, nn.Module):
            raise TypeError(
                f"module_scopes needs the model (a torch.nn.Module), got {type(module).__name__}"
            )
        self.names = module_names(module, depth)
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
        return self

    def __exit__(self, *exc) -> bool:
        for h in self._handles:
            h.remove()
        self._handles = []
        return False
