"""`check`: a step's graph against its eager call.

The CPU tests run check's comparison with a stand-in graph (its replay() does what a graph
captured from the step would), the two GPU-only parts stood in for: the free-memory
poisoning (an object that says which pattern is in free memory) and the graph reader's
memcpy nodes. The gpu-marked tests check real graphs on the H200, and the command line
in child processes (a CUDA error there loses the context)."""

import contextlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from graph_harness.capture import check_captured, check_step
from graph_harness.capture.count import capture_and_keep
from graph_harness.capture.graph.capture import Captured
from graph_harness.capture.state.steps import StateWatch, StepStateError
from tests import targets as T

REPO = Path(__file__).resolve().parents[1]
PROGRESS_LINE = re.compile(r".+ \.\.\.|.+: done in \d+\.\d s")


class _Graph:
    def __init__(self, replay):
        self.replay = replay


@pytest.fixture
def no_gpu_parts(monkeypatch):
    """Free memory 'filled' (FREE[0] says with what) and no memcpy nodes to read."""
    import graph_harness.capture.check.step as C

    free = []

    @contextlib.contextmanager
    def poisoned(pattern):
        free.append(pattern)
        yield type("Poisoned", (), {"to_dict": lambda self: {"pattern": pattern}})()

    monkeypatch.setattr(C, "poisoned", poisoned)
    monkeypatch.setattr(C, "host_copies", lambda graph, export: [])
    return free


def _check(step, replay, output):
    watch = StateWatch(step)
    export, _ = capture_and_keep(step, device="cpu", watch=watch)
    captured = Captured(_Graph(replay), [], output)
    return check_captured(step, export, captured, watch.repeatability, name="toy")


def _fails(result):
    return [f for f in result.findings if f.severity == "fail"]


def test_a_graph_that_computes_what_the_step_computes_passes(no_gpu_parts):
    step = T.stateful(device="cpu")
    out = step()  # its output buffer
    step.reset()
    result = _check(step, step, out)  # replaying is running the step
    assert result.passed and result.compared and not _fails(result), result.findings
    assert result.outputs == 1 and result.state >= 4  # cache, pos, start, x (and out)
    assert no_gpu_parts == [0xFF, 0x3C]  # two replays, two fillings
    assert "agree with the eager call on 1 output" in result.verdict()


def test_a_host_value_frozen_at_capture_is_a_mismatch_that_says_why(no_gpu_parts):
    step = T.frozen_counter()
    out = step()  # the output buffer; the graph, captured one call in, copies row 1
    step.reset()
    row = step.table[1]
    result = _check(step, lambda: out.copy_(row), out)
    fails = _fails(result)
    assert not result.passed and {f.kind for f in fails} == {"mismatch"}
    assert {f.tensor for f in fails} == {"output", "closure out"}
    assert all("closure state.t: 0 then 1" in f.message for f in fails)
    assert "of 16 elements differ" in fails[0].message
    host = [f for f in result.findings if f.kind == "host-state"]
    assert host and "replays what its capture saw" in host[0].message


def test_a_graph_reading_free_memory_is_named(no_gpu_parts):
    x = torch.randn(64)
    out = torch.empty(64)

    def step():
        torch.mul(x, 2, out=out)
        return out

    def replay():  # reads "freed memory": whatever the last filling left there
        out.fill_(float(no_gpu_parts[-1]))

    result = _check(step, replay, out)
    kinds = {f.kind for f in _fails(result)}
    assert kinds == {"freed-memory", "mismatch"}
    freed = next(f for f in result.findings if f.kind == "freed-memory")
    assert "memory freed after its capture" in freed.message and "0xff then 0x3c" in freed.message


def test_random_numbers_are_drawn_alike_by_the_eager_call_and_the_replays(no_gpu_parts):
    out = torch.empty(128)

    def step():
        return torch.rand(128, out=out)

    result = _check(step, step, out)
    assert result.passed, result.findings
    rng = [f for f in result.findings if f.kind == "rng"]
    assert rng and "the CPU default generator" in rng[0].message


def test_nondeterminism_is_judged_by_the_largest_difference(no_gpu_parts):
    x = torch.randn(32)
    out = torch.empty(32)
    calls = iter(range(10**6))

    def step():  # a reset that returns everything but a wobble of one ulp
        torch.mul(x, 1 + (next(calls) % 2) * 2**-20, out=out)
        return out

    step.reset = lambda: None
    result = _check(step, step, out)
    assert result.repeatability.nondeterministic
    assert result.passed, _fails(result)
    assert any(f.kind == "nondeterministic" and "within the step's own spread" in f.message
               for f in result.findings)  # fmt: skip
    # far outside the spread: a mismatch all the same
    result = _check(step, lambda: torch.mul(x, 3, out=out), out)
    assert {f.kind for f in _fails(result)} == {"mismatch"}


def test_a_step_that_does_not_repeat_is_refused_before_anything_runs():
    step = T.stateful(reset=None, device="cpu")
    replays = []
    with pytest.raises(StepStateError, match="does not repeat and has no step.reset"):
        _check(step, lambda: replays.append(1), None)
    assert replays == []


def test_on_the_cpu_check_step_reports_the_warmups_only():
    result = check_step(T.stateful(device="cpu"), warmup=2, device="cpu")
    assert result.passed and not result.compared and result.warmup == 2
    assert "needs a GPU" in result.why_not
    assert json.dumps(result.to_dict())  # plain data


