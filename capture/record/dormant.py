"""The read watch's mode put out of the operators' way once it has seen what it needs: it
stays on the dispatch stack (popped as the capture ends), but the thread's Python
dispatch keys are switched off at the next Python event where it is the thread's only
mode, so operators skip its Python call (7.5-10 us each, issue 59). Off, not popped: a
C++ guard that puts back the state it found switches them on again, and the mode, still
there, passes operators through until it sleeps again. While a watch runs, torch's
routes past the keys (a mode's push, a higher-order operator's dispatch) are wrapped to
put torch's rule back first where a watch sleeps (a mode on the stack keeps the keys on),
and pushes are counted: a watch never sleeps on a thread that pushed another mode since
it began (in that mode's handler the stack hides it). Nor under a profiler."""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass, field
from typing import Any

PATIENCE = 64  # Python events a hook waits for a place to sleep at
TRIES = 16  # hooks set per region at most (a guard woke it, or it found no place)

_lock = threading.Lock()
_watches = 0  # watches running, on any thread: the routes are wrapped while any are
_wrapped = False  # whether they are (all of them: none where one is missing from this torch)
_unwrapped: dict[tuple[str, str], tuple[Any, Any]] = {}  # route: (torch's, the wrapper)
_local = threading.local()  # .pushes: the modes this thread pushed through the routes

# torch's routes past the keys, by (module, name): a user mode's push (`_push_mode` calls
# the module global; a program may call torch._C's), an infra mode's (FakeTensorMode's),
# and a higher-order operator's dispatch (cond's, scan's, invoke_subgraph's dense kernels
# assert that no mode is on the stack: they must come through the mode, awake)
_ROUTES = (
    ("torch.utils._python_dispatch", "_push_on_torch_dispatch_stack"),
    ("torch._C", "_push_on_torch_dispatch_stack"),
    ("torch._C", "_set_dispatch_mode"),
    ("torch._ops", "_compute_keyset"),
)


@dataclass(eq=False)
class Dormancy:
    """A watch's sleep, kept on its mode (`mode.dormancy`): whether it may sleep, on which
    thread, the thread's pushes as it began and its own since, the hooks set, the pending
    hook, whether it slept once at least, and why a hook failed."""

    sleeps: bool
    thread: int = field(default_factory=threading.get_ident)
    pushes: int = 0
    own_pushes: int = 0
    tries: int = 0
    hook: Any = None
    slept: bool = False
    error: str | None = None


def dormancy_of(mode: Any) -> Dormancy | None:
    d = getattr(mode, "dormancy", None)
    return d if isinstance(d, Dormancy) else None


def _pushes() -> int:
    return getattr(_local, "pushes", 0)


def _keys() -> tuple[Any, Any]:
    import torch

    return torch._C.DispatchKey.Python, torch._C.DispatchKey.PythonTLSSnapshot


def _set_keys(on: bool) -> None:
    import torch

    for key in _keys():
        torch._C._dispatch_tls_set_dispatch_key_included(key, on)


def _only_and_awake(mode: Any) -> bool:
    """`mode` is the thread's only dispatch mode (infra modes count), its keys are on, and
    the thread pushed no mode but `mode` since it began: a mode's handler runs with its
    mode off the stack (put back as it returns, in C++), and keys switched off under it
    would hide that mode from every later operator."""
    import torch

    C, d = torch._C, mode.dormancy
    return (
        _pushes() - d.pushes == d.own_pushes
        and C._len_torch_dispatch_stack() == 1
        and C._get_dispatch_stack_at(0) is mode
        and C._dispatch_tls_is_dispatch_key_included(_keys()[0])
    )


def _wake() -> None:
    """torch's rule put back on this thread, where its stack holds a watch that slept (its
    own, or one torch copied over with the dispatch state, to an autograd or interop
    thread): with a mode on the stack, the Python keys are on. No other state is touched."""
    import torch

    C = torch._C
    depth = C._len_torch_dispatch_stack()
    if not depth or C._dispatch_tls_is_dispatch_key_included(_keys()[0]):
        return
    for i in range(depth):
        d = dormancy_of(C._get_dispatch_stack_at(i))
        if d is not None and d.slept:
            _set_keys(True)
            return


