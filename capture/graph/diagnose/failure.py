"""Naming a failed capture: the op in flight, its module and the class of failure, in
one line (capture/graph/capture.py raises it as CaptureError).

After a failed capture the step is captured again on throwaway graphs: once watched
(watch.py), compiled regions forced eager, naming the op that raised; then, where that
cannot name it, bisection over the submodules recorded, deepest first. So the step's
Python runs once more, each submodule's forward at most once more; not at all under an
initialized process group. Each attempt ends with the stream not capturing and the device
synchronized (docs/capture-failures.md, "The attempts, step by step").
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

import torch

from graph_harness.capture.graph.diagnose.classes import (
    FORBIDDEN,
    FROZEN_POOL,
    STEP_CODE,
    CallSeen,
    FailureClass,
    OpSeen,
    call_in_frames,
    classify_call,
    classify_error,
    classify_op,
    is_capture_failure,
    is_invalidated,
)
from graph_harness.capture.graph.diagnose.watch import Inputs, Watch
from graph_harness.capture.scopes.recorder import Recorder, recording

Attempt = Callable[[Callable[[], object]], BaseException | None]
BISECTED = "found by capturing each submodule alone, deepest first: {n} captured"
EAGER_CODE = "read off its eager code, the compiled region forced eager"


@dataclass(frozen=True)
class Diagnosis:
    op: str | None  # "aten.nonzero", "Tensor.__getitem__", "torch.cuda.synchronize", ...
    where: str  # "in module layers.1.mlp", "in scope stage3/sync", "outside any module or scope"
    cls: FailureClass
    how: str = ""  # how it was found, where not simply read off the failing op

    def line(self, exc: BaseException) -> str:
        """One line, the op, module and class first, then the error it came from."""
        head = f"{self.op} {self.where}" if self.op else f"capture failed {self.where}"
        how = f" ({self.how})" if self.how else ""
        return f"{head}{how}: {self.cls.words}; {self.cls.fix} [{error_text(exc)}]"


def error_text(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def where_of(modules: tuple[str, ...], scope: str | None, known: set[str] = frozenset()) -> str:
    """Where a failure happened, as the message says it: the innermost module open, and a
    scope of the step's own inside it; else the scope; else that it was in neither."""
    if modules:
        inner = f"in module {modules[-1]}"
        return f"{inner} (scope {scope})" if scope and scope not in known else inner
    if scope:
        return f"in module {scope}" if scope in known else f"in scope {scope}"
    return "outside any module or scope"


def classify(seen: OpSeen | CallSeen) -> FailureClass | None:
    return classify_op(seen) if isinstance(seen, OpSeen) else classify_call(seen)


def read_off(watch: Watch, exc: BaseException | None, scope: str | None) -> Diagnosis | None:
    """The diagnosis an attempt's failure names by itself, else None (bisect)."""
    if exc is None:
        return None  # it did not fail again
    modules = watch.open_modules
    f = watch.failure(exc)
    if f is not None and not is_invalidated(exc):
        cls = classify(f.seen) or classify_error(exc)
        cls = cls or (FORBIDDEN if is_capture_failure(exc) else STEP_CODE)
        return Diagnosis(f.seen.name, where_of(f.modules, f.scope or scope, watch.known), cls)
    found = call_in_frames(exc)  # torch.cuda.synchronize(), torch.distributed.*
    if found is not None:
        return Diagnosis(found[0], where_of(modules, scope, watch.known), found[1])
    if classify_error(exc) is FROZEN_POOL:
        where = where_of(modules, scope, watch.known)
        return Diagnosis("GraphBufferPool.carve", where, FROZEN_POOL)
    if not is_capture_failure(exc):  # the step's own error: where it was raised is enough
        return Diagnosis(None, where_of(modules, scope, watch.known), STEP_CODE)
    return None


@dataclass(frozen=True)
class Outcome:
    exc: BaseException | None
    failure: object | None  # watch.Failure, where ops were watched


def solo_failed(out: Outcome) -> bool:
    """A module captured alone failed the way captures fail (not with a TypeError from
    inputs it cannot take again, nor a refusal to recompile)."""
    return is_capture_failure(out.exc)


def bisect(
    candidates: list[Inputs],
    try_alone: Callable[[Inputs], Outcome],
    on_path: Iterable[str] = (),
) -> tuple[Inputs | None, Outcome | None, int]:
    """Capture each candidate alone, deepest first (then those open at the failure, then
    the latest called), until one fails: (it, its outcome, how many were captured)."""
    path = set(on_path)
    order = sorted(
        (c for c in candidates if c.kwargs is not None),
        key=lambda c: (-c.depth, c.name not in path, -c.order),
    )
    for n, c in enumerate(order, 1):
        out = try_alone(c)
        if solo_failed(out):
            return c, out, n
    return None, None, len(order)


