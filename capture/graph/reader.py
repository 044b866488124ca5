"""Reading a captured CUDA graph through cuda-bindings: nodes, kinds, kernel names, edges,
and the capture's dependency frontier (for attributing nodes to scopes).

Counts come from the graph itself (`cudaGraphGetNodes`), never from Python bookkeeping.
Child graphs are walked recursively; their nodes are listed with their parent's index.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any

import torch

from graph_harness.capture.errors import HarnessError

if TYPE_CHECKING:
    from cuda.bindings.driver import CUDA_KERNEL_NODE_PARAMS

_NODE_KINDS = {
    "cudaGraphNodeTypeKernel": "kernel",
    "cudaGraphNodeTypeMemcpy": "memcpy",
    "cudaGraphNodeTypeMemset": "memset",
    "cudaGraphNodeTypeHost": "host",
    "cudaGraphNodeTypeGraph": "graph",
    "cudaGraphNodeTypeEmpty": "empty",
    "cudaGraphNodeTypeWaitEvent": "wait_event",
    "cudaGraphNodeTypeEventRecord": "event_record",
    "cudaGraphNodeTypeExtSemaphoreSignal": "ext_semaphore_signal",
    "cudaGraphNodeTypeExtSemaphoreWait": "ext_semaphore_wait",
    "cudaGraphNodeTypeMemAlloc": "mem_alloc",
    "cudaGraphNodeTypeMemFree": "mem_free",
    "cudaGraphNodeTypeConditional": "conditional",
    "cudaGraphNodeTypeMemcpyBatch": "memcpy_batch",
    "cudaGraphNodeTypeExternalEngine": "external_engine",
}


class GraphReadError(HarnessError, RuntimeError):
    """A cuda-bindings call failed while reading a graph."""


def _bindings() -> tuple[ModuleType, ModuleType]:
    """cuda.bindings' runtime and driver modules."""
    try:
        from cuda.bindings import driver, runtime
    except ImportError as e:  # pragma: no cover - exercised only on CUDA machines
        raise GraphReadError(
            "reading graph nodes needs cuda-bindings: pip install 'graph-harness[cuda]' "
            "(cuda-bindings matching your CUDA driver)"
        ) from e
    return runtime, driver


def _ok(result: tuple[Any, ...], what: str) -> list[Any]:
    """What a cuda-bindings call returned after its error code (a tuple of the binding's
    own objects), the code checked."""
    err, *rest = result
    if int(err) != 0:
        raise GraphReadError(f"{what} failed: {err!r}")
    return rest


@dataclass
class RawNode:
    """One node as the driver reports it. `handle` is the node's address (a stable key)."""

    handle: int
    kind: str
    kernel: str = ""
    grid: tuple[int, int, int] | None = None
    block: tuple[int, int, int] | None = None
    parent: int | None = None  # handle of the child-graph node holding it, if any
    deps: list[int] = field(default_factory=list)  # handles of its dependencies
    programmatic_deps: list[int] = field(default_factory=list)  # PDL edges among deps
    # a kernel's identity: its CUfunction (else CUkernel) handle. Not its name: two
    # modules (two Triton compiles, say) may each define a kernel of one name
    function: int = 0


def read_graph(raw_graph: int, *, parent: int | None = None) -> list[RawNode]:
    """Every node of the graph at address `raw_graph`, child graphs' nodes after their
    parent, in the driver's order."""
    rt, drv = _bindings()
    (_, n) = _ok(rt.cudaGraphGetNodes(raw_graph), "cudaGraphGetNodes(count)")
    nodes, n = _ok(rt.cudaGraphGetNodes(raw_graph, numNodes=n), "cudaGraphGetNodes")
    nodes = nodes[:n]
    (_, _, _, m) = _ok(rt.cudaGraphGetEdges(raw_graph), "cudaGraphGetEdges(count)")
    deps: dict[int, list[int]] = {int(x): [] for x in nodes}
    pdl: dict[int, list[int]] = {int(x): [] for x in nodes}
    if m:
        frm, to, edata, m = _ok(rt.cudaGraphGetEdges(raw_graph, numEdges=m), "cudaGraphGetEdges")
        for a, b, e in zip(frm[:m], to[:m], edata[:m]):
            deps[int(b)].append(int(a))
            if int(e.type) != 0 or int(e.from_port) != 0:
                pdl[int(b)].append(int(a))
    kernel_type = rt.cudaGraphNodeType.cudaGraphNodeTypeKernel
    child_type = rt.cudaGraphNodeType.cudaGraphNodeTypeGraph
    out: list[RawNode] = []
    for node in nodes:
        h = int(node)
        (ntype,) = _ok(rt.cudaGraphNodeGetType(node), "cudaGraphNodeGetType")
        rec = RawNode(h, _NODE_KINDS.get(ntype.name, ntype.name), parent=parent)
        rec.deps, rec.programmatic_deps = deps[h], pdl[h]
        if ntype == kernel_type:
            (params,) = _ok(drv.cuGraphKernelNodeGetParams(h), "cuGraphKernelNodeGetParams")
            rec.kernel = _kernel_name(drv, params)
            rec.function = int(params.func) or int(params.kern)
            rec.grid = (params.gridDimX, params.gridDimY, params.gridDimZ)
            rec.block = (params.blockDimX, params.blockDimY, params.blockDimZ)
        out.append(rec)
        if ntype == child_type:
            (child,) = _ok(rt.cudaGraphChildGraphNodeGetGraph(node), "ChildGraphNodeGetGraph")
            out.extend(read_graph(int(child), parent=h))
    return out


