"""What starting costs: the modules an import or the command line's parser loads, read off
a child interpreter's sys.modules (never a timing: benchmarks/bench_startup.py measures).

`from graph_harness.capture import scope` lands in a user's model code: torch, and no
Triton, pandas or matplotlib. `graph-harness --help` (and every subcommand's) is built
without torch, pandas, matplotlib, Triton or rich. `graph-harness record` runs a program and
shows its recording without torch, Triton, pandas or matplotlib.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "triton", "pandas", "matplotlib", "rich")
SUBCOMMANDS = ("count", "delta", "replay", "advise", "profile", "check", "report")


def loaded_after(code: str, tmp_path) -> set[str]:
    """The heavy top-level packages in sys.modules after `code` ran in a fresh
    interpreter (started in an empty folder, the checkout on its path), written to a file
    of their own: what `code` prints may come after anything the probe prints."""
    answer = tmp_path / "loaded.json"
    probe = (
        f"{code}\n"
        "import json, sys\n"
        f"heavy = sorted({{m.split('.')[0] for m in sys.modules}} & {set(HEAVY)!r})\n"
        f"open({str(answer)!r}, 'w').write(json.dumps(heavy))\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={"PYTHONPATH": str(REPO), "CUDA_VISIBLE_DEVICES": "", "PATH": "/usr/bin:/bin"},
    )
    assert r.returncode == 0, r.stderr
    return set(json.loads(answer.read_text()))


def test_scope_brings_torch_alone(tmp_path):
    loaded = loaded_after("from graph_harness.capture import scope, module_scopes", tmp_path)
    assert loaded == {"torch"}


def test_a_lazy_name_still_loads_what_it_needs(tmp_path):
    # The probe sees an import happen: a sweep's document is a pandas frame's maker.
    assert "pandas" in loaded_after("from graph_harness.capture import SweepResult", tmp_path)


def test_a_recording_and_its_exports_are_read_without_torch_or_pandas(tmp_path):
    # issue 59: `graph-harness record`'s own process reads every process's session file
    # into a Recording (each graph's NodeExport checked) and imports neither
    code = "from graph_harness.capture import NodeExport, Recording, summarize"
    assert loaded_after(code, tmp_path) == set()


def test_the_parser_and_every_help_load_nothing_heavy(tmp_path):
    helps = [["--help"], ["--version"], *([c, "--help"] for c in SUBCOMMANDS)]
    code = (
        "import runpy, sys\n"
        f"for argv in {helps!r}:\n"
        "    sys.argv = ['graph-harness', *argv]\n"
        "    try:\n"
        "        runpy.run_module('graph_harness', run_name='__main__', alter_sys=True)\n"
        "    except SystemExit as e:\n"
        "        assert e.code == 0, (argv, e.code)\n"
        "    sys.modules.pop('graph_harness.__main__', None)\n"
    )
    assert loaded_after(code, tmp_path) == set()


def test_every_public_name_resolves():
    import graph_harness.capture as capture

    for name in capture.__all__:
        value = getattr(capture, name)
        assert getattr(value, "__name__", name) == name or name.isupper(), name
    assert set(capture.__all__) <= set(dir(capture))
    with pytest.raises(AttributeError, match="no attribute 'nonesuch'"):
        capture.nonesuch  # noqa: B018


def test_advise_is_the_function_and_its_package():
    import graph_harness.capture.advise as advise_package
    from graph_harness.capture.advise import advise
    from graph_harness.capture.advise.advice import advise as defined

    assert advise is defined and advise_package.advise is defined


def test_a_missing_target_file_is_said_before_torch_with_the_near_name(tmp_path):
    # issue 44, 14: said only after torch was imported, and with no near name suggested
    (tmp_path / "llama_decode.py").write_text("def make_step(): ...\n")
    code = (
        "import contextlib, io, runpy, sys\n"
        "sys.argv = ['graph-harness', 'count', '--target', 'lama_decode.py:make_step']\n"
        "err = io.StringIO()\n"
        "with contextlib.redirect_stderr(err):\n"
        "    try:\n"
        "        runpy.run_module('graph_harness', run_name='__main__', alter_sys=True)\n"
        "    except SystemExit as e:\n"
        "        assert e.code == 2, e.code\n"
        "last = err.getvalue().splitlines()[-1]\n"
        "said = 'no such file: lama_decode.py; did you mean llama_decode.py?'\n"
        "assert last.endswith(said), last\n"
    )
    assert loaded_after(code, tmp_path) == set()


_STEPS = "import torch\n\n\ndef make_step(batch: int = 1):\n    return torch.zeros\n"
_NO_FACTORY = (
    "--target 'steps.py:make_stp': module 'steps.py' has no 'make_stp'; its functions: make_step"
)
_NO_FACTORY_DOTTED = (
    "--target 'mypkg.steps:make_stp': module 'mypkg.steps' has no 'make_stp'; its functions: "
    "make_step"
)


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["count", "--out", "held"], "--out held is a folder graph-harness did not write"),
        (["record", "--out", "held", "--", "prog.py"], "--out held is a folder"),
        (
            ["sweep", "--target", "m:f", "--sizes", "1", "--requests", "zipf:abc"],
            "--requests: requests 'zipf:abc'",
        ),
        (
            ["report", "--target", "m:f", "--sizes", "1", "--requests", "zipf:abc", "--out", "r"],
            "--requests: requests 'zipf:abc'",
        ),
        (["delta", "a", "b", "--step-key", "x"], "--step-key groups a recording's graphs"),
        (["delta", "nonesuch", "fused"], "nonesuch"),
        # no GPU (CUDA_VISIBLE_DEVICES="" hides every device; capture/environment.py)
        (["replay"], "no GPU here: replay times CUDA graph replays"),
        (["replay", "--variant", "fused", "--json"], "no GPU here: replay times"),
        (["profile"], "no GPU here: profile replays graphs under CUPTI"),
        (["profile", "--target", "steps.py:make_step"], "no GPU here: profile replays"),
        # a factory the file surely lacks, said in load_factory's words
        (["count", "--target", "steps.py:make_stp"], _NO_FACTORY),
        (["check", "--target", "steps.py:make_stp"], _NO_FACTORY),
        (["sweep", "--target", "steps.py:make_stp", "--sizes", "1", "2"], _NO_FACTORY),
        (["report", "--target", "steps.py:make_stp", "--out", "r"], _NO_FACTORY),
        # a dotted MODULE found as its import would find it, its package read, not run
        (["count", "--target", "mypkg.steps:make_stp"], _NO_FACTORY_DOTTED),
        (["sweep", "--target", "mypkg.steps:make_stp", "--sizes", "1"], _NO_FACTORY_DOTTED),
        (["count", "--target", "mypkg.stepz:make_step"], "no module named 'mypkg.stepz'"),
        (["count", "--target", "mypkz.steps:make_step"], "no module named 'mypkz'"),
    ],
)
def test_a_refusal_of_flags_and_paths_is_said_before_torch(tmp_path, argv, said):
    # issue 60: 8-14 s spent importing torch and Triton before saying what needs no work
    (tmp_path / "held").mkdir()
    (tmp_path / "held" / "mine.txt").write_text("the user's")
    (tmp_path / "steps.py").write_text(_STEPS)
    (tmp_path / "mypkg").mkdir()
    (tmp_path / "mypkg" / "__init__.py").write_text("import torch\n")  # were it run early
    (tmp_path / "mypkg" / "steps.py").write_text(_STEPS)
    code = (
        "import contextlib, io, runpy, sys\n"
        f"sys.argv = ['graph-harness', *{argv!r}]\n"
        "err = io.StringIO()\n"
        "with contextlib.redirect_stderr(err):\n"
        "    try:\n"
        "        runpy.run_module('graph_harness', run_name='__main__', alter_sys=True)\n"
        "    except SystemExit as e:\n"
        "        assert e.code == 2, (e.code, err.getvalue())\n"
        "line = err.getvalue().splitlines()[-1]\n"
        f"assert {said!r} in line, line\n"
    )
    loaded = loaded_after(code, tmp_path)
    assert not loaded & {"torch", "triton", "pandas"}, loaded


@pytest.mark.parametrize(
    ("flags", "allowed"),
    [
        ([], {"rich"}),
        (["--json"], {"rich"}),
        # pandas for the modules table, imported while the program runs (its start-up takes
        # longer): reports/cli/prefetch.py
        (["--module-scopes"], {"rich", "pandas"}),
    ],
)
@pytest.mark.parametrize("program", ["print('ran')\n", "import torch\nprint('ran')\n"])
def test_record_runs_a_program_and_shows_it_without_torch(tmp_path, flags, allowed, program):
    # issue 59: `graph-harness record` imported torch and Triton before it started the
    # program (and pandas to read the recording): seconds added to every recorded run. It
    # starts the program, reads what its processes wrote and shows it without them.
    (tmp_path / "prog.py").write_text(program)
    code = (
        "import runpy, sys\n"
        f"sys.argv = ['graph-harness', 'record', *{flags!r}, '--', 'prog.py']\n"
        "try:\n"
        "    runpy.run_module('graph_harness', run_name='__main__', alter_sys=True)\n"
        "except SystemExit as e:\n"
        "    assert e.code == 0, e.code\n"
    )
    assert loaded_after(code, tmp_path) <= allowed
