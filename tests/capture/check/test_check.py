"""`check`: a step's graph against its eager call.

The CPU tests run check's comparison with a stand-in graph (its replay() does what a graph
captured from the step would), the two GPU-only parts stood in for: the free-memory
poisoning (an object that says which pattern is in free memory) and the graph reader's
memcpy nodes. The gpu-marked tests check real graphs on the H200, and the command line
in child processes (a CUDA error there loses the context)."""

import contextlib
import itertools
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
from tests.capture.check.standin import _check, _fails, _Graph

REPO = Path(__file__).resolve().parents[3]
PROGRESS_LINE = re.compile(r".+ \.\.\.|.+: done in \d+\.\d s")


def test_a_graph_that_computes_what_the_step_computes_passes(no_gpu_parts):
    step = T.stateful(device="cpu")
    out = step()  # its output buffer
    step.reset()
    result = _check(step, step, out)  # replaying is running the step
    assert result.passed and result.compared and not _fails(result), result.findings
    assert result.status == "passed" and result.exit_code == 0 and result.steps == 4
    assert result.outputs == 1 and result.state >= 4  # cache, pos, start, x (and out)
    # two replayed runs of four calls, free memory filled once for each, held to its end
    assert no_gpu_parts == [0xFF, 0x3C]
    assert result.poisoned == [{"pattern": 0xFF}, {"pattern": 0x3C}]  # one record each
    assert "over 4 step(s)" in result.verdict() and "agree with the eager calls" in result.verdict()
    assert int(step.state["pos"]) == 0  # left at its start


def test_a_host_value_frozen_at_its_start_is_caught_from_the_second_step(no_gpu_parts):
    step = T.frozen_counter()
    out = step()  # the output buffer
    step.reset()
    row = step.table[0]  # captured from its start, t = 0: the graph copies row 0 for good
    one = _check(step, lambda: out.copy_(row), out, steps=1)
    # a one-step check's replay agrees; the value it saw move is tried ahead (host_probe)
    (ahead,) = [f for f in _fails(one) if f.kind == "host-state"]
    assert ahead.step == 1 and "from call 1 on" in ahead.message, one.findings
    result = _check(step, lambda: out.copy_(row), out)
    fails = _fails(result)
    assert result.status == "failed" and result.exit_code == 1
    mism = [f for f in fails if f.kind == "mismatch"]
    assert {f.tensor for f in mism} == {"output", "closure out"} and {f.step for f in mism} == {1}
    (host,) = [f for f in fails if f.kind == "host-state"]
    assert host.tensor == "closure state.t" and "0, 1, 2, 3, 4" in host.message
    assert "keep it on the GPU" in host.message
    assert "after step 1" in result.verdict()


def test_the_false_pass_a_position_written_from_an_int_the_reset_misses(no_gpu_parts):
    step = T.host_position(rewind=False)
    watch = StateWatch(step)
    kept = capture_and_keep(step, device="cpu", watch=watch)
    export = kept.export
    p = step.state["p"] - 1  # what the capture saw: its graph fills this forever

    def replay():
        step.cpos.fill_(p % 64)
        step.cache.index_copy_(0, step.cpos, (step.x * (step.cpos + 1)).view(1, -1))
        torch.sum(step.cache, dim=0, out=step.out)

    captured = Captured(_Graph(replay), [], step.out)
    result = check_captured(step, export, captured, watch.repeatability)
    assert result.status == "failed", result.findings
    kinds = {f.kind: f for f in _fails(result)}
    assert "closure state.p" in kinds["host-state"].message
    assert "not returned to its start by the reset" in kinds["host-state"].message
    mism = {f.tensor for f in _fails(result) if f.kind == "mismatch"}
    assert "closure cpos" in mism and "output" in mism
    assert not any(f.kind == "nondeterministic" for f in result.findings)  # not inferred