def demangle(name: str | None) -> str:
    """A kernel's C++ name as CUPTI reports it and tables show it (torch's demangler, as
    Kineto's); a name that is not a mangled symbol (Triton's are plain) or that the
    demangler cannot read stays as it is, and no name is ""."""
    if not name or not name.startswith("_Z"):
        return name or ""
    try:
        return torch._C._demangle(name)
    except Exception:  # a symbol the demangler does not know
        return name


def _kernel_name(drv: ModuleType, params: CUDA_KERNEL_NODE_PARAMS) -> str:
    if int(params.func):
        err, name = drv.cuFuncGetName(params.func)
        if int(err) == 0:
            return name.decode() if isinstance(name, bytes) else str(name)
    if int(params.kern):
        err, name = drv.cuKernelGetName(params.kern)
        if int(err) == 0:
            return name.decode() if isinstance(name, bytes) else str(name)
    return "<unknown>"


def capture_frontier(stream: torch.cuda.Stream | None = None) -> list[int]:
    """The node handles the next captured operation on `stream` will depend on.

    Read at a scope boundary, it splits the graph: a scope's nodes are the ancestors of
    its end frontier minus the ancestors of its begin frontier."""
    rt, _ = _bindings()
    stream = stream or torch.cuda.current_stream()
    status, _id, _graph, deps, _edata, n = _ok(
        rt.cudaStreamGetCaptureInfo(stream.cuda_stream), "cudaStreamGetCaptureInfo"
    )
    if status != rt.cudaStreamCaptureStatus.cudaStreamCaptureStatusActive:
        raise GraphReadError(f"stream {stream} is not capturing (status {status!r})")
    return [int(d) for d in deps[:n]]


def read_capturing(stream: torch.cuda.Stream) -> list[RawNode]:
    """Every node of the graph `stream` is capturing into now (as read_graph), read while
    the capture is open: cudaStreamGetCaptureInfo gives the graph under construction,
    which the driver lets a reader walk until the capture ends (only destroying it and
    removing nodes are not allowed). What a recorder reads just before a capture ends,
    whatever the graph's keep_graph."""
    rt, _ = _bindings()
    status, _id, graph, _deps, _edata, _n = _ok(
        rt.cudaStreamGetCaptureInfo(stream.cuda_stream), "cudaStreamGetCaptureInfo"
    )
    if status != rt.cudaStreamCaptureStatus.cudaStreamCaptureStatusActive:
        raise GraphReadError(f"the stream is not capturing (status {status!r})")
    return read_graph(int(graph))


def tools_ids(handles: list[int]) -> list[int] | None:
    """Each node's id as profilers report it (cudaGraphNodeGetToolsId: its graph's id in
    the upper 32 bits, the node's local id in the lower), or None where the driver or
    cuda-bindings does not offer it (it came with CUDA 13.1)."""
    rt, _ = _bindings()
    get = getattr(rt, "cudaGraphNodeGetToolsId", None)
    if get is None:
        return None
    out = []
    for h in handles:
        try:
            err, value = get(h)
        except Exception:  # a binding that cannot find the driver's entry point
            return None
        if int(err) != 0:  # cudaErrorCallRequiresNewerDriver on an older driver
            return None
        out.append(int(value))
    return out


_MEMORY_TYPES = {0: "unregistered", 1: "host", 2: "device", 3: "managed"}  # cudaMemoryType
_COPY_KINDS = {0: "HostToHost", 1: "HostToDevice", 2: "DeviceToHost", 3: "DeviceToDevice"}
_COPY_KINDS[4] = "Default"  # cudaMemcpyKind: the direction inferred from the pointers


@dataclass(frozen=True)
class MemcpyParams:
    """A memcpy node's copy: its direction as captured (`HostToDevice`, `DeviceToDevice`,
    `Default`, ...), its two addresses, its size, and what kind of memory each address
    is (cudaPointerGetAttributes: "host" is pinned or registered host memory,
    "unregistered" pageable host memory, "device", "managed", or "unknown")."""

    direction: str
    src: int
    dst: int
    nbytes: int
    src_memory: str
    dst_memory: str

    @property
    def from_host(self) -> bool:
        return self.direction == "HostToDevice" or self.src_memory in ("host", "unregistered")

    @property
    def to_host(self) -> bool:
        return self.direction == "DeviceToHost" or self.dst_memory in ("host", "unregistered")


def memory_type(ptr: int) -> str:
    """What kind of memory `ptr` points into (cudaPointerGetAttributes), without reading it."""
    rt, _ = _bindings()
    if not ptr:
        return "unknown"
    err, attr = rt.cudaPointerGetAttributes(ptr)
    if int(err) != 0:
        return "unknown"
    return _MEMORY_TYPES.get(int(attr.type), str(attr.type))


def memcpy_params(handle: int) -> MemcpyParams:
    """The copy a memcpy node (by handle, as in RawNode) makes at every replay."""
    rt, _ = _bindings()
    try:
        got = rt.cudaGraphMemcpyNodeGetParams(handle)
    except TypeError:  # a binding that wants its handle type, not an int
        got = rt.cudaGraphMemcpyNodeGetParams(rt.cudaGraphNode_t(handle))
    (p,) = _ok(got, "cudaGraphMemcpyNodeGetParams")
    src, dst = int(p.srcPtr.ptr), int(p.dstPtr.ptr)
    e = p.extent
    nbytes = int(e.width) * max(1, int(e.height)) * max(1, int(e.depth))
    kind = _COPY_KINDS.get(int(p.kind), str(p.kind))
    return MemcpyParams(kind, src, dst, nbytes, memory_type(src), memory_type(dst))
