"""A replay that trips a device-side assertion (issue 57, item 2): `check --steps to-end` of
a step whose sliding-window slot is chosen on the host (tests/targets.py window_overrun:
the eager calls wrap, the graph keeps the unwrapped index its capture saw) is a failure
that names the call and the run that did not finish, and the assertion, with exit 1 and
no core dump; under pytest, the graph_check test stops the session with that reason, and
the process leaves with pytest's status, not SIGABRT."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu
REPO = Path(__file__).resolve().parents[3]
WINDOW = 6  # window_overrun's default: its replay of call 6 writes row 6 of 6


def _run(cmd, **kw):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=REPO, env=env, **kw)


def _no_abort(r):
    assert r.returncode >= 0, f"killed by signal {-r.returncode}: {r.stderr[-3000:]}"
    for sign in ("core dumped", "terminate called", "Aborted"):
        assert sign not in r.stderr, r.stderr[-3000:]


def test_check_names_the_call_that_tripped_the_assertion():
    r = _run([sys.executable, "-m", "graph_harness", "check", "--target",
              "tests.targets:window_overrun", "--steps", "to-end"])  # fmt: skip
    _no_abort(r)
    assert r.returncode == 1, r.stderr[-3000:]
    (line,) = [x for x in r.stderr.splitlines() if ": error:" in x]
    assert f"call {WINDOW} of replayed run C did not finish" in line, line
    assert "the eager runs A and B ran all 12 calls" in line, line
    assert "index out of bounds" in line, line  # the device assertion's own condition
    # what the device printed is still on stderr (held while the run went, then written)
    assert "Assertion `" in r.stderr, r.stderr[-3000:]


GATED = """
from tests import targets as T

def test_window(graph_check):
    graph_check(T.window_overrun(), steps="to-end")

def test_after():
    pass
"""


def test_graph_check_stops_the_session_with_the_reason(tmp_path):
    f = tmp_path / "test_window_gate.py"
    f.write_text(GATED)
    r = _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(f)])
    _no_abort(r)
    assert r.returncode == 1, (r.stdout[-3000:], r.stderr[-3000:])
    out = r.stdout
    assert f"call {WINDOW} of replayed run C did not finish" in out, out[-3000:]
    assert "the CUDA context is lost, so the session stops" in out, out[-3000:]
    assert "test_after" not in out.replace("test_window_gate.py", ""), out[-3000:]
