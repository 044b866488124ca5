"""What a step's state is, exactly, at one moment: every tensor and host value reachable
from the step, by a readable name, held bit for bit (small tensors) or as an exact digest
(large ones: capture/state/digest.py), so two moments can be compared.

Reachable: the step's outputs, `step.module`'s parameters, buffers and tensor attributes,
and its closure, attributes, globals and bound object, walked (bounded, first name wins).
A fingerprint's work is queued on the current stream; comparing two reads back and syncs.
The names, and what is cloned or hashed (CLONE_MAX_BYTES, CLONE_BUDGET_BYTES,
HOST_CLONE_BUDGET_BYTES): docs/steps-and-check.md, "capture/state/fingerprint.py".
"""

from __future__ import annotations

import functools
import inspect
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import torch

from graph_harness.capture.state.digest import digest
from graph_harness.capture.text import printable

CLONE_MAX_BYTES = 4 << 20  # a tensor up to this size is cloned, not hashed
CLONE_BUDGET_BYTES = 64 << 20  # clones per fingerprint kept on the device, in all
HOST_CLONE_BUDGET_BYTES = 256 << 20  # clones per fingerprint kept on the host (check's)
MAX_DEPTH = 8  # attribute, item and closure hops from a root
MAX_OBJECTS = 20_000  # objects visited per walk
MAX_ITEMS = 1_000  # items read from one list, tuple or dict
HOST = (bool, int, float)  # host values watched
_SKIP_ATTRS = {
    "module",
    "reset",
    "feed",
    "max_steps",
    "accept_host",
    "__wrapped__",
}  # the protocol's, not state


@dataclass
class Seen:
    """One watched value. `meta`: for a tensor (address, shape, strides, dtype, device),
    for a host value its type's name; `value`: the clone, the digest ([pieces, 2] int64)
    or the host value."""

    name: str
    meta: tuple
    value: object
    hashed: bool = False
    output: bool = False

    @property
    def host(self) -> bool:
        return not isinstance(self.value, torch.Tensor)


@dataclass
class Fingerprint:
    seen: dict[str, Seen] = field(default_factory=dict)
    truncated: bool = False  # the walk stopped at a bound: some state is not watched

    def tensors(self) -> int:
        return sum(not s.host for s in self.seen.values())


# --- the walk ---------------------------------------------------------------------------


def host_owners(step: Callable[[], object]) -> dict[str, type]:
    """For each host value reachable from `step`, by its name in a fingerprint, the class
    of the object that holds it (a transformers cache layer's counter: that layer's
    class), so that a finding can say whose value it is (capture/check/library_hosts.py)."""
    walk = _state_walk(step)
    return {printable(n): t for n, t in walk.owners.items()}


def host_values(step: Callable[[], object]) -> dict[str, object]:
    """The host values reachable from `step`, by name (the walk alone: no tensor read)."""
    walk = _state_walk(step)
    return {printable(n): v for n, v, _ in walk.found if isinstance(v, HOST)}


def _state_walk(step: Callable[[], object]) -> _Walk:
    """The walk over the step's state (its module, then its roots), the output left out."""
    walk = _Walk()
    module = getattr(step, "module", None)
    if isinstance(module, torch.nn.Module):
        walk.module("module", module)
    for prefix, value in _roots(step):
        walk.visit(prefix, value, 1)
    return walk


def reachable(
    step: Callable[[], object], output: object = None, *, with_output: bool = True
) -> tuple[list[tuple[str, object, bool]], bool]:
    """(name, value, is_output) for every tensor and host value reachable from `step`
    (and, last, its `output`), in a stable order; and whether a bound stopped the walk.
    The state's names do not depend on the output: an output that is also state (a
    static buffer the step returns) is listed twice, once under each name."""
    walk = _state_walk(step)
    if with_output:
        walk.ids = set()  # the output is walked afresh
        walk.visit("output", output, 0, output=True)
    # names as text (capture/text.py): a dict key or a module's name can hold a lone
    # surrogate, and these names go into check's documents and tables
    return [(printable(n), v, o) for n, v, o in walk.found], walk.truncated


