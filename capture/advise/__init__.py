"""The fusion advisor: from any export, what could become one node, grouped, priced and
ranked, and set against measured savings where the costs hold them.

- advice.py: advise() and its document, Advice (`capture.advise.advise`)
- candidates.py: where nodes could become one (chains, copies after a kernel)
- groups.py: identical candidates grouped and priced
- measured.py: predictions against measured savings, as workloads register them
- hooks.py: what a workload registers (its own chains, its measured savings)
- costs.py: per-node costs, from a replay document or the built-in table
- delta_price.py: a node delta (of two exports, or two recordings) priced

May import: capture.export, capture.attribution, capture.replay (its documents and
pricing), capture.graph (node kinds), capture.record (a delta of two recordings, priced).
Nothing of the built-in round: it registers what it adds (capture/advise/hooks.py).
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {"advise": "advice", "Advice": "advice"}
__all__ = ["Advice", "advise"]


def __getattr__(name: str) -> Any:
    # `capture.advise.advise(export)` without importing pandas until it is called for.
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    globals()[name] = value
    return value