def test_the_false_pass_on_the_cpu_is_tried_ahead_and_failed():
    # no graph on the CPU, but the moving int is tried from the start at a later value:
    # the step's work depends on it (host_probe.py), so it fails, where it once was only
    # "not verified"
    result = check_step(T.host_position(rewind=False), device="cpu")
    assert result.status == "failed" and result.exit_code == 1, result.findings
    assert "closure state.p" in result.verdict()
    (f,) = [f for f in result.findings if f.kind == "host-state"]
    assert "the reset does not return closure state.p to its start" in f.message
    assert not any(f.kind == "nondeterministic" for f in result.findings)
    rewound = check_step(T.host_position(rewind=True), device="cpu")  # the int moves per call
    assert rewound.status == "failed" and "closure state.p" in rewound.verdict()


def test_a_host_read_counted_on_the_cpu_is_not_verified():
    result = check_step(T.item_in_step(), device="cpu")
    reads = [f for f in result.findings if f.kind == "host-read"]
    assert result.status == "unverified" and reads, result.findings
    assert reads[0].kernel.startswith("aten._local_scalar_dense") and reads[0].scope == "sample"


def test_fed_inputs_change_along_the_trajectory(no_gpu_parts):
    step = T.fed_stateful()
    out = step()
    step.reset()
    fed = []
    feed = step.feed
    step.feed = lambda i: (fed.append(i), feed(i))
    result = _check(step, step, out)  # a right graph: replaying is running the step
    assert result.passed and result.fed, result.findings
    assert "fed a new input at each" in result.verdict()
    # two eager runs and two replayed runs, each call fed its index
    assert fed[-17:] == [0, 1, 2, 3] * 4 + [0]  # the last: back at its start
    assert torch.equal(step.bufs["tok"], step.tokens[:1])


def test_an_input_rebound_by_the_feed_is_caught(no_gpu_parts):
    step = T.rebinding_feed()
    watch = StateWatch(step)
    kept = capture_and_keep(step, device="cpu", watch=watch)
    export = kept.export
    seen = step.bufs["tok"]  # the tensor the capture read: a graph keeps reading it

    def replay():
        e = step.table.index_select(0, seen)
        step.cache.index_copy_(0, step.pos, e)
        torch.sum(step.cache, dim=0, out=step.out)
        step.pos.add_(1)

    captured = Captured(_Graph(replay), [], step.out)
    result = check_captured(step, export, captured, watch.repeatability)
    mism = [f for f in _fails(result) if f.kind == "mismatch"]
    assert mism and min(f.step for f in mism) == 1, result.findings  # step 0's token is alike
    assert one_step_passes(step, export, replay, watch)


def one_step_passes(step, export, replay, watch):
    captured = Captured(_Graph(replay), [], step.out)
    return check_captured(step, export, captured, watch.repeatability, steps=1).passed


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
    assert freed.step == 0


def test_random_numbers_are_drawn_alike_by_the_eager_calls_and_the_replays(no_gpu_parts):
    out = torch.empty(128)

    def step():
        return torch.rand(128, out=out)

    result = _check(step, step, out)
    assert result.passed, result.findings
    rng = [f for f in result.findings if f.kind == "rng"]
    assert rng and "the CPU default generator" in rng[0].message


def _wobbling(out_dtype=torch.float32):
    """A step whose result wobbles from call to call where the state walk cannot see
    (an itertools counter): two eager runs from one state disagree, as kernels with
    atomics do."""
    x = torch.randn(32)
    out = torch.empty(32, dtype=out_dtype)
    calls = itertools.count()

    def step():
        k = (next(calls) * 7919) % 3  # 0, 2, 1, 0, 2, 1, ...
        if out_dtype.is_floating_point:
            torch.mul(x, 1 + k * 2**-20, out=out)
        else:
            out.fill_(k)
        return out

    step.reset = lambda: None
    return step, x, out


def test_nondeterminism_is_measured_by_two_eager_runs_from_one_state(no_gpu_parts):
    step, x, out = _wobbling()
    result = _check(step, step, out)
    assert result.passed and result.nondeterministic == 2, _fails(result)  # out and output
    measured = [f for f in result.findings if f.kind == "nondeterministic"]
    assert any("measured" in f.message for f in measured)
    assert any("within 4 times" in f.message for f in measured)
    # far outside the measured spread: a mismatch all the same
    result = _check(step, lambda: torch.mul(x, 3, out=out), out)
    assert {f.kind for f in _fails(result)} == {"mismatch"}