def _roots(step: Callable[[], object]) -> Iterator[tuple[str, object]]:
    fn = inspect.unwrap(step) if callable(step) else step  # through functools.wraps
    if isinstance(fn, functools.partial):
        yield from ((f"argument {i}", a) for i, a in enumerate(fn.args))
        yield from ((f"argument {k}", v) for k, v in fn.keywords.items())
        fn = fn.func
    if isinstance(fn, types.MethodType):
        yield from _attributes("self", fn.__self__)
        fn = fn.__func__
    if isinstance(fn, types.FunctionType):
        yield from _closure("closure", fn)
        yield from _attributes("attribute", fn)
        code, glob = fn.__code__, fn.__globals__
        for name in code.co_names:
            if name in glob and _worth(glob[name]):
                yield f"global {name}", glob[name]
    elif not isinstance(fn, types.BuiltinFunctionType):
        yield from _attributes("attribute", fn)


def _closure(prefix: str, fn: types.FunctionType) -> Iterator[tuple[str, object]]:
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
        try:
            yield f"{prefix} {name}", cell.cell_contents
        except ValueError:  # an empty cell
            continue


def _attributes(prefix: str, obj: object) -> Iterator[tuple[str, object]]:
    try:
        d = getattr(obj, "__dict__", None)
    except Exception:  # an object whose attribute lookup misbehaves: not ours to read
        return
    if isinstance(d, dict):
        for k, v in list(d.items()):
            if isinstance(k, str) and k not in _SKIP_ATTRS and not k.startswith("__"):
                yield f"{prefix} {k}", v
    slots = getattr(type(obj), "__slots__", ())
    for k in (slots,) if isinstance(slots, str) else slots:
        if isinstance(k, str) and not k.startswith("__"):
            try:
                yield f"{prefix} {k}", getattr(obj, k)
            except AttributeError:  # a slot never set
                continue


def _worth(v: object) -> bool:
    """Worth walking into: not code, classes or modules (a global `torch` or `F`)."""
    skip = types.ModuleType | type | types.BuiltinFunctionType | types.FunctionType
    return not isinstance(v, skip)


class _Walk:
    def __init__(self) -> None:
        self.found: list[tuple[str, object, bool]] = []
        self.owners: dict[str, type] = {}  # a host value's name -> the class of what holds it
        self.ids: set[int] = set()
        self.objects = 0
        self.truncated = False

    def module(self, name: str, m: torch.nn.Module) -> None:
        if id(m) in self.ids:
            return
        self.ids.add(id(m))
        for qn, p in m.named_parameters():
            self.tensor(f"{name} parameter {qn}", p, False)
        for qn, b in m.named_buffers():
            self.tensor(f"{name} buffer {qn}", b, False)
        for qn, sub in m.named_modules():
            for k, v in vars(sub).items():  # plain tensors (a rotary cache kept unregistered)
                if isinstance(v, torch.Tensor) and not k.startswith("_"):
                    self.tensor(f"{name} attribute {qn + '.' if qn else ''}{k}", v, False)

    def tensor(self, name: str, t: torch.Tensor, output: bool) -> None:
        if id(t) not in self.ids:
            self.ids.add(id(t))
            self.found.append((name, t, output))

    def visit(self, name: str, v: object, depth: int, output: bool = False) -> None:
        if v is None or isinstance(v, str | bytes):
            return
        if isinstance(v, torch.Tensor):
            self.tensor(name, v, output)
            return
        if isinstance(v, HOST):
            self.found.append((name, v, output))
            return
        if id(v) in self.ids:
            return
        if depth >= MAX_DEPTH or self.objects >= MAX_OBJECTS:
            self.truncated = True
            return
        self.ids.add(id(v))
        self.objects += 1
        if isinstance(v, torch.nn.Module):
            self.module(name, v)
            return
        for sub, item in self._items(name, v):
            if isinstance(item, HOST):
                self.owners[sub] = type(v)
            self.visit(sub, item, depth + 1, output)

    def _items(self, name: str, v: object) -> Iterator[tuple[str, object]]:
        if isinstance(v, dict):
            items = list(v.items())
            if len(items) > MAX_ITEMS:
                self.truncated, items = True, items[:MAX_ITEMS]
            for k, item in items:
                yield f"{name}.{k}" if isinstance(k, str | int) else f"{name}[{k!r}]", item
        elif isinstance(v, list | tuple):
            if len(v) > MAX_ITEMS:
                self.truncated = True
            for i, item in enumerate(v[:MAX_ITEMS]):
                yield f"{name}.{i}", item
        elif isinstance(v, types.FunctionType):
            for sub, item in _closure("", v):
                yield f"{name}.{sub.strip()}", item
        elif _ours_to_read(v):
            for sub, item in _attributes("", v):
                yield f"{name}.{sub.strip()}", item


