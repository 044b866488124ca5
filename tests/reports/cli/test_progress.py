"""Progress on long work (reports/progress.py): phases go to stderr only, as plain lines
(one as each phase starts, one as it finishes; no carriage returns, no cursor codes) when
stderr is not a terminal, as a live rich line when it is; stdout is byte for byte the same
either way."""

import io
import os
import re
import subprocess
import threading
from pathlib import Path

import pytest

from graph_harness.reports.cli.console import make_console
from graph_harness.reports.progress import Phases
from tests.command_line import _cmd, terminal_env

REPO = Path(__file__).resolve().parents[3]
LLAMA_TINY = f"{REPO}/examples/llama_decode.py:make_tiny_step"
SMALL = ["--stages", "2", "--rows", "2", "--k", "32", "--world", "2", "--shard", "64"]


def run(argv, *, stderr_tty: bool, cpu=True) -> tuple[int, bytes, bytes]:
    """The command with stdout on a pipe and stderr on a pseudo-terminal or a pipe:
    (exit code, stdout bytes, stderr bytes)."""
    if not stderr_tty:
        r = subprocess.run(_cmd() + argv, capture_output=True, timeout=600, env=terminal_env(cpu))
        return r.returncode, r.stdout, r.stderr
    master, slave = os.openpty()
    got = bytearray()

    def drain():
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed its end
                return
            if not chunk:
                return
            got.extend(chunk)

    reader = threading.Thread(target=drain)
    reader.start()
    try:
        p = subprocess.run(
            _cmd() + argv, stdout=subprocess.PIPE, stderr=slave, timeout=600, env=terminal_env(cpu)
        )
    finally:
        os.close(slave)
        reader.join(timeout=30)
        os.close(master)
    return p.returncode, p.stdout, bytes(got)


def _plain(text: str) -> None:
    assert "\r" not in text and "\x1b" not in text, repr(text[:300])


def test_plain_lines_start_and_finish_each_phase():
    buf = io.StringIO()
    console = make_console(buf, width=200)
    assert not console.is_terminal
    with Phases(console) as say:
        say("counting [b]shipped[/b]")  # a user's name is text, not markup
        say("writing")
    lines = buf.getvalue().splitlines()
    _plain(buf.getvalue())
    assert lines[0] == "counting [b]shipped[/b] ..."
    assert re.fullmatch(r"counting \[b\]shipped\[/b\]: done in \d+\.\d s", lines[1])
    assert lines[2] == "writing ..."
    assert re.fullmatch(r"writing: done in \d+\.\d s", lines[3])
    assert len(lines) == 4


def test_a_spinner_shows_a_control_character_in_a_name_as_its_escape():
    # issue 44, 5: a --target file named with ESC reached the terminal through the spinner
    buf = io.StringIO()
    console = make_console(buf, width=200)
    console._force_terminal = True  # rich's own switches: a terminal, and a live display
    console.is_interactive = True
    assert console.is_terminal
    with Phases(console) as say:
        say("capturing evil\x1b]0;owned\x07.py:make_step")
        say._bar.refresh()  # draw it now (the live display draws on its own timer)
    out = buf.getvalue()
    assert "\\x1b]0;owned\\x07" in out  # the name's escapes, as text
    assert "\x1b]0;owned" not in out and "\x07" not in out  # never the raw controls


def test_a_phase_cut_short_is_not_done():
    buf = io.StringIO()
    with pytest.raises(ValueError), Phases(make_console(buf, width=200)) as say:
        say("capturing")
        raise ValueError("the user's step failed")
    assert buf.getvalue().splitlines() == ["capturing ..."]


def test_stdout_is_the_same_with_stderr_on_a_terminal_or_not():
    argv = ["check", "--target", LLAMA_TINY]
    code_pipe, out_pipe, err_pipe = run(argv, stderr_tty=False)
    code_tty, out_tty, err_tty = run(argv, stderr_tty=True)
    assert code_pipe == code_tty == 0, err_pipe.decode() + err_tty.decode()
    assert out_pipe and out_pipe == out_tty  # byte for byte
    assert b"done in" not in out_pipe and b"capturing" not in out_pipe
    err = err_pipe.decode()
    _plain(err)
    phases = [ln for ln in err.splitlines() if ln.startswith(("capturing ", "checking "))]
    assert [re.sub(r"(: done in \d+\.\d s| \.\.\.)$", " |", p) for p in phases] == [
        f"capturing {LLAMA_TINY} |",
        f"capturing {LLAMA_TINY} |",
        f"checking {LLAMA_TINY} |",
        f"checking {LLAMA_TINY} |",
    ]
    assert phases[0].endswith(" ...") and phases[1].endswith(" s")
    assert "\n\n" not in err  # no stray blank line
    shown = err_tty.decode(errors="replace")
    assert "capturing" in shown and "done in" not in shown  # the live line, not plain lines


def test_report_phases_on_a_pipe(tmp_path):
    code, out, err = run(["report", *SMALL, "--out", str(tmp_path / "r")], stderr_tty=False)
    assert code == 0, err.decode()
    assert out == b""
    text = err.decode()
    _plain(text)
    assert "\n\n" not in text  # the stray blank line the old progress display left
    starts = [ln[: -len(" ...")] for ln in text.splitlines() if ln.endswith(" ...")]
    from graph_harness.capture.round.params import VARIANTS

    assert starts == [
        *(f"counting {v}" for v in VARIANTS),
        "comparing the variants' outputs bit for bit",
        "writing the report (tables, CSVs, plots)",
    ]
    for phase in starts:
        assert re.search(rf"^{re.escape(phase)}: done in \d+\.\d s$", text, re.M), phase


@pytest.mark.gpu
def test_report_phases_on_the_gpu(tmp_path):
    argv = ["report", *SMALL, "--trials", "3", "--builds", "2", "--lengths", "2", "8"]
    code, out, err = run([*argv, "--out", str(tmp_path / "r")], stderr_tty=False, cpu=False)
    assert code == 0, err.decode()[-3000:]
    assert out == b""
    text = err.decode()
    _plain(text)
    starts = [ln[: -len(" ...")] for ln in text.splitlines() if ln.endswith(" ...")]
    assert starts[0] == "counting shipped"
    assert "capturing torch-add chains" in starts
    assert any(s.startswith("timing ") and "chain graphs" in s for s in starts)
    assert any(s.startswith("timing 5 rounds over 2 builds") for s in starts)
    assert "profiling 5 rounds" in starts
    assert any(s.startswith("profiling 5 graphs, window 1 of ") for s in starts)
    assert starts[-1] == "writing the report (tables, CSVs, plots)"
    done = [ln for ln in text.splitlines() if re.search(r": done in \d+\.\d s$", ln)]
    assert len(done) == len(starts)


@pytest.mark.gpu
def test_profile_stdout_is_progress_free_on_a_terminal(tmp_path):
    # Timings differ run to run, so the check is that no phase text reaches stdout and the
    # tty's stderr got the live display, not plain lines.
    argv = ["profile", *SMALL, "--variant", "fused", "--builds", "1"]
    code, out, err = run(argv, stderr_tty=True, cpu=False)
    assert code == 0, err.decode(errors="replace")[-3000:]
    assert b"done in" not in out and b"profiling 1 graphs" not in out and b"\r" not in out
    shown = err.decode(errors="replace")
    assert "profiling" in shown and "done in" not in shown