def test_a_deterministic_tensor_is_held_bit_for_bit():
    # no wobble: one ulp off in the graph fails, however small
    x = torch.randn(32)
    out = torch.empty(32)

    def step():
        torch.mul(x, 1.0, out=out)
        return out

    step.reset = lambda: None
    free = []
    import graph_harness.capture.check.trajectory as TR

    @contextlib.contextmanager
    def poisoned(pattern):
        free.append(pattern)
        yield type("P", (), {"to_dict": lambda self: {}})()

    mp = pytest.MonkeyPatch()
    mp.setattr(TR, "poisoned", poisoned)
    mp.setattr("graph_harness.capture.check.step.host_copies", lambda g, e: [])
    try:
        result = _check(step, lambda: torch.mul(x, 1 + 2**-23, out=out), out)
    finally:
        mp.undo()
    assert result.status == "failed" and result.nondeterministic == 0, result.findings


def test_an_integer_the_eager_runs_disagree_on_is_not_verified(no_gpu_parts):
    step, _x, out = _wobbling(torch.int64)
    result = _check(step, step, out)
    assert result.status == "unverified" and result.exit_code == 3, result.findings
    (u,) = {f.tensor for f in result.findings if f.kind == "unjudged"} - {"closure out"}
    assert u == "output"


def test_a_step_without_a_reset_is_checked_call_by_call(no_gpu_parts):
    x = torch.randn(16)
    out = torch.empty(16)

    def step():  # repeats: each call leaves what it found
        torch.mul(x, 2, out=out)
        return out

    result = _check(step, step, out)
    assert result.passed and result.steps == 4, result.findings
    assert no_gpu_parts == [0xFF, 0x3C] * 4  # call by call: A, B, then two replays
    bad = _check(step, lambda: out.fill_(1.0), out)
    assert {f.step for f in _fails(bad)} == {0}


def test_a_step_that_does_not_repeat_is_refused_before_anything_runs():
    step = T.stateful(reset=None, device="cpu")
    replays = []
    with pytest.raises(StepStateError, match="does not repeat and has no step.reset"):
        _check(step, lambda: replays.append(1), None)
    assert replays == []


def test_a_growing_cache_is_told_to_be_static():
    with pytest.raises(StepStateError, match="use a static cache") as e:
        check_step(T.growing(), device="cpu")
    assert "closure cache.k" in str(e.value) and "give the step a reset" not in str(e.value)


def test_steps_must_be_a_whole_number_of_calls():
    # issue 60, 5: the command line's bound (100,000) in every entry point; 3 x 10**7
    # grew memory without limit through check_step, 10**12 through graph_check
    from graph_harness.pytest_plugin import GraphCheck

    for bad in (0, -1, 1.5, True, "4", 100_001, 3 * 10**7):
        with pytest.raises(ValueError, match="steps must be a whole number from 1 to 100,000"):
            check_step(T.stateful(device="cpu"), steps=bad, device="cpu")
    with pytest.raises(ValueError, match="from 1 to 100,000"):
        GraphCheck("t")(T.stateful(device="cpu"), steps=10**12)
    with pytest.raises(ValueError, match="soak must be a whole number from 0 to 100,000"):
        check_step(T.stateful(device="cpu"), soak=10**9, device="cpu")


def test_on_the_cpu_check_step_runs_the_eager_part():
    step = T.stateful(device="cpu")
    result = check_step(step, warmup=2, device="cpu")
    assert result.passed and not result.compared and result.warmup == 2, result.findings
    assert "needs a GPU" in result.why_not
    assert json.dumps(result.to_dict())  # plain data
    assert int(step.state["pos"]) == 0


def _render(result, terminal: bool) -> str:
    import io

    from graph_harness.reports.check_tables import findings_table
    from graph_harness.reports.cli.console import _console_class

    buf = io.StringIO()
    # graph-harness's console (text is text), as on a terminal (colour) or a pipe (plain)
    c = _console_class()(
        file=buf, width=200, markup=False, emoji=False, force_terminal=terminal,
        color_system="standard" if terminal else None,
    )  # fmt: skip
    c.print(findings_table(result))
    return buf.getvalue()