def _bisected(c: Inputs, out: Outcome, n: int) -> Diagnosis:
    op, cls = None, None
    f = out.failure
    if f is not None and not is_invalidated(out.exc):
        op, cls = f.seen.name, classify(f.seen)
    found = call_in_frames(out.exc)
    if op is None and found is not None:
        op, cls = found
    cls = cls or classify_error(out.exc) or FORBIDDEN
    return Diagnosis(op, f"in module {c.name}", cls, BISECTED.format(n=n))


def _stance(name: str | None) -> contextlib.AbstractContextManager[object]:
    if name is None or not hasattr(torch.compiler, "set_stance"):
        return contextlib.nullcontext()
    return torch.compiler.set_stance(name)


def _watched(fn: Callable[[], object], watch: Watch, stance: str | None) -> Callable[[], None]:
    """Call the step watched, under `stance` ("force_eager": every compiled region runs
    its eager code, so no watch of ours makes Dynamo compile again inside a capture)."""

    def call() -> None:
        with recording(Recorder()), _stance(stance), watch:
            fn()

    return call


def _alone(c: Inputs, compiled: bool) -> tuple[Callable[[], object], Watch]:
    """Call `c`'s module alone with its recorded inputs: as compiled where it reaches
    compiled code (never compiling anew), else eager with its ops watched."""
    watch = Watch(None, ops=not compiled)

    def call() -> None:
        # inference_mode(False) would turn grad on: enter it only if it was on, then grad
        inference = torch.inference_mode() if c.inference else contextlib.nullcontext()
        with _stance("fail_on_recompile"), watch, inference, torch.set_grad_enabled(c.grad):
            c.module(*c.args, **c.kwargs)

    return call, watch


def diagnose(
    fn: Callable[[], object],
    exc: BaseException,
    *,
    attempt: Attempt,
    model: torch.nn.Module | None,
    compiled: Callable[[object], bool],
    scope: str | None,
    distributed: bool = False,
) -> Diagnosis:
    """Diagnose the failed capture of `fn` (see the module doc). `attempt(call)` captures
    `call` once on a fresh graph and returns what it raised (None: it captured);
    `compiled(obj)` says whether obj reaches torch.compile'd code."""
    if distributed:
        found = call_in_frames(exc)
        cls = found[1] if found else _error_class(exc)
        how = "not captured again: a process group is initialized"
        return Diagnosis(found[0] if found else None, where_of((), scope), cls, how)
    step_compiled = compiled(fn)
    watch = Watch(model, ops=True)
    again = attempt(_watched(fn, watch, "force_eager"))
    read = read_off(watch, again, scope)
    candidates, path = list(watch.inputs.values()), watch.open_modules
    compiled_parts = step_compiled and any(compiled(c.module) for c in candidates)
    if read is not None and not compiled_parts:
        # eager: the op itself; compiled with no compiled submodule to capture alone (the
        # whole model compiled): the op as its eager code fails
        return replace(read, how=EAGER_CODE) if step_compiled and read.op else read

    def try_alone(c: Inputs) -> Outcome:
        call, w = _alone(c, compiled(c.module))
        e = attempt(call)
        return Outcome(e, w.failure(e))

    how = ""
    if candidates:
        c, out, n = bisect(candidates, try_alone, path)
        if c is not None:
            return _bisected(c, out, n)
        how = f"no submodule fails captured alone: {n} captured"
    if read is not None:
        return replace(read, how="; ".join(x for x in (EAGER_CODE, how) if x))
    if again is None:
        tried = "its eager code captured" if step_compiled else "it captured when tried again"
        how = "; ".join(x for x in (tried, how) if x)
    cls = _error_class(again if again is not None else exc)
    return Diagnosis(None, where_of(path, scope, watch.known), cls, how)


def _error_class(exc: BaseException) -> FailureClass:
    return classify_error(exc) or (FORBIDDEN if is_capture_failure(exc) else STEP_CODE)


def model_of(fn: Callable[[], object]) -> torch.nn.Module | None:
    """The model whose modules name a failure: an open module_scopes' model, else the
    step's `.module` (the --target convention)."""
    from graph_harness.capture.scopes.modules import active_module_scopes

    ms = active_module_scopes()
    if ms is not None:
        return ms.module
    m = getattr(fn, "module", None)
    return m if isinstance(m, torch.nn.Module) else None


def failure_line(
    fn: Callable[[], object], exc: BaseException, *, scope: str | None, attempt: Attempt
) -> str:
    """CaptureError's message for the failed capture of `fn` (see the module doc). A
    diagnosis that fails itself falls back to the scope and the error, and says why."""
    from graph_harness.capture.graph.compiled import find_compiled

    try:
        distributed = torch.distributed.is_available() and torch.distributed.is_initialized()
        return diagnose(
            fn,
            exc,
            attempt=attempt,
            model=model_of(fn),
            compiled=lambda obj: bool(find_compiled(obj)),
            scope=scope,
            distributed=distributed,
        ).line(exc)
    except Exception as why:
        where = where_of((), scope)
        return (
            f"capture failed {where}: {FORBIDDEN.fix} [{error_text(exc)}] "
            f"(no diagnosis: {error_text(why)})"
        )
