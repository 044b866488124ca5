"""Where a capture was opened, and what tells a graph from its siblings: both read off the
Python stack at `capture_begin`, once per capture (never on a replay).

The stack splits into the *library frame* (the innermost in an installed package or the
standard library, e.g. Inductor's `_record`) and the *user frame* (the innermost outside
every installed package). A graph's key, in order of preference (`key_source`): `engine`
(an adapter, keys.py), `inductor`, `shapes` (reads.py), `arguments`, `order`; what each
holds: docs/record.md, "Sites and key sources".
"""

from __future__ import annotations

import os
import sys
import types
from dataclasses import dataclass, field

from graph_harness.capture.text import printable

_HERE = os.path.dirname(os.path.abspath(__file__))
_MECHANICS = {
    # torch's capture machinery: the frames every capture passes through
    ("torch/cuda/graphs.py", "__enter__"),
    ("torch/cuda/graphs.py", "__exit__"),
    ("torch/cuda/graphs.py", "capture_begin"),
    ("torch/cuda/graphs.py", "capture_end"),
}
MAX_STACK = 12  # frames kept of a site's stack, innermost first
MAX_KEY = 160  # characters of a key made from arguments


def _library_roots() -> tuple[str, ...]:
    """The standard library's folder and every site-packages one. Read from modules the
    interpreter has already imported (`os`, `site`) and from sys.path: this runs in the
    program's process once torch is imported, and an import here (`sysconfig`) could find
    a module of the program's own folder instead."""
    roots = {os.path.dirname(os.__file__)}
    # `site` as the interpreter ran it; under `python -S` a `site` in sys.modules may be the
    # program's own, and sys.path names the folders anyway
    site = None if sys.flags.no_site else sys.modules.get("site")
    for read in ("getsitepackages", "getusersitepackages"):
        try:
            got = getattr(site, read)()
            roots.update([got] if isinstance(got, str) else [str(p) for p in got])
        except Exception:
            continue
    roots.update(p for p in sys.path if os.path.basename(p) in ("site-packages", "dist-packages"))
    return tuple(os.path.abspath(r) + os.sep for r in roots if r)


def _our_roots() -> tuple[str, ...]:
    """graph-harness's own folders, wherever it is installed from (a source tree keeps
    them side by side, a wheel under graph_harness/), found without importing them."""
    import importlib.util

    out = []
    for name in (
        "graph_harness",
        *(f"graph_harness.{p}" for p in ("capture", "reports", "pools", "kernels")),
    ):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        if spec is not None and spec.origin:
            out.append(os.path.dirname(os.path.abspath(spec.origin)) + os.sep)
    return tuple(out)


_ROOTS = _library_roots()
_OURS = _our_roots()


def is_library(filename: str) -> bool:
    """Whether code in `filename` is library code: an installed package, the standard
    library, graph-harness itself (wherever it is installed from), or code a library
    generated (Inductor's wrappers in its cache folder, `<eval_with_key>` FX modules)."""
    if filename.startswith("<"):
        return True
    path = os.path.abspath(filename)
    if "site-packages" in path or "dist-packages" in path or path.startswith(_ROOTS):
        return True
    return path.startswith(_OURS) or "torchinductor_" in path


def _short(filename: str) -> str:
    """A file as a reader names it: from the package root for library code
    (`torch/_inductor/cudagraph_trees.py`), relative to the current folder for the
    program's own where it lies below it, else as it is."""
    path = os.path.abspath(filename)
    for marker in ("site-packages" + os.sep, "dist-packages" + os.sep):
        if marker in path:
            return path.split(marker, 1)[1]
    for root in _ROOTS:
        if path.startswith(root):
            return path[len(root) :]
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive
        return path
    return rel if not rel.startswith("..") else path


def _is_mechanics(frame: types.FrameType) -> bool:
    code = frame.f_code
    path = code.co_filename.replace(os.sep, "/")
    if path.startswith(_HERE.replace(os.sep, "/")) or path.endswith("/contextlib.py"):
        return True
    return any(path.endswith(f) and code.co_name == n for f, n in _MECHANICS)


def frames_of(start: types.FrameType | None) -> list[types.FrameType]:
    """The site's frames, innermost first, from `start` outward, the machinery left out."""
    out = []
    f = start
    while f is not None:
        if not _is_mechanics(f):
            out.append(f)
        f = f.f_back
    return out


def where(frame: types.FrameType) -> str:
    """`file:line in function` (the function qualified where Python knows its class)."""
    code = frame.f_code
    name = getattr(code, "co_qualname", code.co_name)
    return printable(f"{_short(code.co_filename)}:{frame.f_lineno} in {name}")


@dataclass(frozen=True, kw_only=True)
class CaptureSite:
    """Where a capture was opened (see the module's notes): `user`, `library` (each
    `file:line in function`, or None) and the stack, innermost first."""

    user: str | None
    library: str | None
    stack: tuple[str, ...] = field(default_factory=tuple)

    @property
    def label(self) -> str:
        """One line: the library frame and the user frame under it, where both are."""
        parts = [p for p in (self.library, self.user) if p]
        return " <- ".join(parts) if parts else "<unknown>"

    def to_dict(self) -> dict:
        return {"user": self.user, "library": self.library, "stack": list(self.stack)}