# --- on a GPU ---------------------------------------------------------------------------------


def _cli(*args):
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env["PYTHONPATH"] = str(REPO)
    return subprocess.run(
        [sys.executable, "-m", "graph_harness", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=REPO,
    )


def _error_lines(stderr: str) -> list[str]:
    return [x for x in stderr.splitlines() if ": error:" in x]


@pytest.mark.gpu
def test_profile_the_stateful_toy_with_and_without_its_reset(tmp_path):
    out = tmp_path / "p"
    r = _cli("profile", "--target", "tests.targets:stateful_cache_no_reset", "--out", str(out))
    assert r.returncode == 2, r.stderr
    (line,) = _error_lines(r.stderr)
    assert "does not repeat and has no step.reset" in line and "closure pos" in line
    assert "CUDA error" not in r.stderr and "Traceback" not in r.stderr and not out.exists()
    r = _cli("profile", "--target", "tests.targets:stateful_cache", "--json")
    assert r.returncode == 0, r.stderr
    assert "at most 11 replays long" in r.stderr  # the toy's cache holds exactly 11 rows
    doc = json.loads(r.stdout)
    assert doc["matching"] and all(m["verified"] for m in doc["matching"].values())


@pytest.mark.gpu
def test_check_flags_a_host_value_frozen_at_capture(tmp_path):
    r = _cli(
        "check", "--target", "tests.targets:frozen_counter", "--json", "--out", str(tmp_path / "c")
    )
    assert r.returncode == 1, r.stderr
    check = json.loads(r.stdout)["checks"]["target"]
    assert not check["passed"] and check["compared"]
    fails = [f for f in check["findings"] if f["severity"] == "fail"]
    assert fails and all(f["kind"] == "mismatch" for f in fails)
    assert "closure state.t: 0 then 1" in fails[0]["message"]
    assert json.loads((tmp_path / "c" / "check.json").read_text())["checks"]["target"] == check


@pytest.mark.gpu
def test_count_check_that_fails_writes_nothing_and_exits_1(tmp_path):
    out = tmp_path / "n"
    r = _cli("count", "--target", "tests.targets:frozen_counter", "--check", "--out", str(out))
    assert r.returncode == 1, r.stderr
    (line,) = _error_lines(r.stderr)
    assert "CheckFailed" in line and "nothing was written" in line
    assert "FAIL" in r.stdout and not out.exists()


@pytest.mark.gpu
def test_check_passes_the_stateful_toy_with_its_reset():
    step = T.stateful_cache()
    result = check_step(step)
    assert result.passed and result.compared, result.findings
    assert result.outputs == 1 and result.state >= 4
    assert all(p["filled_bytes"] > 0 for p in result.poisoned)
    assert int(step.state["pos"]) == 0  # left in its starting state


@pytest.mark.gpu
def test_check_names_a_copy_from_pinned_host_memory_with_its_scope():
    step = T.pinned_copy()
    watch = StateWatch(step)
    export, captured = capture_and_keep(step, watch=watch)
    step.host.copy_(torch.randn(256))  # after capture: the graph reads it at every replay
    result = check_captured(step, export, captured, watch.repeatability)
    copies = [f for f in result.findings if f.kind == "host-copy"]
    want = [n["index"] for n in export.nodes if n["type"] == "memcpy" and n["scope"] == "load"]
    assert len(want) == 1 and [f.node for f in copies] == want, result.findings
    assert copies[0].scope == "load" and "read at every replay" in copies[0].message
    assert result.passed  # the eager call and the replays read the same new values


@pytest.mark.gpu
def test_check_catches_a_tensor_freed_after_capture():
    holder = {"x": torch.randn(1 << 20, device="cuda")}  # 4 MiB
    out = torch.empty(1 << 20, device="cuda")

    def step():
        torch.mul(holder["x"], 2, out=out)
        return out

    watch = StateWatch(step)
    export, captured = capture_and_keep(step, watch=watch)
    holder["x"] = holder["x"].clone()  # the same values; the captured tensor is freed
    result = check_captured(step, export, captured, watch.repeatability)
    kinds = {f.kind for f in result.findings if f.severity == "fail"}
    assert "freed-memory" in kinds and not result.passed, result.findings


@pytest.mark.gpu
def test_check_random_numbers_on_the_gpu():
    result = check_step(T.random_draws())
    assert result.passed and result.compared, result.findings  # bit for bit
    rng = [f for f in result.findings if f.kind == "rng"]
    assert rng and "the CUDA default generator" in rng[0].message


@pytest.mark.gpu
def test_a_cuda_error_during_a_replay_is_one_line_and_exit_1(tmp_path):
    out = tmp_path / "p"
    r = _cli("profile", "--target", "tests.targets:overflowing", "--out", str(out))
    assert r.returncode == 1, r.stderr
    (line,) = _error_lines(r.stderr)
    assert "ReplayFailed: a CUDA error replaying the graph of tests.targets:overflowing" in line
    assert "at or before replay" in line and "Likely cause" in line
    # nothing else from Python: the banner and notes are ours, the rest the kernel's assert
    other = [
        x
        for x in r.stderr.splitlines()
        if x.strip()
        and not x.startswith("graph-harness")
        and "Assertion" not in x
        and not PROGRESS_LINE.fullmatch(x)  # our phases (reports/progress.py)
    ]
    assert other == [], r.stderr
    assert not out.exists() and list(tmp_path.iterdir()) == []
