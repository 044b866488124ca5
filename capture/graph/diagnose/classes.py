"""Why a capture failed, in words: the class of a failure, decided from what was seen.

Evidence, best first (watch.py records it): the ATen op that raised, its arguments bound
to its schema (`OpSeen`); the torch call that raised outside any op (`CallSeen`); the
exception itself (type, message, frames). What torch does for each class (`.item()`,
`nonzero`, blocking copies, list indices, unpinned host copies), and which message is
relied on: docs/capture-failures.md, "The classes, and torch's reasons".

No CUDA is needed here: every decision is a function of plain records (tests build them).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass(frozen=True)
class TensorSeen:
    device: str  # "cuda", "cpu", ...
    dtype: str  # "torch.bool", ...
    dim: int
    pinned: bool = False  # CPU tensors only


@dataclass(frozen=True)
class OpSeen:
    """An ATen op, its arguments by schema name (tensors as TensorSeen, tensor lists as
    tuples of them, other values as given when plain, else their type's name)."""

    name: str  # "aten.nonzero" (no overload)
    args: dict = field(default_factory=dict)
    returns_host_value: bool = False  # its schema returns a bool, int, float or Scalar


@dataclass(frozen=True)
class CallSeen:
    """A torch API call (a torch function) that raised outside any ATen op."""

    name: str  # "Tensor.__getitem__", "torch.tensor", "Tensor.item"
    devices: tuple[str, ...] = ()  # of its tensor arguments, and a device= keyword
    python_data: bool = False  # an argument is a Python list or tuple of numbers


@dataclass(frozen=True)
class FailureClass:
    key: str
    words: str  # the class, in words
    fix: str  # what to do


def _c(key: str, words: str, fix: str) -> FailureClass:
    return FailureClass(key, words, fix)


SYNC = _c(
    "sync",
    "a synchronizing call (it waits for the GPU, which a capturing stream cannot)",
    "move it out of the step; a copy must be non_blocking=True from pinned memory",
)
READBACK = _c(
    "readback",
    "a value read back to the host (.item(), .cpu(), .tolist(), printing a CUDA tensor, "
    "Python control flow on one)",
    "keep the value on the GPU (torch.where, masks) or read it before capture",
)
PAGEABLE = _c(
    "pageable-copy",
    "a copy from pageable host memory (a CPU tensor that is not pinned)",
    "copy from a pinned tensor (tensor.pin_memory(), made once outside the step) with "
    "non_blocking=True; the graph then reads that host buffer at every replay",
)
DATA_DEPENDENT = _c(
    "data-dependent",
    "a data-dependent shape (nonzero, boolean masks, unique, masked_select, ...: the "
    "output's size is read back to the host)",
    "use a fixed-size form (torch.nonzero_static, torch.where, masked_fill) or move it "
    "before capture",
)
CPU_TENSOR = _c(
    "cpu-tensor",
    "a CPU tensor in the step (torch copies it to the GPU from pageable memory at every call)",
    "make it a GPU tensor once, outside the step",
)
LIST_INDEX = _c(
    "cpu-tensor",
    "a CPU tensor in the step: Python data (a list index such as x[:, [i]], or "
    "torch.tensor(list, device=...)) becomes a CPU tensor copied to the GPU at every call",
    "index with a slice (x[:, i:i+1]) or a GPU tensor made once outside the step",
)
COLLECTIVE = _c(
    "collective",
    "a collective outside the capture stream (it runs on its process group's stream, "
    "watched from another thread)",
    "capture with capture_error_mode='thread_local' and a process group that supports "
    "capture (NCCL), or keep the collective out of the graph",
)
FROZEN_POOL = _c(
    "frozen-pool",
    "an allocation from a frozen GraphBufferPool (a graph may already hold its addresses)",
    "carve every buffer before freeze()",
)
SIDE_STREAM = _c(
    "side-stream",
    "work forked onto another stream and not joined back to the capture stream",
    "make the capture stream wait for it (torch.cuda.current_stream().wait_stream(side)) "
    "before the step returns",
)
LEGACY_STREAM = _c(
    "legacy-stream",
    "work on the legacy default stream, which cannot take part in a capture",
    "issue it on torch.cuda.current_stream(), not torch.cuda.default_stream()",
)
ISOLATION = _c(
    "isolation",
    "a wait on work outside the capture (an event recorded before it began)",
    "record the event inside the captured work, or wait for it before capture",
)
STEP_CODE = _c(
    "step-code",
    "an error raised by the step's own code during capture (it ran in the warm-up)",
    "see the traceback (--debug); torch.cuda.is_current_stream_capturing() is true here",
)
FORBIDDEN = _c(
    "forbidden",
    "a call a capturing stream forbids",
    "inside a capture nothing may synchronize, read a value back to the host or copy "
    "from pageable memory; move that work out of the step",
)

COLLECTIVE_NAMESPACES = ("c10d", "_c10d_functional", "c10d_functional", "_dtensor", "symm_mem")
DATA_DEPENDENT_OPS = {
    "aten.nonzero",
    "aten.nonzero_numpy",
    "aten.argwhere",
    "aten.masked_select",
    "aten.unique_dim",
    "aten.unique_consecutive",
    "aten.unique_dim_consecutive",
    "aten._unique",
    "aten._unique2",
    "aten.bincount",
}
# Ops a step may dispatch on the CPU that break its capture on a GPU: a value read back
# to the host (`.item()`, `.tolist()`, a Python `if` on a tensor), or a data-dependent shape.
HOST_READ_OPS = {"aten._local_scalar_dense", "aten.is_nonzero", "aten.equal"} | DATA_DEPENDENT_OPS
_INDEXING = {"aten.index", "aten.index_put", "aten.index_put_", "aten._index_put_impl_"}
COPY_OPS = {"aten.copy_", "aten._to_copy", "aten._copy_from", "aten._copy_from_and_resize"}
READBACK_CALLS = {
    "item",
    "tolist",
    "numpy",
    "cpu",
    "__bool__",
    "__int__",
    "__float__",
    "__index__",
    "__complex__",
    "__repr__",
    "__str__",
    "__format__",
}
DATA_CALLS = {"tensor", "as_tensor", "asarray"}
INDEX_CALLS = {"__getitem__", "__setitem__"}


def _tensors(value: object) -> list[TensorSeen]:
    if isinstance(value, TensorSeen):
        return [value]
    if isinstance(value, tuple | list):
        return [t for v in value for t in _tensors(v)]
    return []


def _copy_ends(op: OpSeen) -> tuple[TensorSeen | None, str | None, bool]:
    """(source tensor, destination device, non_blocking) of a copy op."""
    a = op.args
    non_blocking = bool(a.get("non_blocking", False))
    if op.name == "aten.copy_":
        return a.get("src"), getattr(a.get("self"), "device", None), non_blocking
    if op.name == "aten._to_copy":  # device= is the destination; none: a dtype change
        src, device = a.get("self"), a.get("device")
        dst = device if isinstance(device, str) else getattr(src, "device", None)
        return src, dst, non_blocking
    return a.get("self"), getattr(a.get("dst"), "device", None), non_blocking


def classify_op(op: OpSeen) -> FailureClass | None:
    """The class of a failure raised inside `op`, from the op and its arguments."""
    if op.name.split(".")[0] in COLLECTIVE_NAMESPACES:
        return COLLECTIVE
    tensors = _tensors(tuple(op.args.values()))
    on_gpu = any(t.device == "cuda" for t in tensors)
    if op.name in COPY_OPS:
        src, dst, non_blocking = _copy_ends(op)
        if src is not None and src.device == "cpu" and dst == "cuda":
            if not src.pinned:
                return PAGEABLE
            return None if non_blocking else SYNC  # blocking: memcpy_and_sync
        if src is not None and src.device == "cuda" and dst == "cpu":
            return READBACK
        return None
    if op.returns_host_value:  # .item(), torch.equal, bool(t): hands the host a value
        return READBACK
    if op.name in DATA_DEPENDENT_OPS:
        return DATA_DEPENDENT
    if op.name == "aten.repeat_interleave" and op.args.get("output_size") is None:
        return DATA_DEPENDENT
    if op.name in _INDEXING and any(
        t.dtype in ("torch.bool", "torch.uint8") for t in _tensors(op.args.get("indices"))
    ):
        return DATA_DEPENDENT  # a boolean mask index is a nonzero inside
    if on_gpu and any(t.device == "cpu" and t.dim > 0 for t in tensors):
        return CPU_TENSOR  # 0-dim CPU tensors are legal: they travel as kernel arguments
    return None


def classify_call(call: CallSeen) -> FailureClass | None:
    """The class of a failure raised inside a torch API call but outside any ATen op."""
    short = call.name.rpartition(".")[2]
    if short in READBACK_CALLS and "cuda" in call.devices:
        return READBACK
    if short in INDEX_CALLS and call.python_data:
        return LIST_INDEX
    if short in DATA_CALLS and call.python_data:
        return LIST_INDEX
    return None


# CUDA's words for the stream-capture errors (cudaGetErrorString), and torch's own.
_MESSAGES = (
    ("unless the CPU tensor is pinned", PAGEABLE),
    ("fork that was not joined", SIDE_STREAM),
    ("capture sequence contains a fork", SIDE_STREAM),
    ("legacy stream depend on a capturing blocking stream", LEGACY_STREAM),
    ("dependency created on uncaptured work", ISOLATION),
)
INVALIDATED = "operation failed due to a previous error during capture"
FORBIDDEN_WORDS = ("operation not permitted when stream is capturing", "capture")


def chain(exc: BaseException | None) -> Iterator[BaseException]:
    """`exc`, then its causes and contexts (each once)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def frames(exc: BaseException) -> list[tuple[str, str]]:
    """(file, qualified function) of every frame `exc` passed through, outermost first."""
    out, tb = [], exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        name = getattr(code, "co_qualname", code.co_name)  # Python 3.11+: Class.method
        out.append((code.co_filename.replace("\\", "/"), name))
        tb = tb.tb_next
    return out


_SYNC_CALLS = ("synchronize", "query", "elapsed_time")


def call_in_frames(exc: BaseException) -> tuple[str, FailureClass] | None:
    """A synchronizing torch.cuda call or a torch.distributed call the failure passed
    through: (its name, its class)."""
    for e in chain(exc):
        seen = frames(e)
        for file, func in reversed(seen):  # the innermost synchronizing call
            if "/torch/cuda/" in file and func.rpartition(".")[2] in _SYNC_CALLS:
                return f"torch.cuda.{func}", SYNC
        for file, func in seen:  # the outermost: the API the step called
            if "/torch/distributed/" in file:
                return f"torch.distributed.{func.rpartition('.')[2]}", COLLECTIVE
    return None


def classify_error(exc: BaseException) -> FailureClass | None:
    """The class of a failure from the exception alone, where it says enough."""
    for e in chain(exc):
        if type(e).__name__ == "PoolFrozen":
            return FROZEN_POOL
        text = str(e)
        for words, cls in _MESSAGES:
            if words in text:
                return cls
    found = call_in_frames(exc)
    if found is not None:
        return found[1]
    return None


def is_invalidated(exc: BaseException | None) -> bool:
    """The capture had already been broken by an earlier call: the op that raised this is
    not the one to blame."""
    return any(INVALIDATED in str(e) for e in chain(exc))


def is_capture_failure(exc: BaseException | None) -> bool:
    """Whether `exc` looks like a capture refusing a call (CUDA's or torch's words, or a
    class the exception names), rather than any other error."""
    if exc is None:
        return False
    if classify_error(exc) is not None:
        return True
    return any(
        any(w in str(e) for w in FORBIDDEN_WORDS) or "CUDA error" in str(e) for e in chain(exc)
    )
