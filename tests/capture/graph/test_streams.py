"""Streams are streams: `/dev/stdout` and its kin written through, never renamed over;
our stdout is ours while the user's code prints; a closed or broken stdout, a user's
BaseException and Ctrl-C from the first instant each end in one line and the right code.

Subprocesses only where a real process is needed (descriptors, signals); the rest runs
in this process, through the same helpers and reports.cli.main."""

import json
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import threading
import time

import pytest

from graph_harness.capture.files import OutputPathError, write_output
from graph_harness.capture.paths import InputPathError, check_input, read_input
from graph_harness.reports.output.manifest import foreign_entries, read_manifest
from tests.capture.export.valid_documents import export_doc_v2
from tests.command_line import REPO, _cmd, _env
from tests.in_process import _run
from tests.snapshot import snapshot

# --- writing through descriptors, in this process ----------------------------------------------


def test_descriptor_paths_are_written_through_never_renamed(tmp_path):
    log = tmp_path / "log.txt"
    log.write_text("line 1\n")
    inode = log.stat().st_ino
    fd = os.open(log, os.O_WRONLY | os.O_APPEND)  # as the shell's `3>>log.txt`
    (tmp_path / "mylink").symlink_to(f"/proc/self/fd/{fd}")
    try:
        for path in (f"/proc/self/fd/{fd}", f"/dev/fd/{fd}", tmp_path / "mylink"):
            assert write_output(path, f"via {path}\n") == str(path)
    finally:
        os.close(fd)
    assert log.stat().st_ino == inode, "the same file, not a new one renamed over it"
    assert log.read_text().splitlines() == [
        "line 1",
        f"via /proc/self/fd/{fd}",
        f"via /dev/fd/{fd}",
        f"via {tmp_path / 'mylink'}",
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log.txt", "mylink"], "no temporary"


def test_a_pipe_behind_a_descriptor_path(tmp_path):
    r, w = os.pipe()
    try:
        write_output(f"/proc/self/fd/{w}", "through the pipe\n")
        os.close(w)
        assert os.read(r, 100) == b"through the pipe\n"
    finally:
        os.close(r)
    with pytest.raises(OutputPathError, match="descriptor 99 is not open"):
        write_output("/proc/self/fd/99", "x")


def test_fifos_devices_and_sockets_as_outputs(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    t0 = time.monotonic()
    with pytest.raises(OutputPathError, match="FIFO .* that nothing reads"):
        write_output(fifo, "x")  # refused at once, never waited on
    assert time.monotonic() - t0 < 5
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    while not got and reader.is_alive():
        try:
            write_output(fifo, "read at last\n")
            break
        except OutputPathError:  # the reader has not opened it yet
            time.sleep(0.01)
    reader.join(timeout=10)
    assert got == ["read at last\n"] and stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert write_output("/dev/null", "gone") == "/dev/null"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "sock"))
    try:
        with pytest.raises(OutputPathError, match="is a socket"):
            write_output(tmp_path / "sock", "x")
    finally:
        sock.close()
    with pytest.raises(OutputPathError, match="is a folder"):
        write_output(tmp_path, "x")


def test_a_regular_file_is_still_replaced_whole(tmp_path):
    f = tmp_path / "f.csv"
    f.write_text("old")
    inode = f.stat().st_ino
    write_output(f, "new \udc80")  # a lone surrogate goes out as its escape
    assert f.read_text() == "new \\udc80" and f.stat().st_ino != inode
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.csv"]


# --- reading: special files refused, reads bounded ----------------------------------------------


