"""A host value reachable from a step, by the name a fingerprint gives it (`closure
state.calls`, `self pos`, `global STEP`), found again and set: check tries the step at a
host value its calls would reach later (capture/check/host_probe.py). The name is read
hop by hop against the objects themselves (a dict's key, a list's item, a function's
closure variable, an object's attribute), as capture/state/fingerprint.py's walk wrote it."""

from __future__ import annotations

import functools
import inspect
import types
from collections.abc import Callable


class NotSettable(LookupError):
    """The name leads to no value that can be set (a tuple's item, an argument of a partial,
    a name the walk no longer finds)."""


def setter(step: Callable[[], object], name: str) -> Callable[[object], None]:
    """A function that sets the host value `name` of `step` in place; NotSettable if none."""
    root, _, path = name.partition(" ")
    head, *hops = path.split(".") if path else [""]
    holder, key = _root(step, root, head)
    for hop in hops:
        holder, key = _get(holder, key), hop
    return _set_at(holder, key)


def _root(step: Callable[[], object], kind: str, head: str) -> tuple[object, object]:
    """(what holds the root, the root's key in it): a closure cell, a function or object
    whose attribute it is, or the globals dict."""
    fn = inspect.unwrap(step) if callable(step) else step
    if isinstance(fn, functools.partial):
        fn = fn.func
    if kind == "self" and isinstance(fn, types.MethodType):
        return fn.__self__, head
    if isinstance(fn, types.MethodType):
        fn = fn.__func__
    if kind == "closure" and isinstance(fn, types.FunctionType):
        for var, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
            if var == head:
                return cell, _CELL
    if kind == "global" and isinstance(fn, types.FunctionType):
        return fn.__globals__, head
    if kind == "attribute":
        return fn, head
    raise NotSettable(f"no {kind} {head!r} of the step to set")


_CELL = object()  # the key of a closure cell's contents


def _get(holder: object, key: object) -> object:
    if key is _CELL:
        return holder.cell_contents
    if isinstance(holder, dict):
        return holder[_dict_key(holder, key)]
    if isinstance(holder, list | tuple):
        return holder[int(key)]
    if isinstance(holder, types.FunctionType):
        return _get(*_closure_cell(holder, key))
    return getattr(holder, key)


def _set_at(holder: object, key: object) -> Callable[[object], None]:
    if key is _CELL:
        return lambda v: setattr(holder, "cell_contents", v)
    if isinstance(holder, dict):
        k = _dict_key(holder, key)
        return lambda v: holder.__setitem__(k, v)
    if isinstance(holder, list):
        i = int(key)
        return lambda v: holder.__setitem__(i, v)
    if isinstance(holder, tuple):
        raise NotSettable("the value is an item of a tuple")
    if isinstance(holder, types.FunctionType):
        return _set_at(*_closure_cell(holder, key))
    if not hasattr(holder, str(key)):
        raise NotSettable(f"{type(holder).__name__} has no attribute {key!r}")
    return lambda v: setattr(holder, key, v)


def _dict_key(d: dict, key: object) -> object:
    if key in d:
        return key
    if isinstance(key, str) and key.lstrip("-").isdigit() and int(key) in d:
        return int(key)
    raise NotSettable(f"no key {key!r}")


def _closure_cell(fn: types.FunctionType, var: object) -> tuple[object, object]:
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
        if name == var:
            return cell, _CELL
    raise NotSettable(f"function {fn.__name__} has no closure variable {var!r}")
