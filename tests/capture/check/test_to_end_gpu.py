"""`check --steps to-end` and `--soak` on real graphs (the H200): the examples run to the end
of their caches and pass; a graph that freezes a split chosen on the host from the
position fails four calls by its host counter tried ahead, and to the end by its replays,
at the first compared call past the switch; a soak passes a right graph, fails one whose
kernel goes wrong after many launches, and reports as a hang one whose kernel stalls,
without waiting for it, from Python and from the command line (which exits while the
device still runs the stall)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from graph_harness.capture import check_step
from graph_harness.capture.check.sample import compared_calls
from tests.capture.check.planted import late_step, launches, split_on_the_host

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parents[3]
HERE = Path(__file__).resolve()


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO / "examples" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # a dataclass in it looks its module up there
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("example", ["llama_decode", "hf_decode"])
def test_the_examples_pass_to_the_end_of_their_caches(example):
    if example == "hf_decode":
        pytest.importorskip("transformers")
    step = _load(example).make_step(preset="tiny")
    result = check_step(step, steps="to-end", module=step.module)
    assert result.passed, result.verdict()
    assert result.to_end and result.steps == step.max_steps
    assert result.compared_calls == compared_calls(step.max_steps)
    assert set(result.seconds) == {"a", "b", "c", "d"}


def test_a_path_switched_on_the_host_past_the_first_calls_fails_only_to_the_end():
    step = split_on_the_host()
    short = check_step(step, steps=4)
    # four calls' replays never reach the switch; the host counter tried ahead does
    # (capture/check/host_probe.py), and halving names the call where it first matters
    probed = [f for f in short.findings if f.kind == "host-state" and f.severity == "fail"]
    assert short.status == "failed" and [f.step for f in probed] == [20], short.verdict()
    assert not [f for f in short.findings if f.kind == "mismatch"], short.verdict()
    result = check_step(step, steps="to-end")
    assert result.status == "failed", result.verdict()
    first = min(f.step for f in result.findings if f.severity == "fail" and f.step is not None)
    assert first == min(i for i in compared_calls(64) if i >= 20), result.verdict()


# --- a kernel that goes wrong, or stalls, after many launches ------------------------------


def test_a_soak_passes_a_right_graph_and_replays_as_asked():
    step = late_step()
    result = check_step(step, steps=4, soak=2000)
    assert result.passed, result.verdict()
    before = 3 + 2 * 4 + 2 * 4  # warm-ups, two eager runs, two replayed runs
    assert launches() == before + 2000
    assert result.soak["done"] == 2000 and result.soak["hang"] is None


def test_a_kernel_that_goes_wrong_after_many_launches_fails_the_soak():
    before = 3 + 2 * 4 + 2 * 4
    step = late_step(wrong_after=before + 300)
    result = check_step(step, steps=4, soak=2000)
    assert result.status == "failed", result.verdict()
    bad = [f for f in result.findings if f.kind == "soak-mismatch"]
    assert bad, result.verdict()
    at = int(bad[0].message.split("at soak replay ")[1].split()[0])
    assert 300 < at <= 2 * 300 + 8  # the first compared lap after it went wrong


def stall_seconds(stall: int) -> float:
    """How long one launch spinning `stall` units takes here (measured, not assumed)."""
    step = late_step(stall_after=0, stall=stall)
    step()  # compiled, and the first spin
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    step()
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def test_a_stalled_replay_is_a_hang_reported_without_waiting_for_it():
    unit = stall_seconds(20) / 20
    stall = max(1, round(2.0 / unit))  # each stalled launch about 2 s: 4 x the deadline
    print(f"one stall unit: {unit * 1e3:.3f} ms; stalling {stall} units")
    before = 3 + 2 * 4 + 2 * 4
    step = late_step(stall_after=before + 50, stall=stall)
    t0 = time.perf_counter()
    result = check_step(step, steps=4, soak=500, soak_deadline=0.5)
    took = time.perf_counter() - t0
    hang = result.soak["hang"]
    assert result.status == "failed" and hang is not None, result.verdict()
    assert hang["replay"] == 51 and result.soak["done"] == 50, hang
    assert any(f.kind == "hang" for f in result.findings)
    print(f"check_step returned {took:.2f} s after it began, the hang found")
    torch.cuda.synchronize()  # the stalled launches end before the next test


def test_the_command_line_exits_on_a_hang_while_the_device_still_runs_it(tmp_path):
    unit = stall_seconds(20) / 20
    stall = min(2**31 - 1, round(240.0 / unit))  # one stalled launch: about 4 minutes
    target = tmp_path / "stalls.py"
    target.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(REPO)!r})\n"
        "from tests.capture.check.planted import late_step\n"
        "def make():\n"
        f"    return late_step(stall_after=19 + 20, stall={stall})\n"
    )
    t0 = time.perf_counter()
    r = subprocess.run(
        [sys.executable, "-m", "graph_harness", "check", "--target", f"{target}:make",
         "--soak", "200", "--soak-deadline", "0.5", "--out", str(tmp_path / "out")],
        capture_output=True, text=True, cwd=REPO, timeout=150,
    )  # fmt: skip
    took = time.perf_counter() - t0
    # a command that waited on the device at its exit would wait out the stall (about 4
    # minutes) and meet the timeout above; killed, its context and the stall go with it
    assert r.returncode == 1, r.stderr[-2000:]
    assert "did not finish within 0.5 s" in r.stdout + r.stderr
    assert (tmp_path / "out" / "check.json").is_file()  # written before it exits
    print(f"check --soak with a stall exited after {took:.1f} s")
