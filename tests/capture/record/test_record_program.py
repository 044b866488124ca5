"""`graph-harness record -- PROGRAM` on the CPU: the program runs as it would without the
recorder (its output, its own start-up hooks, its exit code and signals), every process
that imports torch is listed, and what cannot run is refused before anything does. What a
GPU captures is tests/capture/record/test_record_gpu.py's."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from graph_harness.capture.record.program import ProgramError, program_argv

REPO = Path(__file__).resolve().parents[3]
GH = [sys.executable, "-m", "graph_harness"]


def gh(*args, env=None, cwd=None, timeout=120):
    return subprocess.run(
        [*GH, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout
    )


def test_program_forms():
    assert program_argv(["-m", "pkg", "-x"]) == [sys.executable, "-m", "pkg", "-x"]
    assert program_argv(["serve.py", "--a"]) == [sys.executable, "serve.py", "--a"]
    assert program_argv(["python3", "serve.py"]) == ["python3", "serve.py"]
    for bad in ([], ["-m"]):
        with pytest.raises(ProgramError):
            program_argv(bad)


def test_the_program_runs_as_it_would_and_its_exit_code_is_kept(tmp_path):
    # the program's own sitecustomize (first on its PYTHONPATH) still runs, after ours
    own = tmp_path / "own"
    own.mkdir()
    (own / "sitecustomize.py").write_text("import os\nos.environ['OWN_SITE'] = 'ran'\n")
    prog = tmp_path / "prog.py"
    prog.write_text(
        "import os, sys, torch\n"
        "print('out', os.environ.get('OWN_SITE'), sys.argv[1:])\n"
        "print('err', file=sys.stderr)\n"
        "sys.exit(3)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(own)}
    out = tmp_path / "rec"
    r = gh("record", "--out", str(out), "--", str(prog), "a b", "--c", env=env, cwd=tmp_path)
    assert r.returncode == 3, r.stderr
    assert r.stdout.startswith("out ran ['a b', '--c']\n"), r.stdout
    assert "err\n" in r.stderr
    doc = json.loads((out / "recording.json").read_text())
    assert doc["exit_code"] == 3 and doc["graphs"] == []
    assert [p["argv"][1:] for p in doc["processes"]] == [["a b", "--c"]]
    assert doc["processes"][0]["exited"] is True
    assert (out / "report.md").exists() and (out / "graphs.csv").exists()
    # the same recording read again, from the folder: it holds no graph to report (one
    # with graphs: tests/reports/cli/test_record_full_disk.py)
    rep = gh("report", "--recording", str(out), "--out", str(tmp_path / "rep"))
    assert rep.returncode == 2 and "program exit 3" in rep.stderr, rep.stderr


def test_a_python_that_ignores_the_environment_is_said_so(tmp_path):
    r = gh("record", "--json", "--", sys.executable, "-I", "-c", "import torch", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["processes"] == [] and doc["graphs"] == []
    assert any("PYTHONPATH" in n for n in doc["notes"]), doc["notes"]


def test_sigterm_is_passed_on_and_the_programs_answer_kept(tmp_path):
    prog = tmp_path / "wait.py"
    prog.write_text(
        "import signal, sys, time, torch\n"
        "signal.signal(signal.SIGTERM, lambda *a: sys.exit(7))\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    p = subprocess.Popen(
        [*GH, "record", "--", str(prog)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, cwd=tmp_path,
    )  # fmt: skip
    try:
        assert p.stdout.readline() == "ready\n"
        time.sleep(0.2)
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=60)
    finally:
        p.kill()
    assert p.returncode == 7, err
    assert "program exit 7" in out


OUT = ["--out", "o"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["record", *OUT], "no program to record"),
        (["record", *OUT, "--"], "no program to record"),
        (["record", *OUT, "--", "missing.py"], "'missing.py' does not exist"),
        (["record", *OUT, "--", "-m", "no_such_module_anywhere"], "no module"),
        (["record", *OUT, "--key", "nope", "--", "prog.py"], "MODULE:FUNCTION"),
        (["record", *OUT, "--key", "missing.py:k", "--", "prog.py"], "does not exist"),
        (["record", *OUT, "--key", "prog.py:nofn", "--", "prog.py"], "binds no name 'nofn'"),
        (["record", *OUT, "--key", "no_such_module_anywhere:k", "--", "prog.py"], "no module"),
        (["record", *OUT, "--", "no-such-program-anywhere"], "not found"),
        (["report", "--recording", "r", "--target", "m:f", *OUT], "--recording"),
    ],
)
def test_what_cannot_run_is_refused_before_anything_does(tmp_path, args, message):
    (tmp_path / "prog.py").write_text("print('never run')\n")
    r = gh(*args, cwd=tmp_path)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert message in r.stderr and "never run" not in r.stdout + r.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["prog.py"], "nothing written"


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("no-shebang", "has no #! line"),  # a file the kernel will not exec (ENOEXEC)
        ("x" * 300, "longer than the file system allows"),  # a command looked up on PATH
        ("./" + "x" * 300, "longer than the file system allows"),  # a path to it
        ("x" * 300 + ".py", "longer than the file system allows"),  # a script
    ],
)
def test_a_program_the_os_will_not_start_is_a_usage_error(tmp_path, name, message):
    (tmp_path / "no-shebang").write_text("print('never run')\n")
    (tmp_path / "no-shebang").chmod(0o755)
    r = gh("record", "--", f"./{name}" if name == "no-shebang" else name, cwd=tmp_path)
    assert r.returncode == 2, (r.stdout, r.stderr)
    (line,) = [x for x in r.stderr.splitlines() if ": error: " in x]
    assert message in line and "OSError" not in line, line
    assert "x" * 130 not in line, "a long name cut, not printed whole"


def test_a_newline_in_the_programs_name_is_printed_escaped(tmp_path):
    prog = tmp_path / "two\nlines.py"
    prog.write_text("print('ran')\n")
    r = gh("record", "--out", "rec", "--", prog.name, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "running 'two\\nlines.py'\n" in r.stderr, r.stderr
    assert "'two\\nlines.py'" in (tmp_path / "rec" / "report.md").read_text()
    r = gh("record", "--", "-m", "no\nsuch", cwd=tmp_path)
    assert r.returncode == 2 and "no module 'no\\nsuch'" in r.stderr, r.stderr


def test_a_process_that_never_imports_torch_is_left_as_it_was(tmp_path):
    # the recorder waits for torch: until then the program's start-up is its own
    prog = tmp_path / "light.py"
    prog.write_text(
        "import sys\n"
        "heavy = [m for m in ('torch', 'pandas', 'graph_harness.capture.record.hooks')"
        " if m in sys.modules]\n"
        "print('heavy', heavy)\n"
    )
    r = gh("record", "--json", "--", str(prog), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "heavy []" in r.stderr, "the program's stdout goes to stderr under --json"
    doc = json.loads(r.stdout)  # stdout holds the one document
    assert doc["processes"] == [] and doc["graphs"] == []


def test_module_scopes_wait_for_the_programs_own_inductor(tmp_path):
    # issue 59: under --module-scopes every recorded process imported Inductor (a second
    # and more) as torch's import completed; its provenance is now collected from the
    # program's own import of Inductor on, which comes before any compile reads its config
    prog = tmp_path / "prog.py"
    prog.write_text(
        "import sys\n"
        "import torch\n"
        "import graph_harness.capture.record.hooks  # the recorder has started\n"
        "print('inductor', 'torch._inductor' in sys.modules)\n"
        "from torch._inductor import config\n"
        "print('pass set', config.post_grad_custom_post_pass is not None)\n"
    )
    r = gh("record", "--module-scopes", "--", str(prog), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "inductor False" in r.stdout and "pass set True" in r.stdout, r.stdout
    plain = gh("record", "--", str(prog), cwd=tmp_path)  # not vacuous: the pass is ours
    assert "pass set False" in plain.stdout, plain.stdout


def test_modules_are_looked_for_where_the_program_looks(tmp_path):
    # `python -m app.prog` finds app/ in the current folder, and so must record's checks
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "__init__.py").write_text("")
    (tmp_path / "app" / "prog.py").write_text("print('app ran')\n")
    (tmp_path / "mykeys.py").write_text("from os.path import basename as key\n")
    r = gh("record", "--key", "mykeys:key", "--", "-m", "app.prog", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("app ran\n")


def test_a_signal_ignored_stays_ignored_for_the_program(tmp_path):
    # under nohup SIGHUP is ignored: the program inherits the ignore, as without record
    prog = tmp_path / "hup.py"
    prog.write_text(
        "import signal\nprint('hup ignored', signal.getsignal(signal.SIGHUP) == signal.SIG_IGN)\n"
    )
    r = subprocess.run(
        [*GH, "record", "--", str(prog)], capture_output=True, text=True, cwd=tmp_path,
        timeout=120, preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "hup ignored True" in r.stdout


def test_the_session_folder_removed_is_only_graph_harness_own(tmp_path, monkeypatch):
    # the one folder record removes is the session folder it made itself (mkdtemp): a
    # link the program leaves in it to a folder of the user's is removed as a link, and
    # what it points to stays whole
    import graph_harness.capture.record.program as program

    mine = tmp_path / "users-folder"
    mine.mkdir()
    (mine / "keep.txt").write_text("the user's")
    made = []
    real = program.tempfile.mkdtemp

    def mkdtemp(**kw):
        made.append(real(dir=tmp_path, **kw))
        return made[-1]

    monkeypatch.setattr(program.tempfile, "mkdtemp", mkdtemp)
    prog = tmp_path / "link.py"
    prog.write_text(
        "import os\n"
        f"os.symlink({str(mine)!r}, os.path.join(os.environ['GRAPH_HARNESS_RECORD'], 'x'))\n"
    )
    rec = program.run_program([str(prog)])
    assert rec.exit_code == 0 and len(made) == 1
    assert not os.path.exists(made[0]), "the session folder went"
    assert (mine / "keep.txt").read_text() == "the user's", "the user's folder stayed whole"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.py", "users-folder"]


def _own_modules(folder: Path, *, json: bool) -> None:
    """A program's folder with its own modules named as the standard library's and ours."""
    folder.mkdir()
    (folder / "secrets.py").write_text("API_KEY = 'the program'\n")
    (folder / "graph_harness.py").write_text("MINE = 'the program'\n")
    if json:  # torch imports json: a program with its own imports no torch
        (folder / "json.py").write_text("MINE = 'the program'\n")


@pytest.mark.parametrize("with_torch", [False, True], ids=["no-torch", "torch"])
def test_the_programs_own_modules_stay_its_own(tmp_path, with_torch):
    # the start-up hook imports nothing before the program's folder is on sys.path: its
    # own secrets.py, json.py and graph_harness.py are what it imports, as under python
    app = tmp_path / "app"
    _own_modules(app, json=not with_torch)
    prog = app / "prog.py"
    lines = [
        "from secrets import API_KEY",
        "import graph_harness",
        "print(API_KEY, graph_harness.MINE)",
    ]
    if not with_torch:
        lines += ["import json", "print(json.MINE)"]
    else:  # without CUDA it runs eagerly
        lines += ["import torch", "print(torch.ones(3).sum().item())"]
    prog.write_text("\n".join(lines) + "\n")
    plain = subprocess.run(
        [sys.executable, str(prog)], capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    assert plain.returncode == 0, plain.stderr
    r = gh("record", "--out", str(tmp_path / "rec"), "--", str(prog), cwd=tmp_path)
    assert (r.returncode, r.stdout.splitlines()[: len(plain.stdout.splitlines())]) == (
        0,
        plain.stdout.splitlines(),
    ), r.stderr
    doc = json.loads((tmp_path / "rec" / "recording.json").read_text())
    if with_torch:  # the recorder steps aside, and says why
        (p,) = doc["processes"]
        assert "own module graph_harness" in p["failed"], p


@pytest.mark.smoke
def test_a_program_with_its_own_secrets_is_recorded(tmp_path):
    # the recorder, started once torch is imported, takes nothing from `secrets`
    app = tmp_path / "app"
    app.mkdir()
    (app / "secrets.py").write_text("API_KEY = 'the program'\n")
    (app / "prog.py").write_text("from secrets import API_KEY\nimport torch\nprint(API_KEY)\n")
    r = gh("record", "--json", "--", str(app / "prog.py"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    (p,) = json.loads(r.stdout)["processes"]
    assert p["failed"] is None and p["exited"] is True, p


def test_the_recorder_imports_no_module_the_program_could_hide(tmp_path):
    # Armed as torch is imported, the recorder must import nothing by a name the program's
    # folder can hold (it imported `sysconfig`, found the program's, and failed to start):
    # the program's module runs when the program imports it, and the recorder starts.
    app = tmp_path / "app"
    app.mkdir()
    (app / "sysconfig.py").write_text("print('the program imported its sysconfig')\n")
    prog = app / "prog.py"
    prog.write_text("import torch\nprint('after torch')\nimport sysconfig\n")
    plain = subprocess.run(
        [sys.executable, str(prog)], capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    assert plain.returncode == 0, plain.stderr
    r = gh("record", "--out", str(tmp_path / "rec"), "--", str(prog), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (
        r.stdout.splitlines()[:2]
        == plain.stdout.splitlines()
        == [
            "after torch",
            "the program imported its sysconfig",
        ]
    ), r.stdout
    (p,) = json.loads((tmp_path / "rec" / "recording.json").read_text())["processes"]
    assert p["failed"] is None and p["exited"] is True, p


def test_an_out_folder_made_while_the_program_ran_keeps_its_exit_code(tmp_path):
    # another run (or the program) made --out meanwhile: the recording is kept beside it,
    # said in a note, and the program's own exit code stands (it was exit 1 and a raw
    # OutputConflict; attack pass)
    prog = tmp_path / "prog.py"
    prog.write_text("import os, sys\nos.mkdir(sys.argv[1])\nsys.exit(3)\n")
    out = tmp_path / "rec"
    r = gh("record", "--out", str(out), "--", str(prog), str(out), cwd=tmp_path)
    assert r.returncode == 3, r.stderr
    assert "appeared while this run was going" in r.stderr and "Traceback" not in r.stderr
    assert list(out.iterdir()) == [], "the folder made meanwhile is left as it is"
    (kept,) = [p for p in tmp_path.iterdir() if p.name.startswith("rec.graph-harness")]
    assert (kept / "recording.json").is_file(), "the recording kept beside it"


def test_without_cuda_it_says_why_nothing_was_captured(tmp_path):
    if _cuda():
        pytest.skip("a CUDA device is here: the program could capture")
    prog = tmp_path / "prog.py"
    prog.write_text("import torch\nprint(torch.ones(2).sum().item())\n")
    r = gh("record", "--out", "rec", "--", str(prog), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "0 graphs captured (0 nodes)" in r.stdout
    # one line on stderr, not left to a reader of "0 graphs captured"
    assert r.stderr.count("without CUDA the program ran eagerly and could capture no graph") == 1
    # its recording reported again: it holds no graph, and says so instead of a report
    rep = gh("report", "--recording", "rec", "--out", "rep", cwd=tmp_path)
    assert rep.returncode == 2, rep.stderr
    assert "rec holds no graph (0 graphs captured (0 nodes)" in rep.stderr, rep.stderr
    assert "program exit 0" in rep.stderr and not (tmp_path / "rep").exists()


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def test_no_read_names_reaches_the_recorded_process_and_the_recording(tmp_path):
    # the flag travels with the options into the program's process (its recorder's
    # settings), and the recording says it; without the flag, the reads are looked at
    prog = tmp_path / "prog.py"
    prog.write_text(
        "import torch\n"
        "from graph_harness.capture.record import settings\n"
        "print('read_names', settings.settings.read_names)\n"
    )
    for flags, want in (([], True), (["--no-read-names"], False)):
        out = tmp_path / f"rec{len(flags)}"
        r = gh("record", *flags, "--out", str(out), "--", str(prog), cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert f"read_names {want}" in r.stdout, r.stdout
        doc = json.loads((out / "recording.json").read_text())
        assert doc["options"].get("read_names", True) is want  # written only where off
