"""Each kernel node of a kept graph as it will launch: its function (the handle, its
identity) and its launch attributes, read back through cudaGraphKernelNodeGetAttribute.

An executable's nodes cannot be read back: what is read is the graph it was instantiated
from and the graph it was updated to (capture/check/updated_launches.py compares them).
Each value is kept as the attribute union's bytes, compared whole; an attribute the driver
refuses to report is kept as unreadable, with its code. Which attributes, and why two are
not read: docs/sweep.md, "Launch attributes".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import ModuleType

from graph_harness.capture.graph.reader import read_graph

# Not read: each names an event of its own capture (module docstring)
SKIPPED = ("Ignore", "ProgrammaticEvent", "LaunchCompletionEvent")
_OWN_BYTES = {"DeviceUpdatableKernelNode": 4}  # its `int deviceUpdatable` alone
# the union's field that shows each attribute in words (the bytes are what is compared)
_FIELDS = {
    "AccessPolicyWindow": "accessPolicyWindow",
    "Cooperative": "cooperative",
    "SynchronizationPolicy": "syncPolicy",
    "ClusterDimension": "clusterDim",
    "ClusterSchedulingPolicyPreference": "clusterSchedulingPolicyPreference",
    "ProgrammaticStreamSerialization": "programmaticStreamSerializationAllowed",
    "Priority": "priority",
    "MemSyncDomainMap": "memSyncDomainMap",
    "MemSyncDomain": "memSyncDomain",
    "PreferredClusterDimension": "preferredClusterDim",
    "PreferredSharedMemoryCarveout": "sharedMemCarveout",
    "NvlinkUtilCentricScheduling": "nvlinkUtilCentricScheduling",
    "PortableClusterSizeMode": "portableClusterSizeMode",
    "SharedMemoryMode": "sharedMemoryMode",
}


@dataclass(frozen=True)
class Attribute:
    """One launch attribute of one node: its bytes and its value in words, or, where the
    driver would not report it, `unreadable` (the driver's code)."""

    raw: bytes = b""
    shown: str = ""
    unreadable: str | None = None


@dataclass(frozen=True)
class KernelLaunch:
    """One kernel node: its place among the graph's nodes (the driver's order), its
    kernel's name and function handle, and its attributes by name (`ClusterDimension`)."""

    index: int
    kernel: str
    function: int
    attributes: dict[str, Attribute] = field(default_factory=dict)


@dataclass(frozen=True)
class GraphLaunches:
    """A graph's node count and kinds (in the driver's order), its kernel nodes, and its
    nodes' handles (to name the node a driver's answer names)."""

    kinds: tuple[str, ...]
    kernels: list[KernelLaunch]
    handles: tuple[int, ...] = ()

    @property
    def nodes(self) -> int:
        return len(self.kinds)

    def named(self, handle: int | None) -> str | None:
        """The node at `handle` in words ("node 12, a kernel: gemv"), None if not ours."""
        if handle is None or handle not in self.handles:
            return None
        i = self.handles.index(handle)
        kernel = next((k.kernel for k in self.kernels if k.index == i), None)
        return f"node {i}, a {self.kinds[i]}" + (f": {kernel}" if kernel else "")


def attribute_names(rt: ModuleType) -> list[str]:
    """The attributes this cuda-bindings knows, without their `cudaLaunchAttribute` prefix,
    those that are not read left out (module docstring)."""
    names = [m.name.removeprefix("cudaLaunchAttribute") for m in rt.cudaLaunchAttributeID]
    return [n for n in names if n not in SKIPPED]


def graph_launches(raw_graph: int) -> GraphLaunches:
    """Every kernel node of the graph at address `raw_graph` (child graphs' too, after
    their parent, as read_graph lists them), with its function and attributes."""
    from cuda.bindings import runtime as rt

    nodes = read_graph(raw_graph)
    names = attribute_names(rt)
    kernels = [
        KernelLaunch(i, n.kernel, n.function, {a: _read(rt, n.handle, a) for a in names})
        for i, n in enumerate(nodes)
        if n.kind == "kernel"
    ]
    return GraphLaunches(tuple(n.kind for n in nodes), kernels, tuple(n.handle for n in nodes))


def _read(rt: ModuleType, handle: int, name: str) -> Attribute:
    which = getattr(rt.cudaKernelNodeAttrID, f"cudaLaunchAttribute{name}", None)
    if which is None:
        which = getattr(rt.cudaLaunchAttributeID, f"cudaLaunchAttribute{name}")
    try:
        err, value = rt.cudaGraphKernelNodeGetAttribute(handle, which)
    except TypeError:  # a binding that wants its handle type, not an int
        err, value = rt.cudaGraphKernelNodeGetAttribute(rt.cudaGraphNode_t(handle), which)
    if int(err) != 0:
        rt.cudaGetLastError()  # the refusal is ours, not the next launch's
        return Attribute(unreadable=getattr(err, "name", str(err)))
    raw = bytes(value.pad)
    return Attribute(raw=raw[: _OWN_BYTES.get(name, len(raw))], shown=_shown(value, name, raw))


def _shown(value: object, name: str, raw: bytes) -> str:
    """The value in words: the union's field for it, else its bytes in hex."""
    try:
        v = getattr(value, _FIELDS[name])
    except (KeyError, ValueError, AttributeError):  # a field or member the bindings lack
        return "0x" + (raw.rstrip(b"\0").hex() or "0")
    if all(hasattr(v, k) for k in "xyz"):
        return f"({v.x}, {v.y}, {v.z})"
    if hasattr(v, "name") or isinstance(v, int | float):
        return _word(v)
    fields = [k for k in dir(v) if not k.startswith("_") and k != "getPtr"]
    return ", ".join(f"{k}={_word(getattr(v, k))}" for k in fields)


def _word(v: object) -> str:
    return getattr(v, "name", None) or str(v)
