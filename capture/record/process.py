"""One process's recording: the listener that keeps what hooks.py sees, writes it to the
session folder as it goes, and its start in every process of a recorded program.

How a program's processes are reached: `graph-harness record` (and `record_graphs()` with
children) sets two variables in the program's environment and puts graph-harness's
start-up folder first on PYTHONPATH (graph_harness/_record_boot/sitecustomize.py, which
loads any sitecustomize of the program's own after it). Every Python process the program
starts, by spawn, forkserver, subprocess or a console script, inherits them and starts
its recorder; a forked child goes on with its parent's (os.register_at_fork) under its own
pid and file. Nothing is done in a process until torch is imported: a post-import hook
starts the recorder when `import torch` completes (before any of the program's code can
capture), so processes that never import torch leave no trace.

The session folder gets, per process, `<pid>-<token>.jsonl`: one line when the recorder
starts (the process), one per capture (its GraphRecord, the node export included, written
as soon as the capture ends), one when the process exits (replay counts and releases);
and `<pid>-<token>.replays.json`, the replay counts at the last flush, replaced whole
(every 4,096 replays of a graph at most every 2 s, at each capture, and at exit). A
process that ends without running its exit handlers (killed, `os._exit`) keeps every
capture and the replays of its last flush; the recording says which processes did not
exit cleanly. Exit handlers: atexit, and multiprocessing's own finalizers for its
children (which leave through os._exit).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import secrets
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from graph_harness.capture.record import hooks
from graph_harness.capture.record.graphs import GraphRecord

ENV_SESSION = "GRAPH_HARNESS_RECORD"  # the session folder every process writes into
ENV_OPTIONS = "GRAPH_HARNESS_RECORD_OPTIONS"  # RecordOptions as JSON
FLUSH_EVERY_S = 2.0
PROCESS_SCHEMA = "graph-harness/record-process"


def boot_folder() -> Path:
    """The folder put first on a recorded program's PYTHONPATH (its sitecustomize starts
    the recorder in each process), wherever graph-harness is installed."""
    import graph_harness

    return Path(graph_harness.__file__).resolve().parent / "_record_boot"


@dataclass(frozen=True, kw_only=True)
class RecordOptions:
    """How a program is recorded: the one source of these defaults (`graph-harness
    record`'s flags, `capture.record(...)`'s keywords)."""

    module_scopes: bool = False  # attribute nodes to the modules running in each capture
    key: str | None = None  # a key adapter, MODULE:FUNCTION or file.py:FUNCTION (keys.py)
    pool_memory: bool = True  # read each graph's pool from the caching allocator

    def to_env(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_env(cls, text: str | None) -> RecordOptions:
        try:
            doc = json.loads(text) if text else {}
            return cls(**{k: v for k, v in doc.items() if k in cls.__dataclass_fields__})
        except (TypeError, ValueError):
            return cls()


class ProcessRecorder:
    """The records of this process's captures (`records`), in capture order; with a
    `session` folder, written there as they come (see the module's notes)."""

    def __init__(
        self,
        session: Path | None,
        options: RecordOptions | None = None,
        *,
        adapters: list | None = None,
    ) -> None:
        """`adapters`: key adapters given as callables, asked first (record_graphs(key=fn))."""
        self.session = session
        self.options = options if options is not None else RecordOptions()
        self._adapters = list(adapters or [])
        self.records: list[GraphRecord] = []
        self.notes: list[str] = []
        self._lock = threading.Lock()
        self._stopped = False
        self._last_flush = 0.0
        self._provenance = None
        self._open_files()

    def _open_files(self) -> None:
        self.pid = os.getpid()
        self._stem = None
        if self.session is not None:
            self._stem = self.session / f"{self.pid}-{secrets.token_hex(4)}"

    # --- starting and stopping ----------------------------------------------------------

    def start(self) -> ProcessRecorder:
        from graph_harness.capture.record.keys import entry_point_adapters, named_adapter

        adapters = entry_point_adapters()
        if self.options.key is not None:
            adapters.insert(0, named_adapter(self.options.key))
        adapters = self._adapters + adapters
        hooks.configure(
            adapters=adapters,
            module_scopes=self.options.module_scopes,
            pool_memory=self.options.pool_memory,
            attribute=attribute_compiled if self.options.module_scopes else None,
        )
        if self.options.module_scopes:
            self._start_module_scopes()
        hooks.listen(self)
        hooks.on_many_replays(self._maybe_flush)
        self._write({"event": "process", **process_info(), "notes": self.notes})
        atexit.register(self.stop)
        self._mp_exit = _register_multiprocessing_exit(self)
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._forked)
        return self

    def _start_module_scopes(self) -> None:
        from graph_harness.capture.scopes.modules import install_hooks
        from graph_harness.capture.scopes.provenance import collecting

        install_hooks()
        self._collecting = collecting()
        self._provenance = self._collecting.__enter__()
        _PROVENANCE[0] = self._provenance
        if not self._provenance.supported:
            self.notes.append(
                f"compiled code stays in its enclosing scope: {self._provenance.unavailable}"
            )

    def stop(self) -> None:
        """Stop listening and write the exit line (once; only in the process that started)."""
        if self._stopped or os.getpid() != self.pid:
            return
        self._stopped = True
        atexit.unregister(self.stop)
        hooks.unlisten(self)
        hooks.on_many_replays(self._maybe_flush, remove=True)
        if self.options.module_scopes:
            from graph_harness.capture.scopes.modules import uninstall_hooks

            with contextlib.suppress(Exception):
                self._collecting.__exit__(None, None, None)
            with contextlib.suppress(Exception):
                uninstall_hooks()
            _PROVENANCE[0] = None
        self.flush(final=True)

    def _forked(self) -> None:
        # the parent's captures are the parent's: the child starts a file of its own
        if self._stopped:
            return
        self._lock = threading.Lock()
        self.records = []
        self._open_files()
        self._write({"event": "process", **process_info(), "forked": True, "notes": []})

    # --- what hooks.py tells -------------------------------------------------------------

    def captured(self, record: GraphRecord) -> None:
        if not self._mp_exit:  # multiprocessing loaded after torch: its exit hooks now
            self._mp_exit = _register_multiprocessing_exit(self)
        with self._lock:
            self.records.append(record)
        self._write({"event": "graph", "record": record.to_dict()})
        self.flush()

    def _maybe_flush(self) -> None:
        if time.monotonic() - self._last_flush >= FLUSH_EVERY_S:
            self.flush()

    def replay_counts(self) -> dict[str, Any]:
        return {str(r.index): {"replays": r.replays, "released": r.released} for r in self.records}

    def flush(self, *, final: bool = False) -> None:
        """Write the replay counts now (the exit line too when `final`)."""
        if self._stem is None or os.getpid() != self.pid:
            return
        self._last_flush = time.monotonic()
        counts = self.replay_counts()
        with contextlib.suppress(OSError):
            tmp = self._stem.with_suffix(".replays.tmp")
            tmp.write_text(json.dumps(counts))
            os.replace(tmp, self._stem.with_suffix(".replays.json"))
        if final:
            self._write({"event": "exit", "replays": counts, "notes": self.notes})

    def _write(self, line: dict) -> None:
        if self._stem is None:
            return
        text = json.dumps(line, allow_nan=False) + "\n"
        with self._lock, contextlib.suppress(OSError, ValueError):
            # one write of one whole line, appended: a reader sees whole lines, and a
            # process killed mid-write leaves at most one partial line, at the end
            fd = os.open(
                self._stem.with_suffix(".jsonl"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644
            )
            try:
                os.write(fd, text.encode("utf-8", "backslashreplace"))
            finally:
                os.close(fd)


_PROVENANCE: list = [None]  # the process's Inductor provenance log under --module-scopes


def attribute_compiled(nodes: list, modules: Any) -> str | None:
    """Compiled code's nodes moved into the modules Inductor's provenance names (a
    recorded capture's module scopes: capture/scopes/program.py); what was done, in words
    (None: nothing compiled was matched)."""
    from graph_harness.capture.attribution.provenance_match import refine

    log = _PROVENANCE[0]
    if log is None or not log.graphs or not nodes:
        return None  # nothing compiled (or no provenance, said once for the process)
    if not modules.names:
        return "enclosing scope (no module was running around the capture to name them)"
    how = refine(nodes, log.graphs, set(modules.names.values()), set(modules.known))
    matched = how["kernel"] + how["extern"] + how["externs"] + how["edge"]
    if not matched:
        return f"enclosing scope (none of the {len(log.graphs)} compiled graphs' kernels matched)"
    return (
        f"inductor provenance of the program's compiled graphs: {how['kernel']} nodes by "
        f"kernel name, {how['extern'] + how['externs'] + how['edge']} extern-call nodes by "
        f"position, {how['fused']} fused across modules"
    )


def process_info() -> dict[str, Any]:
    """What the recording says of this process."""
    import torch

    return {
        "schema": PROCESS_SCHEMA,
        "pid": os.getpid(),
        "ppid": os.getppid(),
        "argv": [str(a) for a in sys.argv],
        "executable": sys.executable,
        "torch": torch.__version__,
        "python": sys.version.split()[0],
        "started": time.time(),
    }


def _register_multiprocessing_exit(rec: ProcessRecorder) -> bool:
    """multiprocessing's children leave through os._exit after running its finalizers:
    run `rec.stop` among them. A child forked by multiprocessing (fork, forkserver) clears
    the finalizers it inherited, then runs its after-fork hooks: one registers the stop
    again there. Only where multiprocessing is loaded already (False: try again later)."""
    if sys.modules.get("multiprocessing") is None:
        return False
    with contextlib.suppress(Exception):
        from multiprocessing import util

        util.Finalize(None, rec.stop, exitpriority=0)
        util.register_after_fork(rec, _finalize_in_child)
    return True


def _finalize_in_child(rec: ProcessRecorder) -> None:
    from multiprocessing import util

    util.Finalize(None, rec.stop, exitpriority=0)


# --- starting in a process of a recorded program ----------------------------------------------

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
        try:
            _started.append(ProcessRecorder(Path(session), options).start())
        except Exception as e:  # the program runs on, unrecorded; the recording says why
            _note_failure(Path(session), f"{type(e).__name__}: {e}")

    if "torch" in sys.modules and hasattr(sys.modules["torch"], "cuda"):
        begin()
    else:
        when_imported("torch", begin)


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