def _ours_to_read(v: object) -> bool:
    """An object whose attributes are the user's state: not torch's internals (a compiled
    function's dynamo context, a CUDA graph, streams), not code, classes or modules."""
    if isinstance(v, types.ModuleType | type | types.BuiltinFunctionType | types.MethodType):
        return False
    if isinstance(v, set | frozenset | range | torch.dtype | torch.device | torch.Generator):
        return False
    mod = type(v).__module__ or ""
    return not (mod == "torch" or mod.startswith(("torch.", "torch_", "builtins")))


# --- digests ----------------------------------------------------------------------------


def fingerprint(
    step: Callable[[], object],
    output: object = None,
    *,
    with_output: bool = True,
    clone_to: str | None = None,
    non_blocking: bool = False,
) -> Fingerprint:
    """The step's state (and `output`) now; see the module docstring. `clone_to`: where
    clones are kept ("cpu": off the device, so they take none of its free memory).
    `non_blocking`: the copies to `clone_to` are queued on the current stream (into
    pinned memory) instead of waited for: nothing may read the fingerprint's tensors
    before the stream is synced (check syncs once per run, not once per call)."""
    found, truncated = reachable(step, output, with_output=with_output)
    fp = Fingerprint(truncated=truncated)
    synced = not non_blocking  # a host tensor is read now: queued work must land first
    budget = HOST_CLONE_BUDGET_BYTES if clone_to else CLONE_BUDGET_BYTES
    cap = budget if clone_to else CLONE_MAX_BYTES
    for name, v, is_output in found:
        if not isinstance(v, torch.Tensor):
            fp.seen[name] = Seen(name, (type(v).__name__,), v, output=is_output)
            continue
        try:
            if v.layout != torch.strided or v.device.type == "meta":
                continue
            if not synced and v.device.type == "cpu":  # a copy queued into it, not yet done
                if torch.cuda.is_available() and torch.cuda.is_initialized():
                    torch.cuda.synchronize()
                synced = True
            meta = (v.data_ptr(), tuple(v.shape), v.stride(), v.dtype, v.device)
            nbytes = v.numel() * v.element_size()
            if nbytes <= cap and nbytes <= budget:
                budget -= nbytes
                held = (
                    v.detach().to(clone_to, copy=True, non_blocking=non_blocking)
                    if clone_to
                    else v.detach().clone()
                )
                fp.seen[name] = Seen(name, meta, held, output=is_output)
            else:
                d = digest(v)
                d = d.to(clone_to, non_blocking=non_blocking) if clone_to else d
                fp.seen[name] = Seen(name, meta, d, hashed=True, output=is_output)
        except (RuntimeError, TypeError, NotImplementedError, AttributeError):
            fp.truncated = True  # a tensor subclass with no plain storage to read
    return fp