def test_special_files_are_refused_as_inputs_saying_which(tmp_path, monkeypatch):
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "zero").symlink_to("/dev/zero")
    (tmp_path / "gone").symlink_to(tmp_path / "nothing")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "sock"))
    cases = {
        "fifo": "is a FIFO (named pipe), not a file",
        "zero": "is a character device, not a file",
        "sock": "is a socket, not a file",
        ".": "is a folder, not a file",
        "gone": "is a symbolic link to nothing",
        "missing": "does not exist",
    }
    try:
        for name, says in cases.items():
            t0 = time.monotonic()
            with pytest.raises(InputPathError, match=re.escape(says)):
                check_input(tmp_path / name, "export file")
            with pytest.raises(InputPathError):
                read_input(tmp_path / name, "export")
            assert time.monotonic() - t0 < 5, f"{name}: never waited on"
    finally:
        sock.close()
    big = tmp_path / "big.json"
    big.write_bytes(b" " * 2048)
    monkeypatch.setattr("graph_harness.capture.paths.MAX_READ", 1024)
    with pytest.raises(InputPathError, match="larger than 0 MiB"):
        read_input(big, "export")


def test_commands_refuse_special_inputs_in_one_line(tmp_path):
    os.mkfifo(tmp_path / "fifo.json")
    (tmp_path / "zero.json").symlink_to("/dev/zero")
    (tmp_path / "nodes.json").write_text(json.dumps(export_doc_v2()))
    for argv, says in (
        (["advise", "./fifo.json"], "fifo.json is a FIFO"),
        (["advise", "./zero.json"], "zero.json is a character device"),
        (["advise", "./nodes.json", "--costs", "fifo.json"], "fifo.json is a FIFO"),
        (["advise", "./nodes.json", "--costs", "."], "--costs file . is a folder"),
        (["delta", "./nodes.json", "./fifo.json"], "fifo.json is a FIFO"),
        (["delta", "./nodes.json", "./"], "is a folder"),
    ):
        code, out, err = _run(argv, tmp_path)
        assert code == 2 and says in err and err.count("\n") == 1 and out == "", (argv, err)


def test_node_budget_refuses_a_fifo_record_without_waiting(tmp_path):
    from graph_harness.capture.budget import file as budget_file
    from graph_harness.capture.budget.limits import BudgetError

    os.mkfifo(tmp_path / "b.json")
    with pytest.raises(BudgetError, match="is a FIFO"):
        budget_file.lookup(tmp_path / "b.json", "k", "cpu-dispatch")


# --- the user's code: stdout, exceptions ---------------------------------------------------


PRINTING = """
import ctypes, os
import torch
import helper  # a sibling module: the user's folder answers the user's imports
print("print at import")
os.write(1, b"fd 1 at import\\n")

def make_step():
    import sympy  # tries `import gmpy2`: the gmpy2.py beside this file must not answer
    print("print in the factory")
    x = torch.ones(4)

    def step():
        print("print in the step")
        os.write(1, b"fd 1 in the step\\n")
        ctypes.CDLL(None).printf(b"printf in the step\\n")
        return x * 2

    return step
"""


