"""torch.compile'd code in a step: found before counting, refused where it cannot be
counted honestly.

`mode="reduce-overhead"` (or `triton.cudagraphs`): Inductor records its own CUDA graphs,
which cannot be captured into another: refused on every device, with what to use instead.
On the CPU, where torch.compile does not run under the dispatch counter's mode, any
compiled step is refused with one line that says to count it on a GPU. Compiled objects
are found by walking what the step can reach (docs/your-model.md, "How compiled code is
found").
"""

from __future__ import annotations

import contextlib
import types
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from torch import nn

from graph_harness.capture.errors import UsageError


class CompiledStepError(UsageError, RuntimeError):
    """A step whose torch.compile'd code cannot be counted here (on the CPU, or compiled
    into cudagraph trees): a usage error (exit 2) that says what to do."""


@dataclass(frozen=True)
class Compiled:
    where: str  # how the step reaches it, e.g. "step.<closure model>"
    config: dict  # the Inductor settings it was compiled with ({} for other backends)
    code: types.CodeType | None = None  # the code Dynamo compiles (provenance reuse)

    @property
    def cudagraphs(self) -> bool:
        return bool(self.config.get("triton.cudagraphs", False))


REDUCE_OVERHEAD_HINT = (
    "was compiled with mode='reduce-overhead', whose CUDA graphs (Inductor's cudagraph "
    "trees) cannot be captured into another graph: `count`, `profile`, `sweep` and `report` "
    "measure it on a GPU by recording those graphs and calling the step; `check` compares "
    "graph-harness's own graph of a step with the step run eagerly, so to check it, compile "
    "it with the default mode or mode='max-autotune-no-cudagraphs' and let graph-harness "
    "capture it"
)
CPU_HINT = (
    "runs torch.compile'd code, which cannot be counted on the CPU (torch.compile does not "
    "run under the dispatch counter used there); count it on a GPU, where its CUDA graph "
    "is read node by node, or count the eager step here"
)


def _backend_config(ctx: object) -> dict:
    fn = getattr(ctx, "callback", None)
    seen = 0
    while hasattr(fn, "_torchdynamo_orig_backend") and seen < 16:
        fn, seen = fn._torchdynamo_orig_backend, seen + 1
    config = getattr(fn, "config", None)
    return dict(config) if isinstance(config, dict) else {}


def _context_of(obj: object) -> object | None:
    """The Dynamo context of a compiled module or function, else None."""
    ctx = getattr(obj, "dynamo_ctx", None)  # an OptimizedModule
    if ctx is not None and hasattr(ctx, "callback"):
        return ctx
    if callable(obj) and hasattr(obj, "_torchdynamo_orig_callable"):
        for cell in getattr(obj, "__closure__", None) or ():
            try:
                v = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            if hasattr(v, "callback") and type(v).__module__.startswith("torch._dynamo"):
                return v
    return None


def find_compiled(step: Callable[[], object], *, max_depth: int = 4) -> list[Compiled]:
    """Every torch.compile'd module or function `step` reaches (see the module doc)."""
    found: list[Compiled] = []
    seen: set[int] = set()

    def visit(obj: object, where: str, depth: int) -> None:
        if id(obj) in seen or depth > max_depth:
            return
        seen.add(id(obj))
        ctx = _context_of(obj)
        if ctx is not None:
            inner = getattr(obj, "_orig_mod", None) or getattr(
                obj, "_torchdynamo_orig_callable", None
            )
            found.append(Compiled(where, _backend_config(ctx), _code_of(inner)))
            if inner is not None:
                visit(inner, where + ".<compiled>", depth + 1)
            return
        if isinstance(obj, nn.Module):
            impl = getattr(obj, "_compiled_call_impl", None)  # Module.compile() in place
            if impl is not None and _context_of(impl) is not None:
                config = _backend_config(_context_of(impl))
                code = _code_of(getattr(impl, "_torchdynamo_orig_callable", None))
                found.append(Compiled(f"{where} (Module.compile)", config, code))
            for name, child in obj.named_children():
                visit(child, f"{where}.{name}", depth + 1)
            return
        if isinstance(obj, partial):
            visit(obj.func, f"{where}.func", depth + 1)
            return
        if isinstance(obj, types.MethodType):
            visit(obj.__func__, where, depth)
            visit(obj.__self__, f"{where}.__self__", depth + 1)
            return
        if isinstance(obj, types.FunctionType):
            code = obj.__code__
            for name, cell in zip(code.co_freevars, obj.__closure__ or ()):
                with contextlib.suppress(ValueError):  # an empty cell
                    visit(cell.cell_contents, f"{where}.<closure {name}>", depth + 1)
            for name in _names(code):
                if name in obj.__globals__:
                    visit(obj.__globals__[name], f"{where}.<global {name}>", depth + 1)
        for attr in ("module", "__wrapped__"):
            v = _own_attr(obj, attr)
            if v is not None:
                visit(v, f"{where}.{attr}", depth + 1)
        if isinstance(obj, types.FunctionType):
            return
        call = vars(type(obj)).get("__call__")  # a user class's own __call__
        if isinstance(call, types.FunctionType) and type(obj).__module__ != "builtins":
            visit(types.MethodType(call, obj), f"{where}.__call__", depth)

    visit(step, "step", 0)
    return found


def _code_of(obj: object) -> types.CodeType | None:
    """The code Dynamo compiles when `obj` (a compiled module or function) is called."""
    fn = type(obj).forward if isinstance(obj, nn.Module) else getattr(obj, "__func__", obj)
    code = getattr(fn, "__code__", None)
    return code if isinstance(code, types.CodeType) else None


def _own_attr(obj: object, attr: str) -> object:
    try:
        return vars(obj).get(attr)
    except TypeError:  # no __dict__
        return None


def _names(code: types.CodeType) -> set[str]:
    """Global names `code` and the functions nested in it refer to."""
    out = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            out |= _names(c)
    return out


def refuse_uncountable(
    step: Callable[[], object], device_type: str, *, own_graphs: bool = False
) -> list[Compiled]:
    """Refuse what cannot be counted (see the module doc); the compiled objects found.
    `own_graphs`: the caller counts a reduce-overhead step by recording the graphs it
    captures itself (capture/record/steps.py), on CUDA: not refused there."""
    found = find_compiled(step)
    for c in found:
        if c.cudagraphs and not (own_graphs and device_type == "cuda"):
            raise CompiledStepError(f"{shown(c.where)} {REDUCE_OVERHEAD_HINT}")
    if found and device_type != "cuda":
        raise CompiledStepError(f"{shown(found[0].where)} {CPU_HINT}")
    return found


def shown(where: str) -> str:
    """`where` as its reader would name it: the hops through wrapper functions (a
    `@torch.no_grad()` decorator's, graph-harness's own guard) left out, so
    `step.<closure fn>.<closure func>.<closure run>` is "the step's `run`"."""
    head, sep, rest = where.rpartition("<closure ")
    if not sep:
        return f"the step's {where.removeprefix('step.')}" if where != "step" else "the step"
    name, _, tail = rest.partition(">")
    return f"the step's `{name}`{tail}" + (" (through its closure)" if head else "")


def is_dispatch_mode_refusal(exc: BaseException) -> bool:
    """torch.compile's own refusal of the CPU counter's dispatch mode, however wrapped."""
    while exc is not None:
        if "dispatch mode" in str(exc) and "torch.compile" in str(exc):
            return True
        exc = exc.__cause__ or exc.__context__
    return False
