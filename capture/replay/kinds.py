"""Chain kinds: the units of work `replay` captures N of into one graph, to price one node.

One registry: the generic kinds (an empty Triton kernel, a torch add, a copy, a set) join
it here, with `@chain_kind`; the built-in round adds the calls of its own steps by an
explicit call, capture/round/chains.py `register` (`add_kinds`). Every list of kinds
(the command line's choices, the default set measured) is read from the registry.

Plain data at import: a kind's torch work is built inside its maker, so the command line's
parser can list the kinds without importing torch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

Call = Callable[[], object]


@dataclass(frozen=True, kw_only=True)
class ChainKind:
    """A chain kind. `make(device)` builds one call of its unit of work (inputs allocated
    once; its node count is read from the captured graph). `pdl`: launched with
    programmatic dependent launch, measured only when named. `replays`: the (round step,
    implementation) whose own call this is, for pricing that step's work."""

    name: str
    make: Callable[[torch.device], Call]
    pdl: bool = False
    replays: tuple[str, str] | None = None


_KINDS: dict[str, ChainKind] = {}


def chain_kind(
    name: str, *, pdl: bool = False, replays: tuple[str, str] | None = None
) -> Callable[[Callable[[torch.device], Call]], Callable[[torch.device], Call]]:
    """Register the decorated maker as chain kind `name`."""

    def register(make: Callable[[torch.device], Call]) -> Callable[[torch.device], Call]:
        if name in _KINDS:
            raise ValueError(f"chain kind {name!r} is registered twice")
        _KINDS[name] = ChainKind(name=name, make=make, pdl=pdl, replays=replays)
        return make

    return register


def add_kinds(*kinds: ChainKind) -> None:
    """Add `kinds` to the registry, in order: a workload's explicit registration (the
    round's: capture/round/chains.py `register`). A kind already there as given is kept, so
    a second call changes nothing; another kind of a registered name is refused."""
    for kind in kinds:
        known = _KINDS.setdefault(kind.name, kind)
        if known != kind:
            raise ValueError(f"chain kind {kind.name!r} is registered twice")


def chain_kinds(*, pdl: bool = False) -> tuple[str, ...]:
    """The registered kinds in registration order: those without PDL (what is measured by
    default), or with `pdl=True` only the PDL ones."""
    return tuple(k.name for k in _KINDS.values() if k.pdl == pdl)


def get_kind(name: str) -> ChainKind:
    try:
        return _KINDS[name]
    except KeyError:
        known = ", ".join(_KINDS)
        raise ValueError(f"unknown chain kind {name!r}; choose from {known}") from None


def kind_replaying(step: str, implementation: str) -> str | None:
    """The kind whose call is this step's own call in this implementation, if one is
    registered."""
    return next((k.name for k in _KINDS.values() if k.replays == (step, implementation)), None)


# The chain whose slope prices a node of each type: kernel nodes at the torch-add chain's
# (the removed kernels are mostly small elementwise ones), copies and sets at their own. A
# type not listed is priced as a kernel node.
TYPE_CHAIN = {"kernel": "torch-add", "memcpy": "memcpy", "memset": "memset"}


# --- the generic kinds ---------------------------------------------------------------------


def _empty(device: torch.device, *, pdl: bool) -> Call:
    import torch

    from graph_harness.kernels.empty import empty_kernel

    x = torch.empty(1, device=device)
    return lambda: empty_kernel.launch(device, (1,), x, num_warps=1, pdl=pdl)


@chain_kind("triton-empty")
def _triton_empty(device: torch.device) -> Call:
    return _empty(device, pdl=False)


@chain_kind("torch-add")
def _torch_add(device: torch.device) -> Call:
    import torch

    x = torch.zeros(1, device=device)
    return lambda: x.add_(1)


@chain_kind("memcpy")
def _memcpy(device: torch.device) -> Call:
    import torch

    src, dst = torch.randn(64, device=device), torch.empty(64, device=device)
    return lambda: dst.copy_(src)  # 256 B device-to-device: a memcpy node


@chain_kind("memset")
def _memset(device: torch.device) -> Call:
    import torch
    from cuda.bindings import runtime as rt

    buf = torch.empty(64, device=device)

    def memset() -> None:
        stream = torch.cuda.current_stream().cuda_stream
        (err,) = rt.cudaMemsetAsync(buf.data_ptr(), 0, buf.nbytes, stream)
        if int(err) != 0:
            raise RuntimeError(f"cudaMemsetAsync failed: {err!r}")

    return memset


@chain_kind("triton-empty-pdl", pdl=True)
def _triton_empty_pdl(device: torch.device) -> Call:
    return _empty(device, pdl=True)
