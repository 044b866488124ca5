"""The recorder's start in each Python process of a recorded program:
graph_harness/_record_boot/sitecustomize.py imports nothing at the process's start-up and
calls `start_from_env` once torch is imported (a post-import hook of its own), so what
the recorder brings is imported with the program's path in place, after torch's own
imports (capture/record/process.py's notes say why)."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path

from graph_harness.capture.record.process import (
    ENV_OPTIONS,
    ENV_SESSION,
    ProcessRecorder,
    RecordOptions,
)

_started: list[ProcessRecorder] = []


def start_from_env() -> None:
    """Start this process's recorder from the environment `graph-harness record` set
    (graph_harness/_record_boot/sitecustomize.py calls this once torch is imported).
    Never raises: a recorder that cannot start writes why into the session folder."""
    session = os.environ.get(ENV_SESSION)
    if not session or _started:
        return
    options = RecordOptions.from_env(os.environ.get(ENV_OPTIONS))
    try:
        _started.append(ProcessRecorder(Path(session), options).start())
    except Exception as e:  # the program runs on, unrecorded; the recording says why
        _note_failure(Path(session), f"{type(e).__name__}: {e}")


def booted() -> bool:
    """Whether this process's recorder was started by `graph-harness record`'s start-up
    hook (a recorded program's process), not by record_graphs() in the user's own."""
    return bool(_started)


def _note_failure(session: Path, why: str) -> None:
    line = {"event": "failed", "pid": os.getpid(), "argv": sys.argv, "why": why}
    with contextlib.suppress(OSError):
        # os.urandom, not secrets: a program's own secrets.py must stay the program's
        path = session / f"{os.getpid()}-{os.urandom(4).hex()}.jsonl"
        path.write_text(json.dumps(line) + "\n")
