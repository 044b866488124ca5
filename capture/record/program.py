"""Running a program under the recorder, and recording a block of Python code: the two
ways a recording is made (`graph-harness record -- PROGRAM`, `capture.record_graphs()`).

A program is run unchanged, as a child process with its own standard streams, arguments
and working folder; only its environment gains the recorder's start-up (process.py). Its
exit code is the recording's `exit_code` (-N: killed by signal N). SIGINT is the program's;
SIGTERM and SIGHUP sent to graph-harness are passed on (docs/record.md, "Running a program
under the recorder").
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from graph_harness.capture.errors import UsageError
from graph_harness.capture.paths import os_reason
from graph_harness.capture.record.keys import KeyFn, findable
from graph_harness.capture.record.process import (
    ENV_OPTIONS,
    ENV_SESSION,
    ProcessRecorder,
    RecordOptions,
    boot_folder,
)
from graph_harness.capture.record.recording import Recording
from graph_harness.capture.text import printable


class ProgramError(UsageError, ValueError):
    """A program that cannot be started (not found, not runnable): exit 2."""


def program_argv(program: list[str]) -> list[str]:
    """The command that runs `program`: `-m pkg ...` and `script.py ...` with this
    Python; anything else (`python3 serve.py`, `torchrun ...`, a console script) as it is."""
    if not program:
        raise ProgramError(
            "no program to record: give it after --, e.g. `graph-harness record -- python "
            "serve.py` or `graph-harness record -- -m my.module`"
        )
    if program[0] == "-m":
        if len(program) < 2:
            raise ProgramError("-m needs a module to run: `graph-harness record -- -m pkg.module`")
        return [sys.executable, *program]
    if program[0].endswith(".py"):
        return [sys.executable, *program]
    return list(program)


def check_program(program: list[str]) -> None:
    """Refuse, before it runs, a program that cannot start: none given, a script that is
    not there, a module this Python cannot find (ProgramError). A command (`python3 x.py`,
    a console script) is left to start or fail as it would."""
    command = program_argv(program)
    if command[0] != sys.executable:
        return
    if program[0] == "-m":
        if not findable(program[1], program_path(program)):
            raise ProgramError(f"no module {_shown(program[1])} for -m on the program's path")
        return
    try:
        found = Path(program[0]).is_file()
    except OSError as e:
        raise _not_started(program[0], e) from None
    if not found:
        raise ProgramError(f"program {_shown(program[0])} does not exist")


def _shown(name: str) -> str:
    """A program's name for a message: quoted, a control character (a newline) as its
    escape, a name too long to read cut in the middle."""
    text = printable(repr(name)[1:-1])
    return f"'{text if len(text) <= 120 else text[:60] + '...' + text[-40:]}'"


def _not_started(name: str, e: OSError) -> ProgramError:
    """Why the OS would not start (or find) `name`, with what to do."""
    if e.errno == errno.ENOEXEC:
        return ProgramError(
            f"program {_shown(name)} cannot be started: it has no #! line, and is not a "
            f"binary; give `graph-harness record -- python {_shown(name)[1:-1]}`, or begin it "
            "with `#!/usr/bin/env python3`"
        )
    if e.errno == errno.ENAMETOOLONG:
        return ProgramError(
            f"program {_shown(name)}: its name is longer than the file system allows (a "
            "name of more than 255 bytes, or a path of more than 4096): rename it, or "
            "give a shorter path to it"
        )
    if isinstance(e, FileNotFoundError):
        return ProgramError(f"program {_shown(name)} not found (is it on PATH?)")
    if isinstance(e, PermissionError):
        return ProgramError(f"program {_shown(name)} cannot be run (permission denied)")
    return ProgramError(f"program {_shown(name)} cannot be started ({os_reason(e)})")


def program_path(program: list[str]) -> list[str]:
    """Where the program's Python looks for modules, as far as it can be known here: the
    current folder (-m) or the script's folder, then PYTHONPATH, then this Python's."""
    scripts = [a for a in program if a.endswith(".py")]
    first = os.getcwd() if program[:1] == ["-m"] or not scripts else scripts[0]
    first = first if first == os.getcwd() else str(Path(first).resolve().parent)
    extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return [first, *extra, *sys.path]


def recording_env(session: Path, options: RecordOptions, base: dict | None = None) -> dict:
    """`base` (default: this process's environment) with the recorder's variables set."""
    env = dict(os.environ if base is None else base)
    env[ENV_SESSION] = str(session)
    env[ENV_OPTIONS] = options.to_env()
    path = env.get("PYTHONPATH")
    env["PYTHONPATH"] = str(boot_folder()) + (os.pathsep + path if path else "")
    return env


@contextlib.contextmanager
def _session() -> Iterator[Path]:
    """A folder of graph-harness's own for the processes' files, removed after."""
    folder = Path(tempfile.mkdtemp(prefix="graph-harness-record-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)  # made here, holds only our files


def run_program(
    program: list[str],
    options: RecordOptions | None = None,
    *,
    stdout: int | None = None,
    stderr: int | None = None,
) -> Recording:
    """Run `program` (program_argv's forms) under the recorder and return what every
    process of it captured; its exit code is the recording's `exit_code`. `stdout`,
    `stderr`: the descriptors the program writes to (default: this process's)."""
    command = program_argv(program)
    options = options if options is not None else RecordOptions()
    with _session() as session, _Signals() as signals:
        env = recording_env(session, options)
        t0 = time.perf_counter()
        try:
            child = subprocess.Popen(command, env=env, stdout=stdout, stderr=stderr)
        except OSError as e:  # it never started: nothing ran
            raise _not_started(command[0], e) from None
        code = signals.wait(child)
        wall = time.perf_counter() - t0
        recording = Recording.from_session(
            session, options=options, program=list(program), exit_code=code, wall_s=wall
        )
    if not recording.processes:
        recording.notes.append(
            "no process of the program imported torch with the recorder loaded: it imported "
            "no torch, or its Python ignored PYTHONPATH (-I, -E or -S), or runs without "
            "graph-harness installed"
        )
    return recording


class _Signals:
    """While the program runs: SIGTERM and SIGHUP passed on to it (one that comes before
    it has started, once it has), SIGINT left to it (a terminal's Ctrl-C reaches the whole
    process group; graph-harness waits for the program's answer). Set before the program
    starts, so no signal falls between; a handler of Python's is reset to the default in
    the program (exec keeps only ignored signals ignored, and none is). On the main
    thread only: elsewhere signals are not Python's to set, and the wait is plain."""

    def __init__(self) -> None:
        self.child: subprocess.Popen | None = None
        self.pending: list[int] = []
        self.saved: dict = {}

    def _handle(self, signum: int, _frame: object) -> None:
        if signum == signal.SIGINT:
            return  # the program's: it got it from the terminal too
        if self.child is None:
            self.pending.append(signum)
            return
        with contextlib.suppress(ProcessLookupError):
            self.child.send_signal(signum)

    def __enter__(self) -> _Signals:
        if threading.current_thread() is threading.main_thread():
            for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                # one ignored already (nohup's SIGHUP, a background job's SIGINT) stays
                # so, and the program inherits the ignore as it would have
                if signal.getsignal(s) == signal.SIG_IGN:
                    continue
                with contextlib.suppress(ValueError, OSError):
                    self.saved[s] = signal.signal(s, self._handle)
        return self

    def wait(self, child: subprocess.Popen) -> int:
        """The program's exit code (killed by signal N: -N), the signals that came
        before it started passed on first."""
        self.child = child
        for signum in self.pending:
            with contextlib.suppress(ProcessLookupError):
                child.send_signal(signum)
        try:
            while True:
                try:
                    return child.wait()
                except InterruptedError:
                    continue
        finally:  # the program has ended: graph-harness's own handlers again
            self.__exit__()

    def __exit__(self, *exc: object) -> None:
        for s, h in self.saved.items():
            signal.signal(s, h)
        self.saved = {}


@contextlib.contextmanager
def record_graphs(
    *,
    module_scopes: bool = RecordOptions.module_scopes,
    key: str | KeyFn | None = RecordOptions.key,
    children: bool = True,
    pool_memory: bool = RecordOptions.pool_memory,
    read_names: bool = RecordOptions.read_names,
    check: bool = RecordOptions.check,
    eager: str | None = RecordOptions.eager,
    check_sample: str = RecordOptions.check_sample,
) -> Iterator[Recording]:
    """Record every CUDA graph captured inside the block, in this process and (with
    `children`) in every Python process started inside it; the Recording yielded is
    filled when the block ends (also when it raises). Example: docs/record.md, at its start.

    `module_scopes`: attribute nodes to the modules running in each capture; `key`: an
    engine's key adapter (capture/record/keys.py), by name (every process loads it) or the
    callable itself (this process only). `pool_memory`, `read_names`, `check`, `eager`,
    `check_sample`: as `record`'s flags (`--check`: capture/live/). The process's recorder
    settings are process-wide: one recording at a time per process."""
    named = key if isinstance(key, str) or key is None else None
    options = RecordOptions(
        module_scopes=module_scopes,
        key=named,
        pool_memory=pool_memory,
        read_names=read_names,
        check=check,
        eager=eager,
        check_sample=check_sample,
    )
    recording = Recording(options=options, program=None)
    with contextlib.ExitStack() as stack:
        session = stack.enter_context(_session()) if children else None
        saved = {k: os.environ.get(k) for k in (ENV_SESSION, ENV_OPTIONS, "PYTHONPATH")}
        if session is not None:
            os.environ.update(
                recording_env(session, options, {k: v for k, v in saved.items() if v})
            )
        extra = [] if named is not None or key is None else [(_name_of(key), key)]
        local = ProcessRecorder(None, options, adapters=extra, children=session).start()
        t0 = time.perf_counter()
        try:
            yield recording
        finally:
            local.stop()
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
            # the records as they stand now: replays after the block are not the block's
            mine = [dataclasses.replace(r) for r in local.records]
            got = (
                Recording.from_session(session, options=options, local=mine, local_pid=os.getpid())
                if session is not None
                else Recording(options=options, graphs=mine)
            )
            recording.graphs, recording.processes = got.graphs, got.processes
            recording.notes = local.notes + got.notes
            recording.wall_s = time.perf_counter() - t0


def _name_of(fn: object) -> str:
    return getattr(fn, "__qualname__", None) or type(fn).__name__
