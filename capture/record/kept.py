"""A recorded graph's node records, kept for as long as the program runs, out of the
garbage collector's way. A list stays in the collector's lists for good: five a node
(a 64-graph ladder of 200-node graphs kept 64,000 objects that every full pass walked,
and whose growth brought full passes on). A tuple of ints and strings leaves them at the
next young pass, and (before Python 3.14) so does a dict made once its values have left.
So the records are made with tuples (records.py's `frozen`), and `settle` runs a young
pass and makes each record again. Never where the program stopped collections: the
collector off, or `gc.collect` replaced (vLLM and SGLang capture with it patched out)."""

from __future__ import annotations

import gc
import sysconfig
import types

from graph_harness.capture.attribution.node import SEQUENCES, Node

# a free-threaded build has no young generation: its every pass is a full one
YOUNG_PASS = not sysconfig.get_config_var("Py_GIL_DISABLED")
# whether a dict of untracked values starts untracked (not from Python 3.14 on)
DICTS_UNTRACKED = not gc.is_tracked({"": ()})


def settle(nodes: list[Node]) -> list[Node]:
    """`nodes` made final in place (the module's notes): every list a tuple; then, where
    the program collects as usual, a young pass, and each record made again. Equal to
    the list form through node.plain. Never raises: a record is kept as it is."""
    for n in nodes:
        for k in SEQUENCES:
            v = n.get(k)
            if type(v) is list:
                n[k] = tuple(v)  # type: ignore[literal-required]
    if YOUNG_PASS and collecting():
        try:
            gc.collect(0)
        except Exception:  # kept as they are, tracked
            return nodes
        if DICTS_UNTRACKED:
            nodes[:] = [dict(n.items()) for n in nodes]  # type: ignore[misc]
    return nodes


def collecting() -> bool:
    """Whether the program collects as usual: the collector on, and `gc.collect` the
    collector's own (a program that patched it out wants no pass in its capture)."""
    c = gc.collect
    return gc.isenabled() and isinstance(c, types.BuiltinFunctionType) and c.__module__ == "gc"
