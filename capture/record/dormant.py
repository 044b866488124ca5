"""The read watch's mode put out of the operators' way once it has seen what it needs: it
stays on the dispatch stack (popped as the capture ends), but the thread's Python
dispatch keys are switched off at the next Python event where it is the thread's only
mode, so operators skip its Python call (7.5-10 us each, issue 59). Off, not popped: a
C++ guard that puts back the state it found switches them on again, and the mode, still
there, passes operators through until it sleeps again. While a watch runs, torch's
Python routes past the keys are wrapped to switch them on first (torch's rule: a mode on
the stack keeps them on): a mode's push, counted (inside a mode's handler the stack hides
that mode, so a watch never sleeps on a thread that pushed one), and a higher-order
operator's dispatch. Nor does it sleep under a profiler of the program's."""

from __future__ import annotations

import sys
import threading
from typing import Any

PATIENCE = 64  # Python events a hook waits for a place to sleep at
TRIES = 16  # hooks set per region at most (a guard woke it, or it found no place)

_lock = threading.Lock()
_watches = 0  # watches running, on any thread: the pushes stay wrapped while there are any
_unwrapped: dict[str, Any] = {}
_local = threading.local()  # .pushes: modes this thread pushed through the wrapped ways


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
    the thread pushed no mode since the watch began: a mode's handler runs with that mode
    off the stack (put back as it returns), and keys switched off under it would hide the
    mode from every later operator."""
    import torch

    C = torch._C
    return (
        _pushes() == mode.pushes
        and C._len_torch_dispatch_stack() == 1
        and C._get_dispatch_stack_at(0) is mode
        and C._dispatch_tls_is_dispatch_key_included(_keys()[0])
    )


def _wake() -> None:
    """torch's rule put back on this thread before a push: with a mode on the stack, the
    Python keys are on (a sleeping watch's were switched off)."""
    import torch

    C = torch._C
    if C._len_torch_dispatch_stack() and not C._dispatch_tls_is_dispatch_key_included(_keys()[0]):
        _set_keys(True)


def _waking(fn: Any, counted: bool) -> Any:
    """`fn` with the thread woken first; a push `counted`, unless of a watch's own mode
    (put back by torch's `_pop_mode_temporarily`, say: no mode of the program's)."""

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if counted and not (args and getattr(args[0], "reads_watch", False)):
            _local.pushes = _pushes() + 1
        _wake()
        return fn(*args, **kwargs)

    wrapped.__wrapped__ = fn  # type: ignore[attr-defined]
    return wrapped


# torch's Python-side routes around a sleeping watch's keys, by (module, name): a user
# mode's push (`_push_mode` calls this module global), an infra mode's (FakeTensorMode's),
# and a higher-order operator's dispatch (its dense kernels assert no mode is on the
# stack: they must come through the mode, awake)
_ROUTES = {
    ("torch.utils._python_dispatch", "_push_on_torch_dispatch_stack"): True,
    ("torch._C", "_set_dispatch_mode"): True,
    ("torch._ops", "_compute_keyset"): False,
}


def _wrap_routes() -> None:
    for (module, name), counted in _ROUTES.items():
        owner = sys.modules[module]
        _unwrapped[module, name] = getattr(owner, name)
        setattr(owner, name, _waking(_unwrapped[module, name], counted))


def _unwrap_routes() -> None:
    for module, name in _ROUTES:
        setattr(sys.modules[module], name, _unwrapped.pop((module, name)))


def sleep_soon(mode: Any) -> None:
    """A one-shot `sys.setprofile` hook on this thread that switches the keys off at the
    first event where `mode` is alone and awake, or gives up after PATIENCE events.
    `mode.tries` counts the hooks set; `mode.slept` says it has slept once at least."""
    if sys.getprofile() is not None or mode.tries >= TRIES or mode.thread != threading.get_ident():
        return
    mode.tries += 1
    waited = 0

    def hook(frame: Any, event: str, arg: Any) -> None:
        nonlocal waited
        waited += 1
        try:
            if mode.sleeps and _only_and_awake(mode):
                sys.setprofile(None)
                _asleep(mode)
            elif waited > PATIENCE:
                sys.setprofile(None)
        except Exception as e:  # never into the program: the mode stays awake, reads whole
            sys.setprofile(None)
            mode.sleep_error = f"{type(e).__name__}: {e}"

    mode.hook = hook
    sys.setprofile(hook)


def _asleep(mode: Any) -> None:
    mode.slept = True
    _set_keys(False)


def watching() -> int:
    """A watch begins, its mode pushed: the routes wrapped (by the first of any thread's);
    this thread's pushes so far, against which the watch's hook tells a later one."""
    global _watches
    with _lock:
        if _watches == 0:
            import torch._ops
            import torch.utils._python_dispatch  # noqa: F401 (the routes' modules)

            _wrap_routes()
        _watches += 1
    return _pushes()


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