def test_printing_target_leaves_stdout_to_the_json(tmp_path):
    (tmp_path / "steps.py").write_text(PRINTING)
    (tmp_path / "helper.py").write_text("X = 1\n")
    (tmp_path / "gmpy2.py").write_text("raise RuntimeError('the user gmpy2.py ran')\n")
    r = subprocess.run(
        [*_cmd(), "count", "--target", "steps:make_step", "--json", "--out", "o"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=_env(),
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)  # stdout is the document and nothing else
    assert doc["schema"] == "graph-harness/count"
    for said in ("print at import", "fd 1 at import", "print in the factory"):
        assert said in r.stderr and said not in r.stdout
    for said in ("print in the step", "fd 1 in the step", "printf in the step"):
        assert r.stderr.count(said) >= 2, said  # warm-up and capture: each on stderr
    assert "gmpy2" not in r.stderr
    assert (
        json.loads((tmp_path / "o" / "nodes-target.json").read_text()) == doc["exports"]["target"]
    )


def test_a_failing_stdout_leaves_the_earlier_output(tmp_path):
    """A reader gone away (`| head`), and a closed stdout (`>&-`): one line, the right
    code, and the --out the run would have replaced is as it was."""
    argv = ["count", "--target", "tests.targets:small_mlp", "--out", "o"]
    code, _, err = _run(argv, tmp_path)
    assert code == 0, err
    before = snapshot(tmp_path)
    broken = subprocess.Popen(
        [*_cmd(), *argv, "--force"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
        env=_env(),
    )
    broken.stdout.close()  # the reader is gone before anything is printed
    # Meanwhile, in this process: descriptor 1 closed as `>&-` leaves it, for the run.
    saved = os.dup(1)
    os.close(1)
    try:
        code, _, err_closed = _run([*argv, "--force"], tmp_path)
    finally:
        os.dup2(saved, 1)
        os.close(saved)
    err_broken = broken.stderr.read().decode()
    broken.wait(timeout=300)
    assert code == 1, err_closed
    errors = [ln for ln in err_closed.splitlines() if "error:" in ln]
    assert len(errors) == 1 and "stdout is closed" in errors[0], err_closed
    assert broken.returncode == 128 + signal.SIGPIPE, err_broken
    assert "Traceback" not in err_closed + err_broken and "error:" not in err_broken
    assert snapshot(tmp_path) == before, "the earlier output is as it was; nothing hidden left"


def test_dev_stdout_and_stderr_as_pipes(capfd):
    # `--csv /dev/stdout | cat`: the writer followed /dev/stdout to /proc/PID/fd/pipe:[...]
    # and failed; now descriptor 1 (or 2) is written, whatever it is.
    for fd, path in ((1, "/dev/stdout"), (2, "/dev/stderr")):
        r, w = os.pipe()
        saved = os.dup(fd)
        try:
            os.dup2(w, fd)
            os.close(w)
            assert write_output(path, f"csv via {path}\n") == path
        finally:
            os.dup2(saved, fd)
            os.close(saved)
        assert os.read(r, 100) == f"csv via {path}\n".encode()
        os.close(r)


def test_csv_to_dev_stdout_appended_to_a_file(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(export_doc_v2()))
    doc = export_doc_v2()
    doc["nodes"] = doc["nodes"][:2]
    doc["total_nodes"] = 2
    b.write_text(json.dumps(doc))
    gh = " ".join(_cmd())
    script = (
        'echo "line 1" > log.txt; '
        f"{gh} delta ./a.json ./b.json --json --csv /dev/stdout >> log.txt; echo $? > rc1"
    )
    r = subprocess.run(
        ["sh", "-c", script], cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=300
    )
    assert (tmp_path / "rc1").read_text() == "0\n", r.stderr
    log = (tmp_path / "log.txt").read_text()
    assert log.startswith("line 1\n{"), "the earlier line kept, the JSON after it"
    document, _, csv = log[len("line 1\n") :].partition("\n}\n")
    assert json.loads(document + "\n}")["by_kernel"], "the JSON whole"
    assert csv.startswith("type,kernel,a,b,delta\n"), csv
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "b.json", "log.txt", "rc1"]


# BaseException subclasses, raised by the user's code, in this process.
RAISING = """
import torch

class Boom(BaseException):
    pass

class Unprintable(Exception):
    def __str__(self):
        raise ValueError("no")

def boom():
    def step():
        raise Boom("from the step")
    return step

def generator_exit():
    raise GeneratorExit

def unprintable():
    raise Unprintable()

def interrupt():
    raise KeyboardInterrupt

def exits():
    def step():
        raise SystemExit(3)
    return step
"""


def test_every_exception_from_user_code_is_one_line(tmp_path):
    (tmp_path / "raising.py").write_text(RAISING)
    for fn, code, says in (
        ("boom", 1, "Boom: from the step [raised at raising.py:"),
        ("generator_exit", 1, "GeneratorExit [raised at raising.py:"),
        ("unprintable", 1, "Unprintable: (its message could not be printed)"),
        # raised by the factory, no Ctrl-C received: its error, not an interruption
        ("interrupt", 1, "KeyboardInterrupt [raised at raising.py:"),
        ("exits", 1, "called sys.exit(3) in its step"),
    ):
        got, out, err = _run(["count", "--target", f"raising.py:{fn}", "--out", "o"], tmp_path)
        lines = [ln for ln in err.splitlines() if not ln.startswith("graph-harness |")]
        assert got == code and len(lines) == 1 and says in lines[0], (fn, err)
        assert out == "" and sorted(p.name for p in tmp_path.iterdir()) == ["raising.py"]


OURS = ("capture", "reports", "kernels", "pools", "graph_harness")  # our code's folders

# --- Ctrl-C from the first instant ---------------------------------------------------------------


def test_sigint_at_any_instant_exits_130_and_leaves_nothing(tmp_path):
    """Ctrl-C while Python starts, while torch imports, while the step is captured (or,
    on a fast machine, once the export is written: then it is whole). The
    interpreter's own first milliseconds (site, the console script's `import re`) run
    before any graph-harness code can: a traceback there never passes through our files
    and is the interpreter's; from our first line on, exit 130 in one line."""
    delays = [0.0, 0.02, 0.05, 0.1, 0.3, 0.6, 1.0, 1.5, 2.2, 3.0]
    procs = []
    for i, delay in enumerate(delays):
        work = tmp_path / f"run{i}"
        work.mkdir()
        (work / "steps.py").write_text(PRINTING.replace("import helper", "import os"))
        argv = [*_cmd(), "count", "--target", "steps:make_step", "--out", "o"]
        p = subprocess.Popen(
            argv, cwd=work, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        procs.append((delay, work, p, time.monotonic()))
    for delay, _, p, started in procs:
        time.sleep(max(0.0, started + delay - time.monotonic()))
        p.send_signal(signal.SIGINT)
    ours = 0
    for delay, work, p, _ in procs:
        out, err = p.communicate(timeout=300)
        if "wrote 1 export to o" in err:  # a fast machine finished first: all of it is there
            assert p.returncode in (0, 130, -signal.SIGINT), (delay, p.returncode, err)
            manifest = read_manifest(work / "o")
            assert manifest is not None and manifest.files and foreign_entries(work / "o") == []
            json.loads((work / "o" / "nodes-target.json").read_text())
            continue
        assert p.returncode in (130, -signal.SIGINT, 1), (delay, p.returncode, err)
        assert sorted(q.name for q in work.iterdir()) == ["steps.py"], (delay, err)
        if "Traceback" in err or p.returncode == 1:  # only the interpreter's own start
            assert not any(f"{REPO}/{d}/" in err for d in OURS), (delay, err)
            continue
        if p.returncode == 130:
            ours += 1
            lines = [ln for ln in err.splitlines() if "print" not in ln and "fd 1" not in ln]
            assert (
                lines
                and lines[-1].startswith("graph-harness: ")
                and ("interrupted" in lines[-1] or "stopped by SIGINT" in lines[-1])
            ), (delay, err)
        assert out == ""
    assert ours >= len(delays) // 2, "most instants land in graph-harness's own code"


# Imported first by the interpreter (sitecustomize): reports which SIGINT handler is in
# place when the interpreter looks up graph_harness.__main__, i.e. once the package's
# __init__ has run and before any of __main__.py's imports.
PROBE = """
import importlib.abc, signal, sys

class Probe(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "graph_harness.__main__":
            sys.stderr.write("handler: " + getattr(signal.getsignal(2), "__name__", "?") + "\\n")
        return None

sys.meta_path.insert(0, Probe())
"""


@pytest.mark.parametrize("flag", [["-m", "graph_harness"], ["-mgraph_harness"]])
def test_python_m_holds_ctrl_c_from_the_package_import_on(tmp_path, flag):
    """`python -m graph_harness` imports the package before __main__ is ours: Ctrl-C is
    already taken there (it once reached __main__.py's imports as a traceback)."""
    (tmp_path / "sitecustomize.py").write_text(PROBE)
    env = _env(PYTHONPATH=f"{tmp_path}{os.pathsep}{REPO}")
    r = subprocess.run(
        [sys.executable, *flag, "--version"], capture_output=True, text=True, env=env, timeout=120
    )
    assert r.returncode == 0 and "handler: _exit_at_once" in r.stderr, r.stderr
    # a program that imports the package (not the command) keeps the handler it had
    # (Python's own, or whatever its site installed: not always default_int_handler)
    code = (
        "import signal; before = signal.getsignal(2); import graph_harness; "
        "print(signal.getsignal(2) is before, getattr(signal.getsignal(2), '__name__', ''))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.stdout.split()[:1] == ["True"] and "_exit_at_once" not in r.stdout, r.stderr


@pytest.mark.gpu
def test_printing_step_under_graph_capture_on_the_gpu(tmp_path):
    # The step prints while CUDA graph capture runs it: stdout still carries the JSON only.
    source = PRINTING.replace("import helper", "import os").replace(
        "torch.ones(4)", "torch.ones(4, device='cuda')"
    )
    (tmp_path / "steps.py").write_text(source)
    r = subprocess.run(
        [*_cmd(), "count", "--target", "steps:make_step", "--json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=_env(cpu=False),
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["exports"]["target"]["source"] == "cuda-graph"
    assert "printf in the step" in r.stderr and "printf" not in r.stdout


NOISY = """
import os, sys, threading, time
import torch

x = torch.ones(4)
stop = []


def noisy():
    # a thread of the factory's that prints while graph-harness runs, through Python and
    # through descriptor 1, until the process ends
    def loop():
        while True:
            print("noise from a thread", flush=True)
            os.write(1, b"raw noise\\n")
            time.sleep(0.0005)
    threading.Thread(target=loop, daemon=True).start()
    time.sleep(0.01)

    def step():
        x.mul_(1.0)
        time.sleep(0.02)  # the thread prints meanwhile
    return step


class Odd:
    # a step whose attribute lookups print (and return None for a name)
    def __init__(self, exit_on=None):
        self.x = torch.ones(4)
        self.exit_on = exit_on

    def __call__(self):
        self.x.mul_(1.0)

    def __getattr__(self, name):
        print(f"looked up {name}")
        if name == self.__dict__.get("exit_on"):
            sys.exit(0)
        if name.startswith("__"):
            return None
        raise AttributeError(name)


def odd():
    return Odd()


def odd_exit():
    return Odd(exit_on="reset")
"""


def test_whatever_the_targets_code_prints_never_reaches_the_results(tmp_path):
    from tests.command_line import run

    (tmp_path / "noisy.py").write_text(NOISY)
    for fn in ("noisy", "odd"):
        for cmd in ("count", "check"):
            r = run(cmd, "--target", f"{tmp_path / 'noisy.py'}:{fn}", "--json", cwd=tmp_path)
            assert r.returncode == 0, (fn, cmd, r.stderr[-2000:])
            json.loads(r.stdout)  # one document, nothing else
            noise = "noise from a thread" if fn == "noisy" else "looked up"
            assert noise not in r.stdout and noise in r.stderr, (fn, cmd)
    r = run("count", "--target", f"{tmp_path / 'noisy.py'}:odd_exit", "--out", str(tmp_path / "o"))
    assert r.returncode == 1 and not (tmp_path / "o").exists(), r.stderr
    (line,) = [x for x in r.stderr.splitlines() if ": error:" in x]
    assert "sys.exit(0) was called while graph-harness ran" in line, line


def test_a_closed_stderr_still_gives_the_results_and_the_exit_codes(tmp_path):
    # started with descriptor 2 closed (`2>&-`), Python's sys.stderr is None: the results
    # still print and the exit codes still say what happened
    from tests.command_line import SMALL, _cmd, _env

    def closed_stderr(*argv):
        return subprocess.run(
            _cmd() + list(argv), stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
            preexec_fn=lambda: os.close(2), timeout=300, env=_env(True), text=True,
        )  # fmt: skip

    r = closed_stderr("count", *SMALL, "--variant", "fused", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["exports"], r.stdout[-500:]
    r = closed_stderr("delta", "fused", str(tmp_path / "nosuch.json"))
    assert r.returncode == 2 and r.stdout == ""