def test_the_findings_table_shows_style_never_markup():
    result = check_step(T.host_scale(), device="cpu")
    assert {f.severity for f in result.findings} >= {"unverified", "info"}
    result.findings.append(
        type(result.findings[0])(kind="x", severity="fail", message="a [red]name[/] of theirs")
    )
    result.findings.append(type(result.findings[0])(kind="y", severity="warn", message="w"))
    for terminal in (False, True):
        text = _render(result, terminal)
        assert (
            "[red]FAIL" not in text
            and "[yellow]" not in text
            and "[/]" not in text.replace("a [red]name[/]", "")
        )
        assert "FAIL" in text and "NOT VERIFIED" in text and "warn" in text
        assert "a [red]name[/] of theirs" in text  # a name stays text, brackets and all
        assert ("\x1b[" in text) == terminal


def test_the_cli_on_the_cpu_says_not_verified_with_exit_3(tmp_path):
    from tests.command_line import run

    # a host value that doubles cannot be tried ahead (capture/check/host_probe.py)
    r = run("check", "--target", "tests.targets:host_scale")
    assert r.returncode == 3, r.stderr
    assert "NOT VERIFIED" in r.stdout and "[magenta]" not in r.stdout and "[red]" not in r.stdout
    assert "could NOT verify" in r.stderr and "closure state.scale" in r.stderr
    r = run("check", "--target", "tests.targets:host_scale", "--json", "--steps", "2")
    assert r.returncode == 3, r.stderr
    check = json.loads(r.stdout)["checks"]["target"]
    assert check["status"] == "unverified" and check["steps"] == 2 and not check["passed"]
    out = tmp_path / "n"
    r = run("count", "--target", "tests.targets:host_scale", "--check", "--out", str(out))
    assert r.returncode == 3 and "CheckUnverified" in r.stderr, r.stderr
    assert "nothing was written" in r.stderr and not out.exists()
    r = run("count", "--target", "tests.targets:stateful_cache", "--check-steps", "2")
    assert r.returncode == 2 and "--check-steps sets how long --check runs" in r.stderr
    r = run("count", "--target", "tests.targets:stateful_cache", "--check", "--check-steps", "2")
    assert r.returncode == 0, r.stderr


def test_the_cli_on_the_cpu_fails_a_host_position_it_tried_ahead():
    # the position's int moves by one a call: tried at call 3 from the start, it writes
    # another row than the captured 0 (on a GPU the replays show it from call 1 too)
    from tests.command_line import run

    r = run("check", "--target", "tests.targets:host_position", "--json")
    assert r.returncode == 1, r.stderr
    check = json.loads(r.stdout)["checks"]["target"]
    (f,) = [f for f in check["findings"] if f["kind"] == "host-state"]
    assert f["severity"] == "fail" and f["tensor"] == "closure state.p" and f["step"] == 1


def test_report_check_puts_the_verdict_in_the_report(tmp_path):
    from tests.command_line import run

    out = tmp_path / "r"
    r = run("report", "--target", "tests.targets:fed_stateful", "--check", "--out", str(out))
    assert r.returncode == 0, r.stderr
    md = (out / "report.md").read_text()
    assert "## Does each graph compute what its step computes? (check)" in md
    assert "check passed for tests.targets:fed_stateful as far as the CPU goes" in md
    doc = json.loads((out / "check.json").read_text())
    assert doc["schema"] == "graph-harness/check" and doc["schema_version"] == 2
    (check,) = doc["checks"].values()
    assert check["fed"] and check["steps"] == 4


