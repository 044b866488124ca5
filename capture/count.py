"""Entry points: capture and count any callable (the built-in round's: capture/round/count.py).

On CUDA the work is captured into a graph and every node read back from the driver
(source "cuda-graph"). Without CUDA the same work runs eagerly on the CPU and its
dispatched operations are counted (source "cpu-dispatch"), never passed off as a graph.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from graph_harness.capture.attribution.provenance_match import refine
from graph_harness.capture.attribution.records import nodes_from_dispatch, nodes_from_graph
from graph_harness.capture.environment import environment, now
from graph_harness.capture.export.nodes import NodeExport
from graph_harness.capture.graph.capture import Captured, capture_graph, warm_up
from graph_harness.capture.graph.compiled import (
    CPU_HINT,
    CompiledStepError,
    is_dispatch_mode_refusal,
    refuse_uncountable,
)
from graph_harness.capture.graph.dispatch import DispatchCounter
from graph_harness.capture.graph.reader import read_graph
from graph_harness.capture.graph.settings import StepSettings
from graph_harness.capture.scopes.modules import active_module_scopes, block_depth, module_scopes
from graph_harness.capture.scopes.recorder import Recorder, recording
from graph_harness.capture.state.steps import StateWatch
from graph_harness.capture.text import printable
from graph_harness.pools import GraphBufferPool


def default_device() -> torch.device:
    return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


def capture_and_count(
    fn: Callable[[], object],
    *,
    warmup: int = StepSettings.warmup,
    pool: GraphBufferPool | None = None,
    device: torch.device | str | None = None,
    graph_pool=None,
    name: str | None = None,
    module: torch.nn.Module | None = None,
    depth: int | None = None,
) -> NodeExport:
    """Capture any callable (see capture_and_keep) and export its nodes."""
    return capture_and_keep(
        fn,
        warmup=warmup,
        pool=pool,
        device=device,
        graph_pool=graph_pool,
        name=name,
        module=module,
        depth=depth,
    )[0]


def capture_and_keep(
    fn: Callable[[], object],
    *,
    warmup: int = StepSettings.warmup,
    pool: GraphBufferPool | None = None,
    device: torch.device | str | None = None,
    graph_pool=None,
    name: str | None = None,
    watch: StateWatch | None = None,
    module: torch.nn.Module | None = None,
    depth: int | None = None,
) -> tuple[NodeExport, Captured | None]:
    """Capture any callable (a model's decode step, say) and export its nodes.

    `fn` takes no arguments and must only touch static buffers (carve them from `pool`,
    which is frozen here before capture). It is called `warmup` times, then once more
    captured (on the CPU: counted); with a `step.reset` (capture/state/steps.py), reset before
    each warm-up and once at the end. `watch` (a StateWatch of `fn`) also tells from the
    warm-ups whether it repeats (`watch.repeatability`). Use `capture.scope(step, stage)`
    inside it, and `module=model` (the capture runs inside `module_scopes(model, depth)`)
    or `capture.module_scopes(model)` around this call, to attribute nodes; unscoped
    nodes get scope "unscoped". torch.compile'd code in `fn` is counted on CUDA
    and refused on the CPU, and `mode="reduce-overhead"` everywhere (capture/graph/compiled.py):
    both raise CompiledStepError saying what to do. Returns the export and, on CUDA, the
    kept graph it was read from (None on the CPU).

    `name` names the workload in the export and its tables (the CLI passes the target,
    `llama_decode.py:make_step`); without it, `callable:` and the callable's qualified
    name. The export's options record `warmup` and, under module_scopes, the depth it was
    scoped to (`module_depth`: an int, or "every level") and the model's repeated blocks
    (`blocks`, `block_depth`: the default depth of the tables)."""
    if module is None:
        return _capture(fn, warmup, pool, device, graph_pool, name, watch)
    with module_scopes(module, depth=depth):
        return _capture(fn, warmup, pool, device, graph_pool, name, watch)


def _capture(fn, warmup, pool, device, graph_pool, name, watch):
    warmup = StepSettings(warmup=warmup).warmup  # checked where the default lives
    device = torch.device(device) if device is not None else default_device()
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise ValueError(f"name must be a non-empty str (the workload's name), got {name!r}")
    watch = watch if watch is not None else StateWatch(fn, watch=False)
    compiled = refuse_uncountable(fn, device.type)
    if pool is not None:
        pool.freeze()
    workload = name or f"callable:{getattr(fn, '__qualname__', None) or type(fn).__name__}"
    workload = printable(workload)  # a file's name can hold a lone surrogate (capture/text.py)
    options: dict = {"compiled": bool(compiled), "warmup": warmup}
    ms = active_module_scopes()
    options.update(module_options(ms))
    if device.type == "cuda":
        captured = capture_graph(fn, warmup=warmup, graph_pool=graph_pool, watch=watch)
        nodes = nodes_from_graph(read_graph(captured.graph.raw_cuda_graph()), captured.marks)
        source = "cuda-graph"
        if ms is not None:
            codes = ms.codes | {c.code for c in compiled if c.code is not None}
            how = compiled_attribution(nodes, ms, codes, compiled=bool(compiled))
            if how is not None:
                options["compiled_attribution"] = how
    else:
        warm_up(fn, warmup, watch)
        watch.before_capture()
        captured, nodes = None, count_dispatch(fn)
        source = "cpu-dispatch"
    watch.finish(warmup)
    export = NodeExport(
        source=source,
        workload=workload,
        variant=None,
        params=None,
        nodes=nodes,
        env=environment(device),
        created=now(),
        options=options,
    )
    return export, captured


def empty_cause(fn, device: torch.device | str | None = None) -> str:
    """Why a capture of `fn` held no node, in words: a step whose tensors all live on the
    CPU on a GPU machine did its work there, which a CUDA graph never records; any other
    issued none."""
    from graph_harness.capture.state.fingerprint import reachable

    device = torch.device(device) if device is not None else default_device()
    if device.type == "cuda":
        found, _ = reachable(fn, with_output=False)
        tensors = [(n, v) for n, v, _ in found if isinstance(v, torch.Tensor)]
        on_cpu = [n for n, v in tensors if v.device.type == "cpu"]
        if on_cpu and not any(v.is_cuda for _, v in tensors):
            return (
                f"its tensors are on the CPU ({on_cpu[0]} and {len(on_cpu) - 1} more), so it "
                "ran there and a CUDA graph recorded none of it: build the model and its "
                "buffers on the GPU (model.to('cuda'), device='cuda') in the factory"
            )
    return (
        "its step issued no work (0 nodes); it must launch the work to count, not only prepare it"
    )


def module_options(ms) -> dict:
    """What an export records of the module_scopes it was captured under (none: null)."""
    if ms is None:
        return {"module_depth": None}
    return {
        "module_depth": ms.recorded_depth,
        "blocks": ms.blocks,
        "block_depth": block_depth(ms.blocks),
    }


def compiled_attribution(nodes: list[dict], ms, codes: set, *, compiled: bool) -> str | None:
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


def count_dispatch(fn: Callable[[], object]) -> list[dict]:
    try:
        with recording(Recorder()), DispatchCounter() as counter:
            fn()
    except Exception as e:
        if is_dispatch_mode_refusal(e):  # compiled code refuse_uncountable could not reach
            raise CompiledStepError(f"the step {CPU_HINT}") from e
        raise
    return nodes_from_dispatch(counter.records)
