"""A graph's eager form: what its captured code computes, run eagerly from the graph's
own inputs and state, found as the capture begins (capture/record/hooks.py asks).

Each form gives, by name: `state()` (the tensors the code reads and may write), `eager()`
(the code run eagerly from that state: its outputs) and `outputs()` (the graph's outputs
as a replay leaves them). From, in order: an engine's adapter (`record --eager`),
Inductor's cudagraph trees, `torch.cuda.make_graphed_callables` (forward graphs only),
else none, with the reason. In full: docs/record.md, "capture/live/forms.py".
"""

from __future__ import annotations

import contextlib
import os
import types
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

HOW = 'give one with `record --eager MODULE:FUNCTION` (docs/record.md, "Checking")'


class Form(Protocol):
    source: str

    def state(self) -> dict[str, torch.Tensor]: ...

    def eager(self) -> dict[str, torch.Tensor]: ...

    def outputs(self) -> dict[str, torch.Tensor]: ...


def _tensors(value: Any, prefix: str) -> dict[str, torch.Tensor]:
    """Every tensor in a (nested) value, named by its place among them (`output[0]`): by
    position, so that `t` and `(t,)` name one tensor alike."""
    from torch.utils._pytree import tree_flatten

    leaves, _ = tree_flatten(value)
    tensors = [t for t in leaves if isinstance(t, torch.Tensor)]
    return {f"{prefix}[{i}]": t for i, t in enumerate(tensors)}


@dataclass(kw_only=True)
class EagerForm:
    """What an `--eager` adapter returns for a capture it knows: the callable the engine
    captured and its arguments (the static buffers the graph reads), and what to compare:

    - `state`: the tensors the code reads or writes besides its arguments (the static
      input buffers it reads, a KV cache, positions it advances), by name or as a list:
      snapshotted, put back after the eager runs, and compared after the replay;
    - `outputs`: called after each checked replay, returns the graph's outputs (the static
      buffers the captured call returned); None: the call's return value is not compared,
      only `state` and the arguments.
    """

    fn: Callable[..., Any]
    args: Sequence[Any] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    state: Mapping[str, torch.Tensor] | Sequence[torch.Tensor] = ()
    outputs: Callable[[], Any] | None = None
    no_grad: bool = True  # run eagerly without autograd (what a graph replay records)


class Adapted:
    """An adapter's EagerForm, as a Form."""

    source = "adapter"

    def __init__(self, form: EagerForm) -> None:
        self.form = form

    def state(self) -> dict[str, torch.Tensor]:
        f = self.form
        out = _tensors(tuple(f.args), "arg")
        out.update(_tensors(dict(f.kwargs), "kwarg"))
        if isinstance(f.state, Mapping):
            out.update({str(k): v for k, v in f.state.items() if isinstance(v, torch.Tensor)})
        else:
            out.update(_tensors(tuple(f.state), "state"))
        return _unique(out)

    def eager(self) -> dict[str, torch.Tensor]:
        f = self.form
        with torch.no_grad() if f.no_grad else contextlib.nullcontext():
            got = f.fn(*f.args, **f.kwargs)
        return _tensors(got, "output") if f.outputs is not None else {}

    def outputs(self) -> dict[str, torch.Tensor]:
        return {} if self.form.outputs is None else _tensors(self.form.outputs(), "output")


def module_state(m: torch.nn.Module) -> dict[str, torch.Tensor]:
    """A module's buffers and the plain tensors its submodules hold as attributes (a
    running statistic, a cache kept unregistered): what a call of it may write."""
    out = {f"buffer {k}": b for k, b in m.named_buffers()}
    for qn, sub in m.named_modules():
        for k, v in vars(sub).items():
            if isinstance(v, torch.Tensor) and not isinstance(v, torch.nn.Parameter):
                out.setdefault(f"attribute {qn + '.' if qn else ''}{k}", v)
    return out


def self_overlapping(t: torch.Tensor) -> bool:
    """An expanded tensor (a stride of 0 over a size above 1): `copy_` into it is
    refused, and its elements are not state of their own."""
    return any(st == 0 and sz > 1 for st, sz in zip(t.stride(), t.shape))