def test_the_cli_refuses_a_feed_that_is_not_a_function(tmp_path):
    from tests.command_line import run

    (tmp_path / "t.py").write_text(
        "import torch\nx = torch.ones(2)\ndef f():\n    s = lambda: x.mul_(1.0)\n"
        "    s.feed = 3\n    return s\n"
    )
    r = run("check", "--target", f"{tmp_path / 't.py'}:f")
    assert r.returncode == 2 and "its step.feed is an int, not a function" in r.stderr


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
    assert not check["passed"] and check["compared"] and check["status"] == "failed"
    fails = [f for f in check["findings"] if f["severity"] == "fail"]
    assert {f["kind"] for f in fails} == {"mismatch", "host-state"}, fails
    assert min(f["step"] for f in fails if f["kind"] == "mismatch") == 1  # step 0 agrees
    host = next(f for f in fails if f["kind"] == "host-state")
    assert host["tensor"] == "closure state.t" and "keep it on the GPU" in host["message"]
    assert json.loads((tmp_path / "c" / "check.json").read_text())["checks"]["target"] == check


def _verdict(spec, *more):
    r = _cli("check", "--target", spec, "--json", *more)
    assert r.returncode in (0, 1, 3), r.stderr
    assert "CUDA error" not in r.stderr and "Traceback" not in r.stderr, r.stderr
    return r.returncode, json.loads(r.stdout)["checks"]["target"]


@pytest.mark.gpu
def test_the_false_pass_of_issue_30_fails_on_the_gpu():
    # a position written from a Python int that the reset does not rewind: capture bakes
    # the int into the fill, so every replay writes one position
    code, check = _verdict("tests.targets:host_position")
    assert code == 1 and check["status"] == "failed", check["findings"]
    fails = [f for f in check["findings"] if f["severity"] == "fail"]
    assert any(f["kind"] == "host-state" and f["tensor"] == "closure state.p" for f in fails)
    assert any(f["kind"] == "mismatch" and f["tensor"] == "closure cpos" for f in fails)
    assert not any(f["kind"] == "nondeterministic" for f in check["findings"])


@pytest.mark.gpu
@pytest.mark.parametrize(
    "spec, tried_ahead",
    [("tests.targets:host_position_rewound", True), ("tests.targets:rebinding_feed", False)],
)
def test_steps_a_one_step_check_passes_fail_over_a_trajectory(spec, tried_ahead):
    # each is right on its first call from the reset and wrong from the second on. One
    # call's replay cannot show it; a position kept in a Python int is also tried ahead
    # (capture/check/host_probe.py), which fails it at call 1 even then; a rebound input
    # has no host value to try, so one call passes and the trajectory fails it
    code, one = _verdict(spec, "--steps", "1")
    assert one["steps"] == 1, one
    probed = [f for f in one["findings"] if f["kind"] == "host-state" and f["severity"] == "fail"]
    if tried_ahead:
        assert code == 1 and [f["step"] for f in probed] == [1], one["findings"]
    else:
        assert code == 0 and one["passed"] and not probed, one["findings"]
    code, check = _verdict(spec)
    assert code == 1 and check["steps"] == 4, check["findings"]
    mism = [f for f in check["findings"] if f["kind"] == "mismatch"]
    assert mism and min(f["step"] for f in mism) == 1, mism


@pytest.mark.gpu
def test_a_fed_step_passes_over_a_trajectory_of_inputs():
    code, check = _verdict("tests.targets:fed_stateful")
    assert code == 0 and check["passed"] and check["fed"] and check["steps"] == 4, check
    assert check["outputs"] == 1 and check["state"] >= 4


@pytest.mark.gpu
def test_a_model_on_the_cpu_on_a_gpu_machine_is_told_so():
    r = _cli("count", "--target", "tests.targets:small_mlp")
    assert r.returncode == 1, r.stderr
    (line,) = _error_lines(r.stderr)
    assert "its tensors are on the CPU" in line and "model.to('cuda')" in line, line


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
    assert result.passed and result.compared and result.steps == 4, result.findings
    assert result.outputs == 1 and result.state >= 4
    assert len(result.poisoned) == 2 and all(p["filled_bytes"] > 0 for p in result.poisoned)
    assert int(step.state["pos"]) == 0  # left in its starting state


@pytest.mark.gpu
def test_check_names_a_copy_from_pinned_host_memory_with_its_scope():
    step = T.pinned_copy()
    watch = StateWatch(step)
    kept = capture_and_keep(step, watch=watch)
    export, captured = kept.export, kept.captured
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
    kept = capture_and_keep(step, watch=watch)
    export, captured = kept.export, kept.captured
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
