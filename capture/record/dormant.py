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
from typing import Any

PATIENCE = 64  # Python events a hook waits for a place to sleep at
TRIES = 16  # hooks set per region at most (a guard woke it, or it found no place)

_lock = threading.Lock()
_watches = 0  # watches running, on any thread: the routes are wrapped while any are
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

    C = torch._C
    return (
        _pushes() - mode.pushes == mode.own_pushes
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
    if any(getattr(C._get_dispatch_stack_at(i), "slept", False) for i in range(depth)):
        _set_keys(True)


def _waking(fn: Any, counted: bool) -> Any:
    """`fn` with this thread woken first; a push `counted` (a watch's own on its thread,
    put back by torch's `_pop_mode_temporarily`, say, counted on it too, so that its hook
    can tell it from a mode of the program's)."""

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if counted:
            _local.pushes = _pushes() + 1
            mode = args[0] if args else None
            if getattr(mode, "thread", None) == threading.get_ident():  # a watch's, here
                mode.own_pushes += 1
        _wake()
        return fn(*args, **kwargs)

    wrapped.__wrapped__ = fn  # type: ignore[attr-defined]
    return wrapped


def sleep_soon(mode: Any) -> None:
    """A one-shot `sys.setprofile` hook on this thread that switches the keys off at the
    first event where `mode` is alone and awake, or gives up after
    PATIENCE events (at once, once the watch has ended). `mode.tries` counts the hooks
    set; `mode.slept` says it has slept once at least."""
    if (
        sys.getprofile() is not None
        or mode.tries >= TRIES
        or mode.thread != threading.get_ident()
        or _pushes() - mode.pushes != mode.own_pushes  # another mode pushed: never again
    ):
        return
    mode.tries += 1
    waited = 0

    def hook(frame: Any, event: str, arg: Any) -> None:
        nonlocal waited
        waited += 1
        try:
            if not mode.sleeps or waited > PATIENCE:
                sys.setprofile(None)
            elif _only_and_awake(mode):
                sys.setprofile(None)
                _asleep(mode)
        except Exception as e:  # never into the program: the mode stays awake, reads whole
            sys.setprofile(None)
            mode.sleep_error = f"{type(e).__name__}: {e}"

    mode.hook = hook
    sys.setprofile(hook)


def _asleep(mode: Any) -> None:
    mode.slept = True
    _set_keys(False)


def watching(mode: Any) -> None:
    """`mode` pushed as a watch begins: the routes wrapped (by the first of any thread's);
    this thread's pushes so far, against which its hook tells a later one."""
    global _watches
    with _lock:
        if _watches == 0:
            _wrap_routes()
        _watches += 1
    mode.pushes, mode.own_pushes = _pushes(), 0


def _wrap_routes() -> None:
    import torch._ops
    import torch.utils._python_dispatch  # noqa: F401 (the routes' modules)

    for module, name in _ROUTES:
        fn = getattr(sys.modules[module], name)
        _unwrapped[module, name] = (fn, _waking(fn, name != "_compute_keyset"))
        setattr(sys.modules[module], name, _unwrapped[module, name][1])


def _unwrap_routes() -> None:
    """Each route put back where it is still the wrapper: one the program replaced since
    is the program's (a wrapper left under its patch only wakes where a watch slept)."""
    for module, name in _ROUTES:
        fn, wrapper = _unwrapped.pop((module, name))
        if getattr(sys.modules[module], name) is wrapper:
            setattr(sys.modules[module], name, fn)


def forget(mode: Any) -> None:
    """As the capture ends: the mode never to sleep again, its hook removed if it never
    fired, the routes unwrapped after the last watch (the keys: the mode's pop switches
    them off with the stack empty). Ended on another thread than it began, the mode stays
    on that thread's stack (never popped there), its keys maybe off: the routes then stay
    wrapped for good, so that thread's own modes are still seen."""
    global _watches
    mode.sleeps = False
    if mode.hook is not None and sys.getprofile() is mode.hook:
        sys.setprofile(None)
    if mode.thread != threading.get_ident():
        return
    with _lock:
        _watches -= 1
        if _watches == 0:
            _unwrap_routes()
