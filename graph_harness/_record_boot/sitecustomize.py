"""graph-harness record's start-up hook, first on a recorded program's PYTHONPATH.

Loads the sitecustomize that was next on the path (the program's own or its
environment's) exactly as if this one were not there, then arms the recorder: a finder
that waits for `import torch`. It imports nothing but `os` and `sys` (already loaded): at
start-up the program's folder is not yet on sys.path, so a module imported here would
shadow the program's own `secrets.py` or `json.py`. The recorder (capture/record/boot.py)
is imported once torch is, with the program's path in place (docs/record.md, "Every
process")."""

import os
import sys

_SESSION = "GRAPH_HARNESS_RECORD"  # capture/record/process.py's ENV_SESSION
_HERE = os.path.dirname(os.path.abspath(__file__))


def _arm() -> None:
    if not os.environ.get(_SESSION):
        return
    if "torch" in sys.modules and hasattr(sys.modules["torch"], "cuda"):
        _begin()  # their sitecustomize imported torch
    else:
        sys.meta_path.insert(0, _AfterTorch())


class _AfterTorch:
    """A meta-path finder that starts the recorder once `import torch` has completed
    (torch's own loader runs, then the recorder starts), and then leaves sys.meta_path."""

    def find_spec(self, fullname, path, target=None):
        if fullname != "torch":
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)  # once; the search below must not find us again
        import importlib.util  # torch is being imported: its imports are the program's

        spec = importlib.util.find_spec(fullname)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        original = loader.exec_module

        def exec_module(module):
            original(module)
            _begin()

        loader.exec_module = exec_module
        return spec


def _begin() -> None:
    """The recorder started in this process (torch is imported). Never raises: the program
    runs whatever happens here, and the recording says why it has no graphs from it."""
    try:
        hidden = _hidden_by_the_program()
        if hidden:
            _note_failure(hidden)
            return
        from graph_harness.capture.record.boot import start_from_env

        start_from_env()
    except Exception as e:
        _note_failure(f"{type(e).__name__}: {e}")


def _hidden_by_the_program():
    """Why `graph_harness` is not ours on the program's path (its own module of that name),
    or None. Looked up without importing it: the program's module must not run early."""
    import importlib.util

    mine = sys.modules.get("graph_harness")
    if mine is None:
        spec = importlib.util.find_spec("graph_harness")
        where = list(spec.submodule_search_locations or []) if spec is not None else []
        origin = getattr(spec, "origin", None)
    else:
        where, origin = list(getattr(mine, "__path__", None) or []), getattr(mine, "__file__", None)
    boot = os.path.basename(_HERE)
    if any(os.path.isdir(os.path.join(p, boot)) for p in where):
        return None
    return (
        f"the program's own module graph_harness ({origin}) hides graph-harness's recorder, "
        "so this process was not recorded; rename that module to record it"
    )


def _json_text(s: str) -> str:
    """`s` as a JSON string (the json module may be the program's own)."""
    out = []
    for c in s:
        if c in '"\\' or ord(c) < 0x20 or 0xD800 <= ord(c) < 0xE000:
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def _note_failure(why: str) -> None:
    """One `failed` line in the session folder (capture/record/recording.py reads it)."""
    try:
        argv = ", ".join(_json_text(str(a)) for a in sys.argv)
        line = f'{{"event": "failed", "pid": {os.getpid()}, "argv": [{argv}], '
        line += f'"why": {_json_text(why)}}}\n'
        name = f"{os.getpid()}-{os.urandom(4).hex()}.jsonl"
        fd = os.open(os.path.join(os.environ[_SESSION], name), os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode("utf-8"))
        finally:
            os.close(fd)
    except Exception:
        pass


def _chain() -> None:
    """Import the next sitecustomize on sys.path, as Python would have without this one."""
    mine = sys.modules.pop("sitecustomize", None)
    saved = list(sys.path)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    try:
        __import__("sitecustomize")
    except ImportError as e:
        if getattr(e, "name", None) != "sitecustomize":
            raise  # their sitecustomize failed: as it would have without us
    finally:
        sys.path[:] = saved
        theirs = sys.modules.get("sitecustomize")
        if theirs is None and mine is not None:
            sys.modules["sitecustomize"] = mine


# The program's own sitecustomize first, as if this one were not there (it may set what
# the program's imports read); then the recorder, which only waits for torch's import
# (or starts at once, where that sitecustomize imported torch).
try:
    _chain()
finally:
    _arm()
