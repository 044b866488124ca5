"""What a capture under module_scopes records of it: its options (depth, repeated blocks),
and compiled nodes moved into their modules by Inductor's provenance, said in words."""

from __future__ import annotations

from graph_harness.capture.attribution.node import Node
from graph_harness.capture.attribution.provenance_match import refine
from graph_harness.capture.scopes.modules import block_depth, module_scopes


def module_options(ms: module_scopes | None) -> dict[str, object]:
    """What an export records of the module_scopes it was captured under (none: null)."""
    if ms is None:
        return {"module_depth": None}
    return {
        "module_depth": ms.recorded_depth,
        "blocks": ms.blocks,
        "block_depth": block_depth(ms.blocks),
    }


def compiled_attribution(
    nodes: list[Node], ms: module_scopes, codes: set[object], *, compiled: bool
) -> str | None:
    """Compiled nodes into their modules by Inductor's provenance, in place; what was done,
    in words (None: nothing compiled was seen). The graphs matched are those compiled
    under this module_scopes and those kept from earlier captures of the same code that
    Dynamo still runs (capture/scopes/provenance_cache.py)."""
    log = ms.provenance
    if log is None or not log.supported:
        if not compiled:
            return None
        why = log.unavailable if log is not None else "module_scopes was not entered"
        return f"enclosing scope (no provenance: {why})"
    if not compiled and not log.graphs:  # an eager step: nothing of a compile to place
        return None
    graphs, reused, unkept = log.graphs_for(codes)
    if not graphs:
        if unkept:
            return (
                "enclosing scope (no provenance: the step's compiled code was compiled under "
                f"module_scopes, but its provenance could not be kept for reuse: {unkept[0]})"
            )
        return (
            "enclosing scope (no provenance: the step's compiled code was compiled before "
            "any module_scopes, so none was recorded; compile or first call it inside one)"
        )
    how = refine(nodes, graphs, set(ms.names.values()), ms.known)
    fresh = len(graphs) - reused
    kept = f"; {len(unkept)} earlier compiles' provenance not kept ({unkept[0]})" if unkept else ""
    return (
        f"inductor provenance of {len(graphs)} compiled graphs ({fresh} compiled under this "
        f"module_scopes, {reused} kept from an earlier one{kept}): {how['kernel']} nodes by "
        f"kernel name, {how['extern'] + how['externs'] + how['edge']} extern-call nodes by "
        f"position ({how['externs']} shared among calls, {how['edge']} at a compiled call's "
        f"edges), {how['fused']} fused across modules"
    )
