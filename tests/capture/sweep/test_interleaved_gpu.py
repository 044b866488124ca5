"""`sweep --check interleaved` on real graphs (the H200): every size captured largest
first into one shared pool, then replayed in a seeded serving order against its own eager
step. A clean step passes; a workspace handed to a smaller size while a larger size's
graph still uses it (tests/capture/sweep/interleaved_steps.py `planted`) passes each
size's own check and fails in turns, naming both sizes and the tensor; the same from
the command line, exit codes included; and the tiny llama of examples/ passes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.capture.sweep import interleaved_steps as S

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parents[3]
CLEAN = "tests.capture.sweep.interleaved_steps:clean"
PLANTED = "tests.capture.sweep.interleaved_steps:planted"
FAST = ["--trials", "2", "--replays", "2", "--leak-replays", "2"]  # the timing is not tested here


@pytest.fixture(autouse=True)
def _fresh_workspace():
    S.forget_workspace()
    yield
    S.forget_workspace()


def _sweep(factory, sizes, **kw):
    """sweep_step with every check recorded (none stops it): the result and the checks."""
    from graph_harness.capture.sweep.run import sweep_step
    from graph_harness.capture.sweep.settings import SweepSettings

    seen: dict = {}
    settings = SweepSettings(trials=2, replays=2, leak_replays=2)
    result = sweep_step(factory, sizes, settings, check_steps=4, gate=seen.update, **kw)
    return result, seen


def test_a_clean_step_passes_in_turns():
    result, seen = _sweep(S.clean, [1, 2, 4], interleaved=True)
    assert {k: r.status for k, r in seen.items()} == {
        "batch4": "passed", "batch2": "passed", "batch1": "passed", "interleaved": "passed",
    }  # fmt: skip
    i = result.interleaved
    assert i is seen["interleaved"] and i.passed, i.verdict()
    assert (i.replays, i.compared, i.seed, i.sizes) == (12, 12, 0, [4, 2, 1])
    assert i.tensors > 0 and i.fed
    assert {r.batch: r.interleaved for r in result.rows} == {1: "passed", 2: "passed", 4: "passed"}
    doc = json.loads(json.dumps(result.to_dict(), allow_nan=False))
    assert doc["interleaved"]["status"] == "passed" and doc["options"]["seed"] == 0
    assert [s["interleaved"] for s in doc["sizes"]] == ["passed"] * 3
    assert [x["batch"] for x in doc["shared_pool"]] == [4, 2, 1]


def test_a_workspace_handed_to_a_smaller_size_fails_in_turns_only():
    result, seen = _sweep(S.planted, [1, 2, 4], interleaved=True)
    # alone, each size is right: the per-size check (--check) cannot see the defect
    assert {k: seen[k].status for k in ("batch1", "batch2", "batch4")} == dict.fromkeys(
        ("batch1", "batch2", "batch4"), "passed"
    ), {k: r.verdict() for k, r in seen.items()}
    i = seen["interleaved"]
    assert i.status == "failed" and i.exit_code == 1, i.verdict()
    fails = [f for f in i.findings if f.severity == "fail"]
    assert fails and all(f.kind == "interleaved" for f in fails)
    f = fails[0]
    m = re.match(r"batch (\d+), call (\d+) \(replay \d+ of 12 in the serving order\)", f.message)
    assert m, f.message
    size, call = int(m.group(1)), int(m.group(2))
    other = re.search(r"after batch (\d+) \(", f.message)
    assert other and int(other.group(1)) in {1, 2, 4} - {size}, f.message
    assert f.step == call >= 1  # a size's first replay starts from its own reset
    assert f.tensor in ("output", "closure cache") and f.tensor in f.message
    assert i.by_size[size] == "failed" and result.interleaved is i
    assert f"batch {size}, call {call}" in i.verdict()


def _cli(*argv):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("COLUMNS", None)
    return subprocess.run(
        [sys.executable, "-m", "graph_harness", *argv],
        capture_output=True, text=True, timeout=600, cwd=REPO, env=env,
    )  # fmt: skip


def test_the_command_passes_the_clean_step_and_fails_the_planted_one(tmp_path):
    out = tmp_path / "clean"
    r = _cli("sweep", "--target", CLEAN, "--sizes", "1", "2", "4", "--check", "interleaved",
             "--out", str(out), *FAST)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "Sizes interleaved in one pool" in r.stdout and "interleaved check passed" in r.stdout
    doc = json.loads((out / "sweep.json").read_text())
    assert doc["interleaved"]["status"] == "passed" and doc["interleaved"]["replays"] == 12
    # the planted defect: each size checked alone passes ...
    r = _cli("sweep", "--target", PLANTED, "--sizes", "1", "2", "4", "--check", *FAST)
    assert r.returncode == 0, r.stderr
    # ... in turns it fails, exit 1, nothing written, both sizes and the tensor named
    bad = tmp_path / "planted"
    r = _cli("sweep", "--target", PLANTED, "--sizes", "1", "2", "4", "--check", "interleaved",
             "--seed", "0", "--out", str(bad), *FAST)  # fmt: skip
    assert r.returncode == 1, r.stderr
    line = r.stderr.strip().splitlines()[-1]
    assert "CheckFailed: interleaved check FAILED" in line and "nothing was written" in line
    named = r"batch (\d+), call \d+ .*?: (closure cache|output)\b.* after batch (\d+) \("
    m = re.search(named, line)
    assert m and m.group(1) != m.group(3), line
    assert "FAIL" in r.stdout and "interleaved" in r.stdout  # the findings table
    assert not (bad / "sweep.json").exists()


def test_the_tiny_llama_passes_in_turns(tmp_path):
    spec = f"{REPO / 'examples' / 'llama_decode.py'}:make_tiny_step"
    r = _cli("sweep", "--target", spec, "--sizes", "1", "2", "4", "--check", "interleaved",
             "--check-steps", "3", "--json", *FAST)  # fmt: skip
    assert r.returncode == 0, r.stderr + r.stdout[-3000:]
    doc = json.loads(r.stdout)
    i = doc["interleaved"]
    assert i["status"] == "passed" and i["replays"] == 9 and i["compared"] == 9, i["verdict"]
    assert i["by_size"] == {"4": "passed", "2": "passed", "1": "passed"}
