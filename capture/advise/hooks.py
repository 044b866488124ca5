"""What a workload adds to the advisor, registered where the workload is defined (as chain
kinds are, capture/replay/kinds.py): the advisor itself knows no workload.

`@own_chains`: given an export, a function from a step to the chain kind that replays its
own call, or None; `@measured_savings`: given an export, its groups and the costs, the
measured savings (measured.py Comparison) and notes, or ([], []). The built-in round's
`register` (capture/round/advice.py) is called by name on first use (BUILTIN), as a
plugin's is (docs/advise.md, "What a workload registers"). Plain data at import.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from graph_harness.capture.advise.costs import Costs
    from graph_harness.capture.advise.groups import Group
    from graph_harness.capture.advise.measured import Comparison
    from graph_harness.capture.export.nodes import NodeExport

StepChain = Callable[[str], "str | None"]  # a step -> the chain kind replaying its call
OwnChains = Callable[["NodeExport"], "StepChain | None"]
MeasuredSavings = Callable[
    ["NodeExport", "list[Group]", "Costs"], "tuple[list[Comparison], list[str]]"
]

# The registrations that ship with graph-harness, "module:function", called on first use.
BUILTIN = ("graph_harness.capture.round.advice:register",)

_OWN_CHAINS: dict[str, OwnChains] = {}  # by qualified name: a module imported again
_MEASURED: dict[str, MeasuredSavings] = {}  # replaces its entries, never doubles them


def _key(fn: Callable) -> str:
    return f"{fn.__module__}.{fn.__qualname__}"


def own_chains(fn: OwnChains) -> OwnChains:
    """Register `fn` (see the module docstring)."""
    _OWN_CHAINS[_key(fn)] = fn
    return fn


def measured_savings(fn: MeasuredSavings) -> MeasuredSavings:
    """Register `fn` (see the module docstring)."""
    _MEASURED[_key(fn)] = fn
    return fn


def _load_builtin() -> None:
    for name in BUILTIN:
        module, function = name.split(":")
        getattr(importlib.import_module(module), function)()


def step_chains(export: NodeExport) -> StepChain | None:
    """The first registered answer for `export`: which chain replays each step's call."""
    _load_builtin()
    return next((f for f in (g(export) for g in _OWN_CHAINS.values()) if f is not None), None)


def measured_comparers() -> tuple[MeasuredSavings, ...]:
    _load_builtin()
    return tuple(_MEASURED.values())
