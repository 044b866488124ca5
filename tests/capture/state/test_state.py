"""Steps with state: exact fingerprints of what a step can reach, repeatability from the
warm-ups, the reset protocol, the replay windows and their refusals.

All on the CPU, through the code the GPU path runs: the replay loops (timing, CUPTI
windows, profile_steps) are driven with a stand-in graph whose replay() runs the eager
step, with only the GPU's clock (CUDA events) and CUPTI's trace stood in for."""

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from graph_harness.capture import StepSettings, capture_and_count
from graph_harness.capture.check.settings import CheckSettings
from graph_harness.capture.count import capture_and_keep
from graph_harness.capture.export.nodes import NodeExport
from graph_harness.capture.profile.settings import ProfileSettings
from graph_harness.capture.replay.guard import Replayer, ReplayFailed
from graph_harness.capture.state.changes import compare
from graph_harness.capture.state.digest import CHUNK_WORDS
from graph_harness.capture.state.fingerprint import CLONE_MAX_BYTES, fingerprint
from graph_harness.capture.state.steps import StateWatch, StepStateError
from tests import targets as T

REPO = Path(__file__).resolve().parents[3]


def _watched(step, warmup=StepSettings.warmup):
    watch = StateWatch(step)
    capture_and_keep(step, warmup=warmup, device="cpu", watch=watch)
    return watch.repeatability


def _state_of(step) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in step.state.items()}


def _bitwise_equal(a: dict, b: dict) -> bool:
    def bits(t):
        return t.contiguous().reshape(-1).view(torch.uint8)

    return a.keys() == b.keys() and all(torch.equal(bits(a[k]), bits(b[k])) for k in a)


# --- fingerprints ---------------------------------------------------------------------------


def test_one_element_of_a_large_tensor_is_found_wherever_it_is():
    # float32 words: two pieces and a remainder (3 pieces), over the clone limit: hashed
    n = 2 * CHUNK_WORDS + 3
    assert n * 4 > CLONE_MAX_BYTES
    big = torch.randn(n)

    def step():
        big.mul_(1.0)

    start = fingerprint(step, with_output=False)
    assert start.seen["closure big"].hashed
    for i in (0, CHUNK_WORDS - 1, CHUNK_WORDS, n - 1):  # either side of a piece boundary
        was = big[i].clone()
        big[i] = torch.nextafter(was, torch.tensor(math.inf))  # one ulp
        changes = compare(start, fingerprint(step, with_output=False))
        assert [c.name for c in changes] == ["closure big"], i
        assert "1 of 3 pieces" in changes[0].detail
        big[i] = was
    big[5] = 0.0
    zero = fingerprint(step, with_output=False)
    big[5] = -0.0  # equal as numbers, not as bits
    assert [c.name for c in compare(zero, fingerprint(step, with_output=False))] == ["closure big"]
    big[5] = start_value = 1.25
    head = big[:CHUNK_WORDS].clone()
    before_swap = fingerprint(step, with_output=False)
    big[:CHUNK_WORDS], big[CHUNK_WORDS : 2 * CHUNK_WORDS] = big[CHUNK_WORDS : 2 * CHUNK_WORDS], head
    swapped = compare(before_swap, fingerprint(step, with_output=False))
    assert "2 of 3 pieces" in swapped[0].detail  # the same words, moved: still seen
    assert big[CHUNK_WORDS + 5] == start_value
    assert compare(before_swap, before_swap) == []