def site_of(frames: list[types.FrameType]) -> CaptureSite:
    user = next((f for f in frames if not is_library(f.f_code.co_filename)), None)
    lib = next((f for f in frames if is_library(f.f_code.co_filename)), None)
    return CaptureSite(
        user=where(user) if user is not None else None,
        library=where(lib) if lib is not None else None,
        stack=tuple(where(f) for f in frames[:MAX_STACK]),
    )


# --- keys -----------------------------------------------------------------------------------


def describe(value: object) -> str | None:
    """A value as a key shows it: a tensor by its shape, a number or a short string as
    itself, a list or tuple of those by its items (the first 4); None for anything else,
    and for a value that raises as it is read (a jagged tensor's symbolic size)."""
    try:
        return _describe(value)
    except Exception:
        return None


def _describe(value: object) -> str | None:
    shape = getattr(value, "shape", None)
    if shape is not None and hasattr(value, "dtype"):
        return "[" + ", ".join(str(int(s)) for s in shape) + "]"
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return repr(value) if len(value) <= 24 else None
    if isinstance(value, (list, tuple)) and value:
        items = [describe(v) for v in value[:4]]
        items = [i for i in items if i is not None]
        if not items:
            return None
        more = f", +{len(value) - 4}" if len(value) > 4 else ""
        return "(" + ", ".join(items) + more + ")"
    return None


def arguments_key(frames: list[types.FrameType], *, depth: int = 3) -> str | None:
    """The arguments of the innermost frame (of the first `depth`: the function that
    opened the capture and its callers just outside, not the program's loops further
    out) that has tensors or numbers among its arguments, `self` and `cls` left out:
    `bs=8`, `x[8, 64]`."""
    for f in frames[:depth]:
        code = f.f_code
        n = code.co_argcount + code.co_kwonlyargcount
        n += bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)  # *args, **kwargs
        parts = []
        for name in code.co_varnames[:n]:
            if name in ("self", "cls") or name not in f.f_locals:
                continue
            value = f.f_locals[name]
            if isinstance(value, dict):  # **kwargs
                items = ((k, describe(v)) for k, v in list(value.items())[:6])
                parts += [f"{k}={d}" for k, d in items if d is not None]
                continue
            d = describe(value)
            if d is not None:
                parts.append(f"{name}{d}" if d.startswith("[") else f"{name}={d}")
        if parts:
            text = printable(" ".join(parts))
            return text if len(text) <= MAX_KEY else text[: MAX_KEY - 3] + "..."
    return None


def inductor_key(frames: list[types.FrameType]) -> tuple[str, dict] | None:
    """Where Inductor's cudagraph tree records the graph (CUDAGraphNode._record): the key
    and what it is made of, else None."""
    for f in frames:
        code = f.f_code
        if not code.co_filename.replace(os.sep, "/").endswith("_inductor/cudagraph_trees.py"):
            continue
        if code.co_name == "__init__" and type(f.f_locals.get("self")).__name__ == (
            "CUDAGraphTreeManager"
        ):  # the empty graph a tree manager captures to keep its pool alive
            return "inductor tree manager's pool (empty)", {
                "compile_id": None,
                "function": None,
                "graph": None,
                "ints": [],
            }
        if code.co_name != "_record":
            continue
        node = f.f_locals.get("self")
        wrapped = getattr(node, "wrapped_function", None)
        if wrapped is None:
            continue
        fid = getattr(getattr(wrapped, "id", None), "id", None)
        gid = getattr(getattr(node, "id", None), "id", None)
        compile_id = getattr(node, "compile_id", None)
        static = set(getattr(wrapped, "static_input_idxs", ()) or ())
        inputs = f.f_locals.get("inputs") or []
        ints = [v for v in inputs if isinstance(v, int) and not isinstance(v, bool)]
        shapes = [
            describe(v)
            for i, v in enumerate(inputs)
            if i not in static and hasattr(v, "shape") and hasattr(v, "dtype")
        ]
        head = "inductor" + (f" {compile_id}" if compile_id is not None else "")
        parts = [f"{head} fn {fid} graph {gid}"]
        if ints:
            parts.append("ints " + ",".join(map(str, ints)))
        if shapes:
            parts.append("inputs " + " ".join(shapes[:6]) + (" ..." if len(shapes) > 6 else ""))
        info = {
            "compile_id": None if compile_id is None else str(compile_id),
            "function": fid,
            "graph": gid,
            "ints": ints,
        }
        return printable(
            ": ".join([parts[0], ", ".join(parts[1:])]) if parts[1:] else parts[0]
        ), info
    return None


def caller_frame() -> types.FrameType | None:
    """The frame that called into the wrapper calling this (two levels up)."""
    return sys._getframe(2)
