"""Entry points: capture and count any callable (the built-in round's: capture/round/count.py).

On CUDA the work is captured into a graph and every node read back from the driver
(source "cuda-graph"). Without CUDA the same work runs eagerly on the CPU and its
dispatched operations are counted (source "cpu-dispatch"), never passed off as a graph.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from graph_harness.capture.attribution.compiled import compiled_attribution, module_options
from graph_harness.capture.attribution.records import nodes_from_dispatch, nodes_from_graph
from graph_harness.capture.environment import environment, now
from graph_harness.capture.errors import HarnessError
from graph_harness.capture.export.nodes import Node, NodeExport
from graph_harness.capture.graph.capture import (
    Captured,
    CaptureErrorMode,
    WarmupWatch,
    capture_graph,
    warm_up,
)
from graph_harness.capture.graph.compiled import (
    CPU_HINT,
    CompiledStepError,
    is_dispatch_mode_refusal,
    refuse_uncountable,
)
from graph_harness.capture.graph.dispatch import DispatchCounter
from graph_harness.capture.graph.memory import (
    AllocationLog,
    PoolMemory,
    ScopeBytes,
    can_tag_allocations,
    pool_memory,
)
from graph_harness.capture.graph.reader import read_graph
from graph_harness.capture.graph.settings import StepSettings
from graph_harness.capture.record.steps import RecordedStep, combined_export, record_step
from graph_harness.capture.scopes.modules import active_module_scopes, module_scopes
from graph_harness.capture.scopes.recorder import Recorder, recording
from graph_harness.capture.state.steps import StateWatch
from graph_harness.capture.text import printable
from graph_harness.pools import GraphBufferPool


def default_device() -> torch.device:
    return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


class EmptyStepError(HarnessError, RuntimeError):
    """A capture that holds no node: the step issued no work on the device counted (or all
    of its tensors live on the CPU of a GPU machine); the message says which (exit 1)."""


@dataclass(frozen=True, kw_only=True)
class GraphMemory:
    """A captured graph's memory: its pool's segments just after capture, and (where this
    torch tags allocations) what each scope allocated there (capture/graph/memory.py)."""

    pool: PoolMemory
    by_scope: list[ScopeBytes] | None  # None: this torch cannot tag allocations
    history: list[dict] | None = None  # the pool's allocator history (AllocationLog)


@dataclass(frozen=True, kw_only=True)
class Counted:
    """What a capture gives: the export, and on CUDA the kept graph it was read from (its
    buffers are the step's: keep the step alive while replaying it); None on the CPU and
    for a step that captures its own graphs (`recorded`: those graphs, recorded).
    `memory`: the graph's memory, when asked for and on CUDA."""

    export: NodeExport
    captured: Captured | None
    memory: GraphMemory | None = None
    recorded: RecordedStep | None = None


def capture_and_count(
    fn: Callable[[], object],
    *,
    warmup: int = StepSettings.warmup,
    pool: GraphBufferPool | None = None,
    device: torch.device | str | None = None,
    graph_pool: tuple[int, int] | None = None,
    name: str | None = None,
    watch: StateWatch | None = None,
    module: torch.nn.Module | None = None,
    depth: int | None = None,
    stream: torch.cuda.Stream | None = None,
    own_graphs: bool = True,
) -> NodeExport:
    """Capture any callable and export its nodes: `capture_and_keep(...).export`, with its
    keywords (all but `memory`, whose figures an export does not hold); a step compiled
    with `mode="reduce-overhead"` is counted by recording its own graphs (`own_graphs`)."""
    return capture_and_keep(
        fn,
        warmup=warmup,
        pool=pool,
        device=device,
        graph_pool=graph_pool,
        name=name,
        watch=watch,
        module=module,
        depth=depth,
        stream=stream,
        own_graphs=own_graphs,
    ).export


def capture_and_keep(
    fn: Callable[[], object],
    *,
    warmup: int = StepSettings.warmup,
    pool: GraphBufferPool | None = None,
    device: torch.device | str | None = None,
    graph_pool: tuple[int, int] | None = None,
    name: str | None = None,
    watch: StateWatch | None = None,
    module: torch.nn.Module | None = None,
    depth: int | None = None,
    memory: bool = False,
    stream: torch.cuda.Stream | None = None,
    own_graphs: bool = False,
) -> Counted:
    """Capture any callable (a model's decode step, say) and export its nodes.

    `fn` takes no arguments and must only touch static buffers (carve them from `pool`, frozen
    here before capture). It is called `warmup` times, then once more captured (on the CPU:
    counted), reset around them where it has a `step.reset`. Nodes are attributed by
    `capture.scope` and `module=` (else "unscoped"). Returns the export and, on CUDA, the kept
    graph it was read from (Counted); EmptyStepError where the capture holds no node. Compiled
    code, `own_graphs`, `name`, `memory`, `stream`, `watch`: docs/your-model.md, "From Python:
    `capture_and_keep` and `count_step`"."""
    args = (fn, warmup, pool, device, graph_pool, name, watch, memory, stream, own_graphs)
    if module is None:
        return _capture(*args)
    with module_scopes(module, depth=depth):
        return _capture(*args)


def capture_nodes(
    fn: Callable[[], object],
    device: torch.device,
    *,
    warmup: int,
    graph_pool: tuple[int, int] | None = None,
    watch: WarmupWatch | None = None,
    capture_error_mode: CaptureErrorMode = "global",
    allocations: AllocationLog | None = None,
    stream: torch.cuda.Stream | None = None,
) -> tuple[list[Node], Captured | None]:
    """The one capture core, for a user's step and the built-in round alike (syncs): warm
    `fn` up `warmup` times (`watch` around each call); then on CUDA capture one call and
    read its nodes back from the driver, on the CPU run it once counting its dispatched
    operations. The nodes, and the kept graph (None on the CPU)."""
    if device.type == "cuda":
        captured = capture_graph(
            fn,
            warmup=warmup,
            graph_pool=graph_pool,
            watch=watch,
            capture_error_mode=capture_error_mode,
            allocations=allocations,
            stream=stream,
        )
        return nodes_from_graph(
            read_graph(captured.graph.raw_cuda_graph()), captured.marks
        ), captured
    warm_up(fn, warmup, watch)
    if watch is not None:
        watch.before_capture()
    return count_dispatch(fn), None


def source_of(device: torch.device) -> str:
    """What an export's nodes are, by the device they were counted on."""
    return "cuda-graph" if device.type == "cuda" else "cpu-dispatch"


def _capture(
    fn: Callable[[], object],
    warmup: int,
    pool: GraphBufferPool | None,
    device: torch.device | str | None,
    graph_pool: tuple[int, int] | None,
    name: str | None,
    watch: StateWatch | None,
    memory: bool = False,
    stream: torch.cuda.Stream | None = None,
    own_graphs: bool = False,
) -> Counted:
    warmup = StepSettings(warmup=warmup).warmup  # checked where the default lives
    device = torch.device(device) if device is not None else default_device()
    workload = _workload_name(fn, name)
    watch = watch if watch is not None else StateWatch(fn, watch=False)
    compiled = refuse_uncountable(fn, device.type, own_graphs=own_graphs)
    if pool is not None:
        pool.freeze()
    options: dict = {"compiled": bool(compiled), "warmup": warmup}
    ms = active_module_scopes()
    options.update(module_options(ms))
    if any(c.cudagraphs for c in compiled):  # its own graphs: recorded, not captured
        return _count_recorded(fn, warmup, watch, workload, options, ms, compiled, device)
    log = AllocationLog() if memory and device.type == "cuda" and can_tag_allocations() else None
    nodes, captured = capture_nodes(
        fn,
        device,
        warmup=warmup,
        graph_pool=graph_pool,
        watch=watch,
        allocations=log,
        stream=stream,
    )
    if captured is not None and ms is not None:
        codes = ms.codes | {c.code for c in compiled if c.code is not None}
        how = compiled_attribution(nodes, ms, codes, compiled=bool(compiled))
        if how is not None:
            options["compiled_attribution"] = how
    watch.finish(warmup)
    if not nodes:
        raise EmptyStepError(empty_cause(fn, device))
    export = NodeExport(
        source=source_of(device),
        workload=workload,
        variant=None,
        params=None,
        nodes=nodes,
        env=environment(device),
        created=now(),
        options=options,
    )
    held = _graph_memory(captured, log) if memory and captured is not None else None
    return Counted(export=export, captured=captured, memory=held)


def _workload_name(fn: Callable[[], object], name: str | None) -> str:
    """The workload's name in an export: `name` (a non-empty str, else ValueError), or
    `callable:` and the callable's qualified name."""
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise ValueError(f"name must be a non-empty str (the workload's name), got {name!r}")
    workload = name or f"callable:{getattr(fn, '__qualname__', None) or type(fn).__name__}"
    return printable(workload)  # a file's name can hold a lone surrogate (capture/text.py)


def _graph_memory(captured: Captured, log: AllocationLog | None) -> GraphMemory:
    """A captured graph's memory read from its pool, by scope where allocations were
    tagged (`log`)."""
    pool_id = captured.graph.pool()
    return GraphMemory(pool=pool_memory(pool_id), by_scope=log.by_scope(pool_id) if log else None,
                       history=log.pool_history(pool_id) if log else None)  # fmt: skip


def _count_recorded(
    fn: Callable[[], object],
    warmup: int,
    watch: StateWatch,
    workload: str,
    options: dict,
    ms: module_scopes | None,
    compiled: list,
    device: torch.device,
) -> Counted:
    """A step compiled with mode="reduce-overhead", counted by recording the graphs
    Inductor captures for it (capture/record/steps.py)."""
    attribute = None
    if ms is not None:
        codes = ms.codes | {c.code for c in compiled if c.code is not None}

        def attribute(nodes: list, scopes: object) -> str | None:
            return compiled_attribution(nodes, ms, codes, compiled=True)

    got = record_step(
        fn, warm_up=lambda: warm_up(fn, warmup, watch), start=watch.start, attribute=attribute
    )
    watch.finish(warmup)
    hows = {g.export.options.get("compiled_attribution") for g in got.graphs}
    hows.discard(None)
    if hows:
        options["compiled_attribution"] = "; ".join(sorted(hows))
    export = combined_export(got, workload=workload, options=options)
    export.env = environment(device)
    if not export.total:
        raise EmptyStepError(empty_cause(fn, device))
    return Counted(export=export, captured=None, recorded=got)


def empty_cause(fn: Callable[[], object], device: torch.device | str | None = None) -> str:
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


def count_dispatch(fn: Callable[[], object]) -> list[Node]:
    try:
        with recording(Recorder()), DispatchCounter() as counter:
            fn()
    except Exception as e:
        if is_dispatch_mode_refusal(e):  # compiled code refuse_uncountable could not reach
            raise CompiledStepError(f"the step {CPU_HINT}") from e
        raise
    return nodes_from_dispatch(counter.records)
