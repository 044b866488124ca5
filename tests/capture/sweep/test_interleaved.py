"""`sweep --check interleaved` on the CPU: the flags, the serving order (seeded, every
(size, call) once, each size's calls in order), a call judged on fingerprints made by
hand, the whole check run with stand-in graphs (a graph's replay played by the step run
eagerly into the static output its capture returned), and the sweep saying why it did not
run without a GPU. The real graphs: test_interleaved_gpu.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import torch

from graph_harness.capture.check.interleaved import check_interleaved, serving_order
from graph_harness.capture.check.interleaved_verdict import judge_call, suspects
from graph_harness.capture.state.changes import disagreement
from graph_harness.capture.state.fingerprint import Fingerprint, Seen, fingerprint
from tests.capture.sweep import interleaved_steps as S
from tests.capture.sweep.standins import sizes as _sizes

REPO = Path(__file__).resolve().parents[3]
CLEAN = "tests.capture.sweep.interleaved_steps:clean"


# --- the flags ---------------------------------------------------------------------------


def _parse(*argv):
    from graph_harness.reports.cli.program import build_parser

    return build_parser().parse_args(["sweep", "--target", CLEAN, "--sizes", "1", "2", *argv])


def test_check_takes_a_mode_and_alone_is_what_it_meant_before():
    assert _parse().check is None
    assert _parse("--check").check == "alone"
    assert _parse("--check", "alone").check == "alone"
    a = _parse("--check", "interleaved", "--check-steps", "6", "--seed", "7")
    assert (a.check, a.check_steps, a.seed) == ("interleaved", 6, 7)
    # a flag after a bare --check is a flag, not a mode
    assert _parse("--check", "--check-steps", "2").check == "alone"
    for bad in (["--check", "shuffled"], ["--check", "interleaved", "--seed", "-1"]):
        with pytest.raises(SystemExit) as e:
            _parse(*bad)
        assert e.value.code == 2


def test_count_profile_and_report_keep_a_plain_check_flag():
    from graph_harness.reports.cli.program import build_parser

    a = build_parser().parse_args(["count", "--target", CLEAN, "--check"])
    assert a.check is True


def _run(*argv):
    env = {**os.environ, "PYTHONPATH": str(REPO), "CUDA_VISIBLE_DEVICES": ""}
    env.pop("COLUMNS", None)
    return subprocess.run(
        [sys.executable, "-m", "graph_harness", *argv],
        capture_output=True, text=True, timeout=600, cwd=REPO, env=env,
    )  # fmt: skip


def test_a_seed_without_the_interleaved_check_is_a_usage_error():
    for extra in ([], ["--check"]):
        r = _run("sweep", "--target", CLEAN, "--sizes", "1", "2", "--seed", "3", *extra)
        assert r.returncode == 2, r.stderr
        assert "--seed deals the serving order of --check interleaved" in r.stderr


def test_on_the_cpu_the_interleaved_check_says_it_needs_a_gpu_and_does_not_fail(tmp_path):
    out = tmp_path / "s"
    r = _run("sweep", "--target", CLEAN, "--sizes", "1", "2", "4", "--check", "interleaved",
             "--check-steps", "3", "--seed", "5", "--out", str(out))  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "interleaved check not run" in r.stderr and "needs a CUDA GPU" in r.stderr
    doc = json.loads((out / "sweep.json").read_text())
    i = doc["interleaved"]
    assert i["status"] == "skipped" and not i["passed"] and "needs a CUDA GPU" in i["why_not"]
    assert (i["seed"], i["steps"], i["sizes"]) == (5, 3, [4, 2, 1]) and i["replays"] == 0
    assert i["by_size"] == {"4": "skipped", "2": "skipped", "1": "skipped"}
    # each size still checked alone (its eager part, on the CPU)
    assert sorted(doc["checks"]) == ["batch1", "batch2", "batch4"]
    assert {s["check"] for s in doc["sizes"]} == {"passed"}


def test_on_the_cpu_count_and_sweep_check_print_their_verdicts():
    # only --json and the exit code had it: the table and one line say it too
    r = _run("sweep", "--target", CLEAN, "--sizes", "1", "2", "--check")
    assert r.returncode == 0, r.stderr
    header = next(x for x in r.stdout.splitlines() if x.startswith("┃ batch"))
    assert "check" in header, r.stdout
    assert sum(x.endswith("│ passed │") for x in r.stdout.splitlines()) == 2, "a cell per size"
    assert "check passed for every batch size (1, 2) as far as the CPU goes; " in r.stdout
    r = _run("count", "--target", CLEAN, "--check")  # count prints check's line too
    assert r.returncode == 0, r.stderr
    assert f"check passed for {CLEAN} as far as the CPU goes; " in r.stdout


def test_sweep_step_on_the_cpu_records_the_skip_with_its_seed():
    from graph_harness.capture.sweep.run import sweep_step
    from graph_harness.capture.sweep.settings import SweepSettings

    result = sweep_step(S.clean, [2, 1], SweepSettings(seed=11), interleaved=True)
    i = result.interleaved
    assert i.status == "skipped" and i.exit_code == 0 and i.seed == 11
    assert "needs a CUDA GPU" in i.verdict()
    assert result.options["check_steps"] == 4  # each size alone first, at check's default
    assert json.loads(json.dumps(result.to_dict()))["interleaved"]["status"] == "skipped"
    plain = sweep_step(S.clean, [1])
    assert plain.interleaved is None and plain.to_dict()["interleaved"] is None


# --- the serving order -------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 7, 12345])
def test_the_order_deals_every_call_once_each_size_in_its_own_order(seed):
    sizes, steps = [1, 2, 4, 8, 16], 5
    order = serving_order(sizes, steps, seed)
    assert sorted(order) == sorted((b, i) for b in sizes for i in range(steps))
    for b in sizes:
        assert [i for s, i in order if s == b] == list(range(steps))
    # seeded: the same order again, whatever order the sizes are given in
    assert serving_order(list(reversed(sizes)), steps, seed) == order


def test_the_default_seed_interleaves_the_tests_sizes():
    # the GPU tests' planted defect shows only when a size runs between two calls of
    # another: seed 0 deals such an order for the sizes they use (so they are not vacuous)
    for sizes, steps in (([1, 2, 4], 4), ([1, 2, 4], 3), ([2, 4], 4)):
        order = serving_order(sizes, steps, 0)
        runs = sum(1 for k in range(1, len(order)) if order[k][0] != order[k - 1][0])
        assert runs >= len(sizes), order
        interrupted = [k for k, (b, i) in enumerate(order) if i > 0 and order[k - 1][0] != b]
        assert interrupted, order
    assert serving_order([1, 2, 4], 4, 0) != serving_order([1, 2, 4], 4, 1)


def test_suspects_are_the_sizes_run_since_the_previous_call_else_the_next_captured():
    order = [(4, 0), (2, 0), (1, 0), (2, 1), (4, 1), (1, 1)]
    captured = [4, 2, 1]
    assert suspects(order, 4, captured) == ([2, 1], "replayed since its previous call")
    assert suspects(order, 3, captured) == ([1], "replayed since its previous call")
    assert suspects(order, 0, captured)[0] == [2]  # nothing ran yet: captured after it
    assert suspects([(1, 0)], 0, captured) == ([2], "captured before it into the shared pool")
    assert suspects([(4, 0), (4, 1)], 1, [4]) == ([], "no other size")


# --- one call judged ---------------------------------------------------------------------


def _fp(**tensors) -> Fingerprint:
    fp = Fingerprint()
    for name, t in tensors.items():
        full = name.replace("_", " ")
        fp.seen[full] = Seen(full, (0, tuple(t.shape), t.stride(), t.dtype, t.device), t,
                             output=full.startswith("output"))  # fmt: skip
    return fp


def test_a_call_is_judged_as_check_judges_one():
    ref = _fp(output=torch.tensor([1.0, 2.0]), closure_pos=torch.tensor([3]))
    same = _fp(output=torch.tensor([1.0, 2.0]), closure_pos=torch.tensor([3]))
    j = judge_call(ref, {}, same)
    assert not j.bad and not j.unjudged and not j.within and j.compared == 2
    # exact where the two eager runs agree: one bit off fails, and names the tensor
    off = _fp(output=torch.tensor([1.0, 2.0000002]), closure_pos=torch.tensor([3]))
    j = judge_call(ref, {}, off)
    assert [c.name for c in j.bad] == ["output"] and "1 of 2 elements differ" in j.bad[0].detail
    # where they disagree: floating within 4x their spread passes (info), beyond fails
    b = _fp(output=torch.tensor([1.0, 2.1]), closure_pos=torch.tensor([3]))
    own = disagreement(ref, b)
    assert list(own) == ["output"]
    near = _fp(output=torch.tensor([1.0, 2.3]), closure_pos=torch.tensor([3]))
    far = _fp(output=torch.tensor([1.0, 3.0]), closure_pos=torch.tensor([3]))
    assert [c.name for c, _ in judge_call(ref, own, near).within] == ["output"]
    assert [c.name for c in judge_call(ref, own, far).bad] == ["output"]
    # an integer tensor the eager runs disagree on cannot be judged: not verified
    ref2 = _fp(closure_pos=torch.tensor([3]))
    own2 = disagreement(ref2, _fp(closure_pos=torch.tensor([4])))
    j = judge_call(ref2, own2, _fp(closure_pos=torch.tensor([5])))
    assert [c.name for c in j.unjudged] == ["closure pos"] and not j.bad


# --- the whole check, with stand-in graphs ----------------------------------------------


@pytest.fixture(autouse=True)
def _fresh_workspace():
    S.forget_workspace()
    yield
    S.forget_workspace()


def test_clean_sizes_pass_in_turns_and_are_left_at_their_start():
    sizes = _sizes(S.clean)
    r = check_interleaved(sizes, steps=4, seed=0, name="clean")
    assert r.status == "passed" and r.exit_code == 0, r.verdict()
    assert r.replays == 12 and r.compared == 12 and r.tensors > 0
    assert r.by_size == {4: "passed", 2: "passed", 1: "passed"}
    assert "12 replays in a serving order shuffled with seed 0" in r.verdict()
    for g in sizes:  # at the start: the reset's state (position 0, an empty cache)
        seen = fingerprint(g.step, with_output=False).seen
        pos = [s.value for n, s in seen.items() if n.endswith(" pos")]
        cache = [s.value for n, s in seen.items() if n.endswith(" cache")]
        assert pos and int(pos[0]) == 0 and not cache[0].any(), list(seen)
    doc = json.loads(json.dumps(r.to_dict()))
    assert doc["order"][0] == list(r.order[0]) and doc["by_size"]["4"] == "passed"


def test_a_workspace_handed_to_a_smaller_size_fails_naming_both_sizes_and_the_tensor():
    r = check_interleaved(_sizes(S.planted), steps=4, seed=0, name="planted")
    assert r.status == "failed" and r.exit_code == 1
    bad = [f for f in r.findings if f.severity == "fail"]
    f = bad[0]
    size, call = next((b, i) for b, i in r.order if r.by_size[b] == "failed" and i == f.step)
    assert f.message.startswith(f"batch {size}, call {call}")
    assert f.tensor in ("output", "closure cache") and f.tensor in f.message
    others = [b for b in (4, 2, 1) if b != size and f"after batch {b} (" in f.message]
    assert others, f.message  # the other size, named as the last to run before it
    assert "re-allocated" in f.message
    assert f"batch {size}" in r.verdict() and "FAILED" in r.verdict()
    # a size, once failed, is not compared again, though its replays still run
    assert r.replays == 12 and r.compared < 12


def test_alone_the_planted_sizes_pass():
    # the same defect, one size at a time: nothing to see (the interleaving matters)
    for b in (4, 2, 1):
        S.forget_workspace()
        r = check_interleaved(_sizes(S.planted, (b,)), steps=4, seed=0)
        assert r.status == "passed", r.verdict()


def test_a_graph_that_never_writes_its_output_fails_in_turns_too():
    r = check_interleaved(_sizes(S.clean, writes=False), steps=2, seed=0)
    assert r.status == "failed"
    assert {f.tensor for f in r.findings if f.severity == "fail"} == {"output"}


def test_the_order_is_recorded_and_a_seed_changes_it():
    a = check_interleaved(_sizes(S.clean), steps=3, seed=1)
    b = check_interleaved(_sizes(S.clean), steps=3, seed=2)
    assert a.order == serving_order([4, 2, 1], 3, 1) and a.order != b.order
    assert Counter(x for x, _ in a.order) == {4: 3, 2: 3, 1: 3}


def test_a_sweep_shows_its_interleaved_check_in_its_tables_and_files(tmp_path):
    from dataclasses import replace

    from graph_harness.reports.sweep_tables import interleaved_table, sizes_table
    from tests.capture.sweep.fake_sweep import _fake_sweep

    checked = check_interleaved(_sizes(S.clean, (8, 4, 2, 1)), steps=2, seed=3, name="f")
    fake = _fake_sweep()
    rows = [replace(r, interleaved=checked.by_size[r.batch]) for r in fake.rows]
    result = replace(fake, rows=rows, interleaved=checked)
    t = interleaved_table(result)
    assert t.row_count == 4 and "dealt with seed 3" in t.caption
    assert [c.header for c in t.columns] == ["batch", "calls", "status"]
    assert sizes_table(result).columns[-1].header == "interleaved"
    result.write(tmp_path)
    doc = json.loads((tmp_path / "sweep.json").read_text())
    assert doc["interleaved"]["seed"] == 3 and doc["interleaved"]["replays"] == 8
    assert [s["interleaved"] for s in doc["sizes"]] == ["passed"] * 4
    assert "interleaved" in (tmp_path / "sweep-sizes.csv").read_text().splitlines()[0]


@pytest.mark.parametrize("as_json", [False, True])
def test_the_commands_gate_shows_a_failed_interleaved_check_and_stops(as_json):
    # the gate a failing `sweep --check interleaved` goes through on the GPU: the findings
    # (or the check document) printed, then CheckFailed: exit 1, nothing written
    import io

    from rich.console import Console

    from graph_harness.capture.check.findings import CheckFailed
    from graph_harness.reports.cli.console import IO
    from graph_harness.reports.cli.targets import gate

    r = check_interleaved(_sizes(S.planted), steps=4, seed=0, name="planted")
    out, err = io.StringIO(), io.StringIO()
    console = IO(out=Console(file=out, width=100), err=Console(file=err, width=100), json=as_json)
    with pytest.raises(CheckFailed, match=r"interleaved check FAILED for planted") as e:
        gate(console, {"interleaved": r})
    assert str(e.value).endswith("nothing was written")
    if as_json:
        doc = json.loads(out.getvalue())
        assert doc["checks"]["interleaved"]["status"] == "failed"
    else:
        assert "FAIL" in out.getvalue() and "interleaved" in out.getvalue()
