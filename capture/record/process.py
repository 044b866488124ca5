"""One process's recording: the listener that keeps what hooks.py sees, writes it to the
session folder as it goes, and its start in every process of a recorded program.

`record` puts two variables in the program's environment and graph_harness/_record_boot
first on PYTHONPATH, so every Python process the program starts (a forked child too)
starts its recorder when `import torch` completes. Per process, `<pid>-<token>.jsonl` (a
line at start, one per capture as it ends, one at exit) and `<pid>-<token>.replays.json`
(replay counts at the last flush); a process killed keeps every capture. How processes are
reached, and what is flushed when: docs/record.md, "The session folder, process by process".
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import sys
import threading
import time
import weakref
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graph_harness.capture.record.compiled_scopes import attribute_compiled, unset_attribute

# Nothing of torch or pandas at this module's top: the parent (`graph-harness record`)
# imports it to start a program, and needs neither for that. In a recorded program's
# processes it is imported once torch is (graph_harness/_record_boot imports nothing at
# start-up: a program's own modules must stay its own).
if TYPE_CHECKING:
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
    read_names: bool = True  # name a graph no key names by its region's reads (reads_mode.py)
    check: bool = False  # record --check: replays compared with their eager forms
    eager: str | None = None  # an eager-form adapter, MODULE:FUNCTION or file.py:FUNCTION
    check_sample: str = "8,2"  # which replays are checked (capture/live/sample.py)

    def to_env(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_env(cls, text: str | None) -> RecordOptions:
        try:
            doc = json.loads(text) if text else {}
            return cls(**{k: v for k, v in doc.items() if k in cls.__dataclass_fields__})
        except (TypeError, ValueError):
            return cls()


def _hooks() -> Any:
    from graph_harness.capture.record import hooks

    return hooks


def _settings() -> Any:
    from graph_harness.capture.record import settings

    return settings


class ProcessRecorder:
    """The records of this process's captures (`records`), in capture order; with a
    `session` folder, written there as they come (see the module's notes)."""

    def __init__(
        self,
        session: Path | None,
        options: RecordOptions | None = None,
        *,
        adapters: list | None = None,
        children: Path | None = None,
    ) -> None:
        """`adapters`: key adapters given as callables, asked first (record_graphs(key=fn)).
        `children`: the session a forked child writes into, where this process itself
        writes none (record_graphs keeps its own records in memory)."""
        self.session = session
        self.children = children
        self.options = options if options is not None else RecordOptions()
        self._adapters = list(adapters or [])
        self.records: list[GraphRecord] = []
        self.notes: list[str] = []
        self._lock = threading.Lock()
        self._stopped = False
        self._check: Any = None  # record --check's checker (capture/live), once started
        self._last_flush = 0.0
        self._module_scopes: Any = None  # --module-scopes' hooks (module_hooks.py)
        self._saved: Any = None  # the recorder settings before this one's (restored at stop)
        self._unannounced: dict | None = None  # a forked child's first line, not yet written
        self._open_files()

    def _open_files(self) -> None:
        self.pid = os.getpid()
        self._stem = None
        if self.session is not None:
            # os.urandom, not secrets: a program's own secrets.py stays the program's
            self._stem = self.session / f"{self.pid}-{os.urandom(4).hex()}"

    # --- starting and stopping ----------------------------------------------------------

    def start(self) -> ProcessRecorder:
        from graph_harness.capture.record.keys import entry_point_adapters, named_adapter

        adapters = entry_point_adapters()
        if self.options.key is not None:
            adapters.insert(0, named_adapter(self.options.key))
        adapters = self._adapters + adapters
        hooks = _hooks()
        self._check = self._checker()
        # one recording's settings at a time: a recording inside another (record_graphs
        # in a recorded program) takes its own, and gives the outer one's back at stop
        self._saved = _settings().configure(
            adapters=adapters,
            module_scopes=self.options.module_scopes,
            pool_memory=self.options.pool_memory,
            read_names=self.options.read_names,
            attribute=attribute_compiled if self.options.module_scopes else unset_attribute,
            check=self._check,
        )
        if self.options.module_scopes:
            from graph_harness.capture.record.module_hooks import ProcessModuleScopes

            self._module_scopes = ProcessModuleScopes(self.notes)
            self._module_scopes.start()
        hooks.listen(self)
        hooks.on_many_replays(self._maybe_flush)
        self._write({"event": "process", **process_info(), "notes": self.notes})
        _LIVE.add(self)
        _exit_hooks()
        return self

    def _checker(self) -> Any:
        """record --check's checker for this process (None: not asked for). Imported by
        name: the checker sits above the recorder (capture/live), which never imports it."""
        if not self.options.check:
            return None
        import importlib

        live = importlib.import_module("graph_harness.capture.live")
        return live.checker(self.options.check_sample, self.options.eager)

    def stop(self) -> None:
        """Stop listening and write the exit line (once; only in the process that started)."""
        if self._stopped or os.getpid() != self.pid:
            return
        self._stopped = True
        _LIVE.discard(self)
        if self._check is not None:  # an assertion the program's own code met is named
            with contextlib.suppress(Exception):
                self._check.settle()
        for r in self.records:  # replays after the recording are not checked
            r.live = None
        hooks = _hooks()
        hooks.unlisten(self)
        hooks.on_many_replays(self._maybe_flush, remove=True)
        if self._saved is not None:
            _settings().restore(self._saved)
        if self._module_scopes is not None:
            self._module_scopes.stop()
        self.flush(final=True)

    def _forked(self) -> None:
        # the parent's captures are the parent's: the child starts a file of its own (in
        # the children's session, where the parent keeps its records in memory)
        if self._stopped:
            return
        self._lock = threading.Lock()
        self.records = []
        if self.children is not None:
            self.session = self.children
        self._open_files()
        # said at its first capture: a child forked only to exec another program (a
        # subprocess) captures nothing here and leaves no file
        self._unannounced = {"event": "process", **process_info(), "forked": True, "notes": []}

    # --- what hooks.py tells -------------------------------------------------------------

    def captured(self, record: GraphRecord) -> None:
        _exit_hooks()  # multiprocessing loaded after torch: its exit hooks now
        if self._unannounced is not None:
            line, self._unannounced = self._unannounced, None
            self._write(line)
        with self._lock:
            self.records.append(record)
        self._write({"event": "graph", "record": record.to_dict()})
        self.flush()

    def _maybe_flush(self) -> None:
        if time.monotonic() - self._last_flush >= FLUSH_EVERY_S:
            self.flush()

    def replay_counts(self) -> dict[str, Any]:
        """Each graph's replays, release and check verdict, as they stand now."""
        out = {}
        for r in self.records:
            out[str(r.index)] = {"replays": r.replays, "released": r.released}
            if r.check is not None:
                out[str(r.index)]["check"] = r.check.to_dict()
        return out

    def flush(self, *, final: bool = False) -> None:
        """Write the replay counts now (the exit line too when `final`)."""
        if self._stem is None or os.getpid() != self.pid or self._unannounced is not None:
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


# The recorders live in this process, weakly: one set of exit and fork hooks serves them
# all (a hook per recorder would keep every record_graphs()'s records alive for good).
_LIVE: weakref.WeakSet[ProcessRecorder] = weakref.WeakSet()


class _Hooked(dict):
    """Which hooks are in (a dict multiprocessing's after-fork registry can hold weakly)."""


_HOOKED = _Hooked(atexit=False, fork=False, multiprocessing=False)


def stop_all() -> None:
    """Stop every live recorder of this process: each writes its exit line."""
    for rec in list(_LIVE):
        with contextlib.suppress(Exception):
            rec.stop()


_stop_all = stop_all


def _forked_all() -> None:
    for rec in list(_LIVE):
        with contextlib.suppress(Exception):
            rec._forked()


def _exit_hooks() -> None:
    """The hooks that end every live recorder (once each per process): atexit; os's fork
    hook (a child goes on under its own pid and file); multiprocessing's finalizers, run by
    its children before they leave through os._exit, once multiprocessing is loaded (a
    child it forks clears the finalizers it inherited, then runs its after-fork hooks:
    one registers the stop again there)."""
    if not _HOOKED["atexit"]:
        atexit.register(_stop_all)
        _HOOKED["atexit"] = True
    if not _HOOKED["fork"] and hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_forked_all)
        _HOOKED["fork"] = True
    if not _HOOKED["multiprocessing"] and sys.modules.get("multiprocessing") is not None:
        with contextlib.suppress(Exception):
            from multiprocessing import util

            util.Finalize(None, _stop_all, exitpriority=0)
            util.register_after_fork(_HOOKED, _finalize_in_child)
        _HOOKED["multiprocessing"] = True


def _finalize_in_child(_: object) -> None:
    from multiprocessing import util

    util.Finalize(None, _stop_all, exitpriority=0)