def _waking(fn: Any, counted: bool) -> Any:
    """`fn` with this thread woken first; a push `counted` (a watch's own on its thread,
    put back by torch's `_pop_mode_temporarily`, say, counted on it too, so that its hook
    can tell it from a mode of the program's)."""

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if counted:
            _local.pushes = _pushes() + 1
            d = dormancy_of(args[0]) if args else None
            if d is not None and d.thread == threading.get_ident():  # a watch's, here
                d.own_pushes += 1
        _wake()
        return fn(*args, **kwargs)

    wrapped.__wrapped__ = fn  # type: ignore[attr-defined]
    return wrapped


def sleep_soon(mode: Any) -> None:
    """A one-shot `sys.setprofile` hook on this thread that switches the keys off at the
    first event where `mode` is alone and awake, or gives up after PATIENCE events (at
    once, once the watch has ended). TRIES hooks at most: a region that wakes it more
    often (a guard per layer, say) keeps it awake from then on."""
    d = mode.dormancy
    if (
        not d.sleeps
        or sys.getprofile() is not None
        or d.tries >= TRIES
        or d.thread != threading.get_ident()
        or _pushes() - d.pushes != d.own_pushes  # another mode pushed: never again
    ):
        return
    d.tries += 1
    waited = 0

    def hook(frame: Any, event: str, arg: Any) -> None:
        nonlocal waited
        waited += 1
        try:
            if not d.sleeps or waited > PATIENCE:
                sys.setprofile(None)
            elif _only_and_awake(mode):
                sys.setprofile(None)
                d.slept = True
                _set_keys(False)
        except Exception as e:  # never into the program: the mode stays awake, reads whole
            sys.setprofile(None)
            d.sleeps, d.error = False, f"{type(e).__name__}: {e}"

    d.hook = hook
    sys.setprofile(hook)


def watching(mode: Any) -> None:
    """`mode` pushed as a watch begins: the routes wrapped (by the first of any thread's;
    where one is missing from this torch, none is, and no watch sleeps); this thread's
    pushes so far, against which its hook tells a later one."""
    global _watches, _wrapped
    d = mode.dormancy
    with _lock:
        if _watches == 0:
            _wrapped = _wrap_routes()
        _watches += 1
        if not _wrapped:
            d.sleeps = False
    d.pushes, d.own_pushes = _pushes(), 0


def _wrap_routes() -> bool:
    """All routes wrapped, or none (False) where this torch lacks one."""
    import torch._ops
    import torch.utils._python_dispatch  # noqa: F401 (the routes' modules)

    found = {(m, n): getattr(sys.modules[m], n, None) for m, n in _ROUTES}
    if any(fn is None for fn in found.values()):
        return False
    for (module, name), fn in found.items():
        _unwrapped[module, name] = (fn, _waking(fn, name != "_compute_keyset"))
        setattr(sys.modules[module], name, _unwrapped[module, name][1])
    return True


def _unwrap_routes() -> None:
    """Each route put back where it is still the wrapper: one the program replaced since
    is the program's (a wrapper left under its patch only wakes where a watch slept)."""
    for module, name in _ROUTES:
        fn, wrapper = _unwrapped.pop((module, name))
        if getattr(sys.modules[module], name) is wrapper:
            setattr(sys.modules[module], name, fn)


def forget(mode: Any) -> None:
    """As the capture ends: the mode never to sleep again, the routes unwrapped after the
    last watch (the keys: the mode's pop switches them off with the stack empty). Ended on
    another thread than it began, the mode stays on that thread's stack (never popped
    there), its keys maybe off: the routes then stay wrapped for good, so that thread's
    own modes are still seen."""
    global _watches, _wrapped
    d = mode.dormancy
    d.sleeps = False  # a hook still set removes itself at its next event
    if d.thread != threading.get_ident():
        return
    with _lock:
        _watches -= 1
        if _watches == 0 and _wrapped:
            _unwrap_routes()
            _wrapped = False
