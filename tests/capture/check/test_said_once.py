"""Each finding said once (issue 44, item 12): the warm-ups' warning about a host value and
the trajectory's verdict on the same value make one finding; after the findings table,
and in the error that stops a command, one short line says the status and the cause the
evidence settles, not the first finding's text again."""

import os
import subprocess
import sys
from pathlib import Path

from graph_harness.capture import check_step
from graph_harness.capture.check.findings import CheckResult, Finding, once_each
from graph_harness.capture.state.steps import Repeatability
from tests import targets as T

REPO = Path(__file__).resolve().parents[3]


def test_a_host_value_named_by_the_warmups_and_the_verdict_is_one_finding():
    result = check_step(T.frozen_counter(), device="cpu")
    host = [f for f in result.findings if f.kind == "host-state"]
    assert len(host) == 1 and host[0].severity == "fail", result.findings  # tried ahead
    assert host[0].tensor == "closure state.t" and host[0].step == 1
    result = check_step(T.host_scale(), device="cpu")
    host = [f for f in result.findings if f.kind == "host-state"]
    assert len(host) == 1 and host[0].severity == "unverified", result.findings
    assert host[0].tensor == "closure state.scale"


def test_once_each_keeps_the_most_severe_of_one_kind_and_value_and_every_other():
    a = Finding(kind="host-state", severity="warn", message="w", tensor="x")
    b = Finding(kind="host-state", severity="fail", message="f", tensor="x")
    c = Finding(kind="mismatch", severity="fail", message="m", tensor="x")
    d = Finding(kind="rng", severity="info", message="r")
    e = Finding(kind="host-state", severity="warn", message="w2", tensor="y")
    assert once_each([a, b, c, d, e]) == [b, c, d, e]


def test_the_headline_says_the_cause_and_not_the_findings_text_again():
    findings = [
        Finding(kind="host-state", severity="fail", message="LONG TEXT", tensor="h", step=1),
        Finding(kind="mismatch", severity="fail", message="MORE", tensor="out", step=1),
    ]
    r = CheckResult("s", 3, Repeatability(warmups=3, reset=True, repeatable=True), findings)
    line = r.headline()
    assert line.startswith("check FAILED for s: a host value the step's device work reads")
    assert "(from step 1, h)" in line and "2 findings" in line
    assert "LONG TEXT" not in line and "LONG TEXT" in r.verdict()


def test_the_command_says_a_finding_once(tmp_path):
    env = {**os.environ, "COLUMNS": "400"}  # no cell wraps: a repeated phrase shows whole
    r = subprocess.run(
        [sys.executable, "-m", "graph_harness", "check", "--target",
         "tests/targets.py:host_scale", "--out", str(tmp_path / "o")],
        capture_output=True, text=True, cwd=REPO, env=env, timeout=300,
    )  # fmt: skip
    assert r.returncode == 3, r.stderr[-2000:]
    both = r.stdout + r.stderr
    assert both.count("could not be tried") == 1, both  # the finding's text: its row
    assert both.count("closure state.scale changes along the calls") == 1, both  # no warm-up row
    assert r.stdout.count("check could NOT verify") == 1  # the headline after the table