@pytest.mark.parametrize(
    "dtype, n",
    [
        (torch.float64, CHUNK_WORDS + 7),  # two words an element: pieces of half as many
        (torch.uint8, 4 * CHUNK_WORDS + 4 * 1024 + 3),  # bytes that are not whole words
        (torch.bfloat16, 2 * CHUNK_WORDS + 2 * 1024 + 1),
    ],
)
def test_every_dtype_is_hashed_by_its_bytes(dtype, n):
    t = (torch.rand(n) * 200).to(dtype)
    assert n * t.element_size() > CLONE_MAX_BYTES

    def step():
        t.add_(0)

    a = fingerprint(step, with_output=False)
    assert a.seen["closure t"].hashed
    for i in (0, n // 2, n - 1):
        was = t[i].clone()
        t[i] = was + 1
        assert [c.name for c in compare(a, fingerprint(step, with_output=False))] == ["closure t"]
        t[i] = was
    assert compare(a, fingerprint(step, with_output=False)) == []


def test_views_that_are_not_contiguous_are_hashed_in_full():
    base = torch.randn(1100, 2100)  # 9.2 MB: over the clone limit
    t = base.t()  # a transpose: dense, in another order
    s = base[:, :1500]  # rows with gaps between them

    def step():
        t.add_(0)
        s.add_(0)

    a = fingerprint(step, with_output=False)
    assert a.seen["closure t"].hashed and a.seen["closure s"].hashed
    base[7, 1800] += 1  # outside the slice
    b = fingerprint(step, with_output=False)
    assert [c.name for c in compare(a, b)] == ["closure t"]
    base[1099, 3] -= 1  # in both
    assert {c.name for c in compare(b, fingerprint(step, with_output=False))} == {
        "closure t",
        "closure s",
    }


class _Layer:
    def __init__(self):
        self.keys = torch.randn(4, 8)
        self.values = torch.randn(4, 8)


class _Cache:  # a StaticCache's shape: layers, each holding its tensors
    def __init__(self):
        self.layers = [_Layer(), _Layer()]
        self.seen_tokens = 0


def test_state_two_objects_deep_and_the_model_are_named_and_watched():
    cache = _Cache()
    model = torch.nn.Sequential(torch.nn.Linear(8, 8))
    model.register_buffer("steps", torch.randint(0, 9, (3,)))
    x = torch.randn(4, 8)

    def step():
        cache.layers[1].keys.add_(model(x))
        cache.seen_tokens += 1

    step.module = model
    a = fingerprint(step, with_output=False)
    want = {
        "module parameter 0.weight",
        "module parameter 0.bias",
        "module buffer steps",
        "closure cache.layers.0.keys",
        "closure cache.layers.1.values",
        "closure cache.seen_tokens",
        "closure x",
    }
    assert want <= set(a.seen)
    cache.layers[1].keys[2, 3] += 1
    cache.seen_tokens += 1
    changes = {c.name: c for c in compare(a, fingerprint(step, with_output=False))}
    assert set(changes) == {"closure cache.layers.1.keys", "closure cache.seen_tokens"}
    assert (
        "1 of 32 elements differ (first at [2, 3]" in changes["closure cache.layers.1.keys"].detail
    )
    assert (
        changes["closure cache.seen_tokens"].host
        and changes["closure cache.seen_tokens"].detail == "0 then 1"
    )


# --- repeatability, from the warm-ups -----------------------------------------------------------


def test_the_stateful_toy_repeats_from_its_reset_and_not_without_it():
    rep = _watched(T.stateful(device="cpu"))
    assert rep.repeatable is True and rep.reset and rep.refusal("toy") is None
    assert {c.name for c in rep.in_a_call} == {"closure cache", "closure pos"}
    rep = _watched(T.stateful(reset=None, device="cpu"))
    assert rep.repeatable is False and not rep.reset
    assert {"closure cache", "closure pos", "output"} <= {c.name for c in rep.changed}
    line = rep.refusal("toy")
    assert "\n" not in line and line.startswith("toy does not repeat and has no step.reset")
    assert "closure cache, closure out, closure pos changed (and so did its outputs)" in line
    assert "`step.reset`" in line and "in place" in line


def test_a_host_counter_alone_makes_a_step_not_repeat():
    rep = _watched(T.host_counter())
    assert rep.repeatable is False
    assert [c.name for c in rep.changed] == ["closure state.calls"] and rep.changed[0].host
    assert "closure state.calls (a host value)" in rep.refusal("c")


def test_fresh_outputs_and_rebound_tensors_are_compared_by_value_not_address():
    x = torch.randn(64)
    state = {"h": torch.randn(64)}

    def step():
        state["h"] = state["h"].clone()  # the same values in a new tensor
        return x * 2  # a fresh output every call, wherever the allocator puts it

    rep = _watched(step)
    assert rep.repeatable is True, rep.changed
    assert rep.rebound == ("closure state.h",)
    assert "rebinds closure state.h to new tensors" in rep.notes("s")[0]


def test_fewer_than_two_warmups_cannot_tell():
    rep = _watched(T.stateful(reset=None, device="cpu"), warmup=1)
    assert rep.repeatable is None and rep.refusal("toy") is None
    assert "telling takes 2 or more: --warmup 2" in rep.notes("toy")[0]


def test_random_numbers_are_no_state_to_manage():
    out = torch.empty(64)

    def step():
        torch.rand(64, out=out)
        return out

    rep = _watched(step)
    assert rep.repeatable is True and rep.rng == ("the CPU default generator",)


# --- the reset protocol: how often the step and its reset run -----------------------------------


def _counted():
    calls = {"step": 0, "reset": 0}
    x = torch.randn(4)

    def step():
        calls["step"] += 1
        x.mul_(1.0)

    def reset():
        calls["reset"] += 1

    step.reset = reset
    return step, calls


@pytest.mark.parametrize("warmup", [0, 2, 5])
def test_warmup_n_runs_the_step_n_plus_one_times_and_resets_before_each_and_at_the_end(warmup):
    step, calls = _counted()
    capture_and_count(step, warmup=warmup, device="cpu")
    # a reset before each warm-up, one before the capture, one at the end
    assert calls == {"step": warmup + 1, "reset": warmup + 2}


def test_the_default_warmup_comes_from_step_settings():
    step, calls = _counted()
    capture_and_count(step, device="cpu")
    assert calls["step"] == StepSettings().warmup + 1 == 4


def test_node_budget_passes_warmup_on(node_budget):
    step, calls = _counted()
    node_budget(step, total=10, warmup=2, device="cpu")
    assert calls["step"] == 3


def test_a_reset_that_is_not_callable_is_refused():
    step = T.stateful(device="cpu")
    step.reset = 3
    with pytest.raises(StepStateError, match="step.reset is an int, not a function"):
        capture_and_count(step, device="cpu")


# --- replay windows, through the loops the GPU runs ------------------------------------------


class _EagerGraph:
    """Stands in for a step's captured graph: replaying it runs the step eagerly and logs
    the one 'kernel' CUPTI would see."""

    def __init__(self, step):
        self.step, self.replays, self.log = step, 0, []

    def replay(self):
        self.step()
        self.replays += 1
        t = 10.0 * len(self.log)
        self.log.append({"ph": "X", "cat": "kernel", "name": "k", "ts": t, "dur": 4.0, "args": {}})


class _Event:  # the GPU's clock: every trial takes 1 ms
    def __init__(self, enable_timing=False):
        pass

    def record(self):
        pass

    def synchronize(self):
        pass

    def elapsed_time(self, other):
        return 1.0


def _one_kernel_export():
    node = dict(index=0, type="kernel", kernel="k", grid=None, block=None, stage=None)
    node.update(step="unscoped", scope="unscoped", scope_path=[], deps=[], parent=None)
    return NodeExport(
        source="cuda-graph", workload="callable:step", variant=None, params=None, nodes=[node]
    )


@pytest.fixture
def gpu_stood_in(monkeypatch):
    import graph_harness.capture.profile.activities as A
    import graph_harness.capture.profile.run as R

    graphs = []

    def cupti_trace(run):  # what CUPTI records: the replays `run` makes
        g = graphs[-1]
        first = len(g.log)
        run()
        return {"traceEvents": g.log[first:]}

    monkeypatch.setattr(torch.cuda, "Event", _Event)
    monkeypatch.setattr(A, "cupti_trace", cupti_trace)
    monkeypatch.setattr(R, "local_ids", lambda graph, export: None)
    monkeypatch.setattr(R, "environment", lambda device: {"device": "stand-in"})
    return graphs


# No calibration chains on the stand-in: they are the harness's own graphs, never the step.
SETTINGS = ProfileSettings(trials=3, windows=3, replays=4, calibration_rounds=0)


def _profile(step, gpu_stood_in, settings=SETTINGS):
    from graph_harness.capture.profile.run import profile_steps

    rep = _watched(step)
    graph = _EagerGraph(step)
    gpu_stood_in.append(graph)
    r = Replayer(graph, "toy", reset=getattr(step, "reset", None), repeatability=rep)
    return profile_steps({"toy": (_one_kernel_export(), r)}, settings), r, graph


def test_with_its_reset_any_number_of_windows_leave_the_state_of_a_fresh_build(gpu_stood_in):
    # the cache holds exactly the replays a window may take from the reset: one more
    # between two resets would write past its end (IndexError here, an assert on a GPU)
    step = T.stateful(slots=SETTINGS.replays_per_reset, device="cpu")
    fresh = _state_of(T.stateful(slots=SETTINGS.replays_per_reset, device="cpu"))
    result, r, graph = _profile(step, gpu_stood_in)
    assert r.most_since_reset == SETTINGS.replays_per_reset == SETTINGS.timing().round_replays
    s = SETTINGS
    windows = (s.warmup + s.replays + 1) + (s.windows - 1) * (1 + s.replays + 1)
    timed = 1 + s.warmup + s.trials * s.timing().round_replays
    host = 1 + s.trials * s.host_launches  # one warm-up, then each trial's single launches
    assert graph.replays == r.replays == timed + host + windows
    assert _bitwise_equal(_state_of(step), fresh)
    p = result.profiles["toy"]
    assert p.matching["verified"] and len(p.replays) == s.windows * s.replays
    # not vacuous: the same schedule overflows a cache one row shorter
    with pytest.raises((IndexError, RuntimeError), match="out of"):
        _profile(T.stateful(slots=SETTINGS.replays_per_reset - 1, device="cpu"), gpu_stood_in)


def test_without_a_reset_it_is_refused_before_any_replay(gpu_stood_in):
    step = T.stateful(reset=None, device="cpu")
    with pytest.raises(StepStateError) as e:
        _profile(step, gpu_stood_in)
    assert gpu_stood_in[-1].replays == 0
    assert "toy does not repeat and has no step.reset" in str(e.value)


def test_the_replays_per_reset_follow_the_settings():
    assert ProfileSettings().replays_per_reset == ProfileSettings().replays + 1
    assert ProfileSettings(replays=2, warmup=7).replays_per_reset == 10  # a timed trial's
    assert ProfileSettings(replays=2, warmup=17).replays_per_reset == 17


def test_a_cuda_error_in_a_replay_is_one_line_naming_the_graph_window_and_replays(gpu_stood_in):
    from graph_harness.capture.replay.timing import time_replays_us

    class Failing:
        replays = 0

        def replay(self):
            self.replays += 1
            if self.replays == 14:
                raise torch.AcceleratorError("CUDA error: device-side assert triggered\nmore")

    r = Replayer(Failing(), "tests/targets.py:overflowing")
    with pytest.raises(ReplayFailed) as e:
        time_replays_us({"t": r}, replays=10, trials=3, warmup=2)
    line = str(e.value)
    assert "\n" not in line and not e.value.context_lost  # no CUDA in use here
    assert "the graph of tests/targets.py:overflowing in timed trial 2 of 3" in line
    assert "replays 13 to 14 of this graph" in line and "at or before replay 14" in line
    assert "AcceleratorError: CUDA error: device-side assert triggered." in line
    assert "give it a step.reset" in line

    class Raising:
        def replay(self):
            raise ValueError("not a CUDA error")

    with pytest.raises(ValueError, match="not a CUDA error"):
        time_replays_us({"t": Raising()}, replays=1, trials=1, warmup=1)


# --- the command line, on the CPU ------------------------------------------------------------


def _cli(*args):
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env.update(PYTHONPATH=str(REPO), CUDA_VISIBLE_DEVICES="")
    return subprocess.run(
        [sys.executable, "-m", "graph_harness", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=REPO,
    )


def test_check_on_the_cpu_refuses_a_step_that_does_not_repeat_in_one_line(tmp_path):
    out = tmp_path / "c"
    r = _cli("check", "--target", "tests.targets:stateful_cache_no_reset", "--out", str(out))
    assert r.returncode == 2, r.stderr
    errors = [x for x in r.stderr.splitlines() if "error" in x]
    assert len(errors) == 1 and "does not repeat and has no step.reset" in errors[0]
    assert "closure cache, closure out, closure pos" in errors[0]
    assert r.stdout == "" and not out.exists()


def test_check_on_the_cpu_passes_the_toy_with_its_reset(tmp_path):
    import json

    out = tmp_path / "c"
    r = _cli("check", "--target", "tests.targets:stateful_cache", "--json", "--out", str(out))
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc == json.loads((out / "check.json").read_text())
    check = doc["checks"]["target"]
    assert check["passed"] and not check["compared"] and "needs a GPU" in check["why_not"]
    assert check["warmup"] == StepSettings().warmup and check["repeatability"]["repeatable"]
    state = [f for f in check["findings"] if f["kind"] == "state"]
    assert state and "closure cache, closure pos" in state[0]["message"]
    assert (out / "nodes-target.json").exists()


def test_the_warmup_flag_reaches_the_step_exactly(capsys, tmp_path):
    from graph_harness.reports.cli import program as cli

    eager = 2 * CheckSettings().steps  # check's two eager runs, on a GPU and on the CPU alike
    for args, calls in [
        (["count", "--target", "tests.targets:counting", "--warmup", "2"], 3),
        (["count", "--target", "tests.targets:counting"], StepSettings().warmup + 1),
        (["check", "--target", "tests.targets:counting", "--warmup", "5"], 6 + eager),
        (["check", "--target", "tests.targets:counting", "--warmup", "1", "--steps", "2"], 6),
        (["report", "--target", "tests.targets:counting", "--warmup", "0"], None),
    ]:
        if args[0] == "report":
            if torch.cuda.is_available():
                continue  # a GPU report profiles: replays, not calls
            args, calls = [*args, "--out", str(tmp_path / "r")], 1
        assert cli.main(args) == 0, capsys.readouterr().err
        assert next(T.CALLS[-1]) == calls, args
    assert cli.main(["count", "--warmup", "2"]) == 2
    assert "--warmup applies to your step: give --target" in capsys.readouterr().err


def test_a_reset_goes_through_the_same_guard_as_the_step(capsys):
    from graph_harness.reports.cli import program as cli
    from graph_harness.reports.cli.target import load_target

    target = load_target("tests.targets:stateful_cache")
    assert target.reset is target.step.reset and target.reset.__wrapped__ is not None
    assert cli.main(["count", "--target", "tests.targets:exiting_reset"]) == 1
    assert "called sys.exit(4) in its reset" in capsys.readouterr().err
    assert cli.main(["count", "--target", "tests.targets:bad_reset"]) == 2
    assert "its step.reset is an int, not a function" in capsys.readouterr().err


def test_the_docs_state_the_warmup_default_and_the_replays_per_reset():
    # Messages send a user to docs/steps-and-check.md: the README links the page.
    readme = (REPO / "README.md").read_text()
    assert "[Steps with state](docs/steps-and-check.md)" in readme
    assert "| `graph-harness check --target SPEC" in readme
    text = (REPO / "docs" / "steps-and-check.md").read_text()
    section = text[re.search(r"^# Steps with state$", text, re.M).start() :]
    m = re.search(r"with the default\s+settings,\s+\*\*(\d+)\*\*\s+replays", section)
    assert m and int(m.group(1)) == ProfileSettings().replays_per_reset
    m = re.search(r"`--warmup N`\s+\(default\s+\*\*(\d+)\*\*\)", section)
    assert m and int(m.group(1)) == StepSettings().warmup


def test_a_cache_too_small_for_the_warmups_says_they_advanced_it():
    r = subprocess.run(
        [sys.executable, "-m", "graph_harness", "count", "--target",
         "tests.targets:small_cache_no_reset"],
        capture_output=True, text=True, timeout=300, cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), "CUDA_VISIBLE_DEVICES": ""},
    )  # fmt: skip
    assert r.returncode == 1, r.stderr
    (line,) = [x for x in r.stderr.splitlines() if ": error:" in x]
    assert "warm-up call 3 of 3 failed (IndexError: index_copy_()" in line, line
    assert "after 2 that worked; the step has no step.reset" in line and "targets.py" in line


def test_count_says_when_what_replays_a_step_will_refuse_it():
    def count(spec):
        return subprocess.run(
            [sys.executable, "-m", "graph_harness", "count", "--target", spec],
            capture_output=True, text=True, timeout=300, cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO), "CUDA_VISIBLE_DEVICES": ""},
        )  # fmt: skip

    r = count("tests.targets:stateful_cache_no_reset")
    assert r.returncode == 0, r.stderr  # counted all the same
    assert "profile, check and report (on a GPU) will refuse it" in r.stderr
    assert "does not repeat and has no step.reset" in r.stderr
    r = count("tests.targets:stateful_cache")
    assert r.returncode == 0 and "will refuse it" not in r.stderr, r.stderr
