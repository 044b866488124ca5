"""A recorded capture's compiled code attributed to its modules: Inductor's provenance,
matched to the nodes (under --module-scopes), and the frames Dynamo compiles for a model."""

from __future__ import annotations

from typing import Any

PROVENANCE: list = [None]  # the process's Inductor provenance log under --module-scopes


def unset_attribute(nodes: list, modules: Any) -> None:
    """No compiled-code attribution (a recording without module scopes)."""
    return None


def attribute_compiled(nodes: list, modules: Any) -> str | None:
    """Compiled code's nodes moved into the modules Inductor's provenance names (a
    recorded capture's module scopes: capture/scopes/program.py); what was done, in words
    (None: nothing compiled was matched)."""
    from graph_harness.capture.attribution.provenance_match import refine
    from graph_harness.capture.scopes.provenance_cache import offered

    log = PROVENANCE[0]
    if log is None or not nodes:
        return None  # no module scopes
    # compiled in the recording, then compiled before it under module scopes (a count's,
    # kept: capture/scopes/provenance_cache.py) from the forward of a module of this
    # capture's model, whose code still runs: a recording that starts mid-process
    # (record_graphs) replays code compiled before it
    graphs = [*log.graphs, *offered(forwards(model_of(modules)), exclude=log.graphs).graphs]
    if not graphs:
        return None  # nothing compiled (or no provenance, said once for the process)
    if not modules.names:
        return "enclosing scope (no module was running around the capture to name them)"
    how = refine(nodes, graphs, set(modules.names.values()), set(modules.known))
    matched = how["kernel"] + how["extern"] + how["externs"] + how["edge"]
    if not matched:
        return f"enclosing scope (none of the {len(graphs)} compiled graphs' kernels matched)"
    return (
        f"inductor provenance of the program's compiled graphs: {how['kernel']} nodes by "
        f"kernel name, {how['extern'] + how['externs'] + how['edge']} extern-call nodes by "
        f"position, {how['fused']} fused across modules"
    )


def model_of(modules: Any) -> list:
    """Every module of the capture's model, its root included: `names` leaves the root
    out (its scope is the enclosing one), yet the root's forward is the frame Dynamo
    compiles for `torch.compile(model)` (the wrapper's `_orig_mod`, or HF's model under
    its own generate()); a wrapper's `_orig_mod` stands for it."""
    root = getattr(modules, "root", None)
    root = getattr(modules, "module", None) if root is None else root
    out = [*modules.names, *([root] if root is not None else [])]
    return [*out, *(m._orig_mod for m in out if getattr(m, "_orig_mod", None) is not None)]


def forwards(modules: Any) -> set:
    """The code objects of the modules' `forward`s (a decorator's and the function it
    wraps): the frames Dynamo compiles for a model."""
    import inspect

    out = set()
    for cls in {type(m) for m in modules}:
        fn = getattr(cls, "forward", None)
        for f in (fn, inspect.unwrap(fn) if callable(fn) else None):
            code = getattr(f, "__code__", None)
            if code is not None:
                out.add(code)
    return out
