"""The recorder's start in each Python process of a recorded program:
graph_harness/_record_boot/sitecustomize.py calls `start_from_env` at the process's
start-up, and this waits for torch's import (a post-import hook) before anything of the
recorder, or what it brings, is imported (capture/record/process.py's notes say why).
Nothing here imports more than the standard library and process.py."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import sys
from pathlib import Path
from typing import Any

from graph_harness.capture.record.process import (
    ENV_OPTIONS,
    ENV_SESSION,
    ProcessRecorder,
    RecordOptions,
)

_started: list[ProcessRecorder] = []


def start_from_env() -> None:
    """Start this process's recorder from the environment `graph-harness record` set
    (graph_harness/_record_boot/sitecustomize.py calls this), once torch is imported.
    Never raises: a recorder that cannot start writes why into the session folder."""
    session = os.environ.get(ENV_SESSION)
    if not session or _started:
        return
    options = RecordOptions.from_env(os.environ.get(ENV_OPTIONS))

    def begin(_module: object = None) -> None:
        if _started:
            return
        try:  # torch is imported now: the recorder, and what it brings, can come
            _started.append(ProcessRecorder(Path(session), options).start())
        except Exception as e:  # the program runs on, unrecorded; the recording says why
            _note_failure(Path(session), f"{type(e).__name__}: {e}")

    if "torch" in sys.modules and hasattr(sys.modules["torch"], "cuda"):
        begin()
    else:
        when_imported("torch", begin)


def booted() -> bool:
    """Whether this process's recorder was started by `graph-harness record`'s start-up
    hook (a recorded program's process), not by record_graphs() in the user's own."""
    return bool(_started)


def _note_failure(session: Path, why: str) -> None:
    line = {"event": "failed", "pid": os.getpid(), "argv": sys.argv, "why": why}
    with contextlib.suppress(OSError):
        path = session / f"{os.getpid()}-{secrets.token_hex(4)}.jsonl"
        path.write_text(json.dumps(line) + "\n")


class _AfterImport:
    """A meta-path finder that runs `callback(module)` once `name` has been imported
    (the module's own loader, its exec_module followed by the callback)."""

    def __init__(self, name: str, callback: Any) -> None:
        self.name, self.callback = name, callback

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != self.name:
            return None
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(self)  # once; the search below must not find us again
        import importlib.util

        spec = importlib.util.find_spec(fullname)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        original, callback = loader.exec_module, self.callback

        def exec_module(module: object) -> None:
            original(module)
            callback(module)

        loader.exec_module = exec_module
        return spec


def when_imported(name: str, callback: Any) -> None:
    """Run `callback(module)` right after `name` is first imported."""
    sys.meta_path.insert(0, _AfterImport(name, callback))