def _unique(named: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """One name per tensor (the same tensor given twice, as an argument and as mutated,
    is snapshotted once, under its first name)."""
    seen: set[tuple[int, int, tuple, tuple]] = set()
    out = {}
    for k, t in named.items():
        ident = (t.data_ptr(), t.storage_offset(), tuple(t.shape), tuple(t.stride()))
        if ident not in seen and not self_overlapping(t):
            seen.add(ident)
            out[k] = t
    return out


class InductorForm:
    """A node of Inductor's cudagraph tree: its compiled function (`wrapped_function.model`,
    the same kernels the graph captured, launched one by one) run on the inputs the node
    copied in for this replay (`reconstructed_inputs`); what it mutates
    (`mutated_input_idxs`); its outputs rebuilt from their recorded metadata."""

    source = "inductor"

    def __init__(self, node: object) -> None:
        self._node = weakref.ref(node)

    def _get(self) -> Any:
        node = self._node()
        if node is None:
            raise LookupError("Inductor's tree node was freed")
        return node

    def state(self) -> dict[str, torch.Tensor]:
        """The inputs the compiled code mutates (a static KV cache): what the eager runs
        write and the replay is compared on. The others are not state: the eager code
        allocates its own buffers, so it writes none of them, while the graph may reuse
        an input's pool memory once the input is dead (cudagraph trees reclaim it), so
        after a replay they are not the graph's to compare."""
        node = self._get()
        wrapped = node.wrapped_function
        mutated = set(getattr(wrapped, "mutated_input_idxs", ()) or ())
        names = _placeholder_names(wrapped)
        out = {}
        for i, x in enumerate(node.reconstructed_inputs):
            if isinstance(x, torch.Generator):
                raise LookupError(
                    "the compiled code takes a random-number generator of its own, which an "
                    "eager run would advance"
                )
            if isinstance(x, torch.Tensor) and i in mutated:
                name = f"input[{i}]" + (f" {names[i]}" if i < len(names) and names[i] else "")
                out[f"{name} (mutated)"] = x
        return _unique(out)

    def eager(self) -> dict[str, torch.Tensor]:
        node = self._get()
        # the compiled function takes its inputs as a list it may empty (boxed calling)
        with torch.no_grad():
            got = node.wrapped_function.model(list(node.reconstructed_inputs))
        return {f"output[{i}]": t for i, t in enumerate(got) if isinstance(t, torch.Tensor)}

    def outputs(self) -> dict[str, torch.Tensor]:
        node = self._get()
        out = {}
        for i, meta in enumerate(node.outputs_metadata):
            if isinstance(meta, dict):
                static = node.static_output_tensors[i] if node.static_output_tensors else None
                out[f"output[{i}]"] = (
                    static if static is not None else node._reconstruct_from_tensor_metadata(meta)
                )
        return out


def _placeholder_names(wrapped: Any) -> list[str]:
    """The compiled graph's input names, where Inductor kept them (`placeholders`, torch 2.4
    on): Dynamo names a module's tensor by its path (`L_self_modules_layers_..._k_cache`)."""
    try:
        return [str(getattr(p, "name", "") or "") for p in wrapped.placeholders or ()]
    except Exception:
        return []


# the function whose frame holds the callables and graphs: some torch versions split
# make_graphed_callables around a private `_make_graphed_callables`, others (torch 2.13)
# inline it
_GRAPHED = ("_make_graphed_callables", "make_graphed_callables")


class GraphedForm:
    """A forward graph of `torch.cuda.make_graphed_callables`: the callable run on its
    static inputs (the sample arguments, into which each call copies its own); its
    outputs, the static outputs the capture returned (read at the capture's end)."""

    source = "make_graphed_callables"

    def __init__(self, fn: Callable, args: tuple) -> None:
        # a module's forward as the capture ran it: make_graphed_callables then replaces
        # `fn.forward` with its graphed forward, which replays this very graph
        self.fn = fn.forward if isinstance(fn, torch.nn.Module) else fn
        self.module = fn if isinstance(fn, torch.nn.Module) else None
        self.args = args
        self.static_outputs: Any = None

    def captured(self, frames: list[types.FrameType]) -> None:
        for f in frames:
            if f.f_code.co_name in _GRAPHED:
                for name in ("func_outputs", "outputs"):
                    if name in f.f_locals:
                        self.static_outputs = f.f_locals[name]
                        return

    def state(self) -> dict[str, torch.Tensor]:
        out = _tensors(tuple(self.args), "arg")
        if self.module is not None:
            out.update(module_state(self.module))
        return _unique(out)

    def eager(self) -> dict[str, torch.Tensor]:
        with torch.no_grad():
            return _tensors(self.fn(*self.args), "output")

    def outputs(self) -> dict[str, torch.Tensor]:
        if self.static_outputs is None:
            raise LookupError("the forward graph's static outputs were not read at its capture")
        return _tensors(self.static_outputs, "output")


class Skipped(str):
    """No eager form, by design (a graph with nothing to compare, or whose eager form
    cannot be re-run): not a doubt the exit code counts."""


def _in(torch_file: str, f: types.FrameType) -> bool:
    return f.f_code.co_filename.replace(os.sep, "/").endswith(torch_file)


def builtin_form(frames: list[types.FrameType], graph: object) -> Form | str:
    """The eager form graph-harness knows without help for the capture `frames` show, or
    why there is none (a str)."""
    for f in frames:
        if _in("_inductor/cudagraph_trees.py", f):
            node = f.f_locals.get("self")
            if f.f_code.co_name == "_record" and hasattr(node, "wrapped_function"):
                return InductorForm(node)
            if type(node).__name__ == "CUDAGraphTreeManager":
                return Skipped("Inductor's tree manager's empty graph (it keeps the pool alive)")
        if _in("torch/cuda/graphs.py", f) and f.f_code.co_name in _GRAPHED:
            loc = f.f_locals
            if any(g is graph for g in loc.get("bwd_graphs", ()) or ()):
                return Skipped(
                    "a backward graph of make_graphed_callables: its eager form is autograd's "
                    "backward over the tensors its forward saved, which a re-run would replace"
                )
            fn, args = loc.get("func"), loc.get("args")
            if callable(fn) and isinstance(args, tuple):
                return GraphedForm(fn, args)
            return "a make_graphed_callables capture whose callable could not be read"
    return f"no eager form for this capture site: {HOW}"
