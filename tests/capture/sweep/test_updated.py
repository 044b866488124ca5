"""`sweep --check updated` on the CPU: the walk (every transition, seeded), the launch
comparison (attributes and functions), the whole check with stand-in graphs and a
stand-in executable (tests/capture/sweep/standins.py: right, refusing, or keeping
something of its origin), the words of its findings, the result's tables and document,
and the command line's flags and its word that the check needs a GPU. The real graphs:
test_updated_gpu.py."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from graph_harness.capture.check.updated import check_updated_graphs, transition_order, visits
from graph_harness.capture.check.updated_launches import compare_launches
from graph_harness.capture.check.updated_verdict import (
    Transition,
    UpdatedResult,
    costs_of,
    random_unjudged,
)
from graph_harness.capture.graph.attributes import Attribute, GraphLaunches, KernelLaunch
from graph_harness.capture.state.fingerprint import fingerprint
from tests.capture.sweep import interleaved_steps as S
from tests.capture.sweep.standins import launches_of, sizes, standin_driver

REPO = Path(__file__).resolve().parents[3]
CLEAN = "tests.capture.sweep.interleaved_steps:clean"


@pytest.fixture(autouse=True)
def _fresh_workspace():
    S.forget_workspace()
    yield
    S.forget_workspace()


# --- the walk ----------------------------------------------------------------------------


@pytest.mark.parametrize("n", [2, 3, 4, 5])
@pytest.mark.parametrize("seed", [0, 1, 99])
def test_the_walk_makes_every_transition_once(n, seed):
    batches = [2**i for i in range(n)]
    walk = transition_order(batches, seed)
    steps = Counter(itertools.pairwise(walk))
    assert len(walk) == n * (n - 1) + 1
    assert set(steps) == {(a, b) for a in batches for b in batches if a != b}
    assert set(steps.values()) == {1}  # each once: nothing is visited twice in a row
    assert transition_order(list(reversed(batches)), seed) == walk  # the order given: no matter


def test_a_seed_deals_another_walk_and_visits_count_calls_from_the_reset_again():
    assert transition_order([1, 2, 4, 8], 0) != transition_order([1, 2, 4, 8], 1)
    assert visits([4, 2, 4, 1, 4, 2], 2) == [(4, 0), (2, 0), (4, 1), (1, 0), (4, 0), (2, 1)]


# --- what an update may not carry --------------------------------------------------------


def _launch(function, kernel="k", **attrs):
    return GraphLaunches(("memset", "kernel"), [KernelLaunch(1, kernel, function, attrs)], (7, 8))


def _a(raw, shown=None):
    return Attribute(raw=raw, shown=shown or raw.hex())


def test_an_attribute_that_differs_is_a_doubt_and_one_the_driver_hides_a_warning():
    same = _launch(1, Priority=_a(b"\0"))
    assert compare_launches(same, _launch(1, Priority=_a(b"\0"))) == []
    # both read, and other: the executable may keep either (unverified)
    (f,) = compare_launches(same, _launch(1, Priority=_a(b"\1", "1")))
    assert (f.kind, f.severity, f.index, f.attribute) == ("attribute-differs", "unverified", 1,
                                                          "Priority")  # fmt: skip
    assert "1" in f.detail
    # unreadable where the function did not change: the same function, not flagged
    hidden = {"PreferredClusterDimension": Attribute(unreadable="cudaErrorInvalidValue")}
    assert compare_launches(_launch(1, **hidden), _launch(1, **hidden)) == []
    # ... where it changed: the origin's value may be kept unseen (sglang #37657): a warning
    (f,) = compare_launches(_launch(1, "a", **hidden), _launch(2, "b", **hidden))
    assert (f.kind, f.severity, f.detail) == ("attribute-unreadable", "warn",
                                              "cudaErrorInvalidValue")  # fmt: skip


def test_two_functions_of_one_name_are_told_apart_by_their_handles():
    (f,) = compare_launches(_launch(0x10, "scale_rows"), _launch(0x20, "scale_rows"))
    assert (f.kind, f.severity, f.kernel) == ("one-name", "warn", "scale_rows")
    assert "0x10" in f.detail and "0x20" in f.detail
    assert compare_launches(_launch(0x10, "gemm_a"), _launch(0x20, "gemm_b")) == []


def test_graphs_whose_nodes_cannot_be_paired_are_a_doubt():
    other = GraphLaunches(("kernel", "kernel"), [], (1, 2))
    (f,) = compare_launches(_launch(1), other)
    assert (f.kind, f.severity) == ("unpaired", "unverified") and "a memset node" in f.detail
    (f,) = compare_launches(_launch(1), GraphLaunches(("kernel",), [], (1,)))
    assert f.detail == "2 nodes against 1"


# --- the whole check, with stand-ins -----------------------------------------------------


def _check(factory=S.clean, batches=(4, 2, 1), steps=3, seed=0, launches=None, **driver):
    return check_updated_graphs(sizes(factory, batches, launches), steps=steps, seed=seed,
                                name="f", driver=standin_driver(**driver))  # fmt: skip


def test_a_right_step_passes_and_every_size_is_left_at_its_start():
    graphs = sizes(S.clean)
    r = check_updated_graphs(graphs, steps=3, seed=0, name="clean", driver=standin_driver())
    assert r.status == "passed" and r.exit_code == 0, r.verdict()
    assert r.updates == 6 and len(r.transitions) == 7 and r.transitions[0].result == "instantiated"
    assert r.compared == 7 and r.tensors > 0
    assert r.by_size == {4: "passed", 2: "passed", 1: "passed"}
    assert r.order == visits(transition_order([4, 2, 1], 0), 3)
    assert "6 updates in a walk through every transition (seed 0)" in r.verdict()
    assert not [f for f in r.findings if f.severity != "info"], r.findings
    for g in graphs:  # the reset's state: position 0, an empty cache
        seen = fingerprint(g.step, with_output=False).seen
        pos = [s.value for n, s in seen.items() if n.endswith(" pos")]
        assert pos and int(pos[0]) == 0
    doc = json.loads(json.dumps(r.to_dict(), allow_nan=False))
    assert doc["status"] == "passed" and doc["updates"] == 6 and len(doc["costs"]) == 3
    assert doc["transitions"][1]["result"] == "success" and doc["attributes"] == ["Priority"]


def test_an_update_that_keeps_something_of_its_origin_fails_naming_the_transition():
    r = _check(keeps=True)
    assert r.status == "failed" and r.exit_code == 1
    f = next(f for f in r.findings if f.severity == "fail")
    t = r.transitions[1]  # the first update: its launch is the first that differs
    assert f.kind == "update" and f.tensor == "output", f.message
    assert f.message.startswith(f"batch {t.after}, call ") and "(visit 2 of 7, " in f.message
    assert f"updated from batch {t.before} to batch {t.after}" in f.message
    assert f"from batch {t.after}'s own executable launched from the same state" in f.message
    assert "32 of 32 elements differ" in f.message and "largest difference 1" in f.message
    assert r.by_size[t.after] == "failed" and "FAILED" in r.verdict()
    # the twins start from one state no longer: one update finding, not one per visit
    assert sum(x.kind == "update" for x in r.findings) == 1


def test_a_workspace_shared_by_the_sizes_fails_and_the_update_is_not_blamed():
    # sizes that write each other's rows (interleaved_steps.planted): the size's own
    # executable, launched in the same walk, computes the same: the eager call tells
    r = _check(S.planted, steps=4)
    assert r.status == "failed", r.verdict()
    fails = [f for f in r.findings if f.severity == "fail"]
    assert fails and {f.kind for f in fails} == {"serving"}, [f.message for f in fails]
    assert "not the update's doing" in fails[0].message
    assert "eager call" in fails[0].message and "re-allocated" in fails[0].message


def test_a_refused_update_is_said_and_the_size_instantiated_anew():
    r = _check(refuse={(4, 2), (1, 4)})
    assert r.status == "passed", r.verdict()
    told = [f for f in r.findings if f.kind == "refused"]
    assert len(told) == 2 and all(f.severity == "info" for f in told)
    said = " ".join(f.message for f in told)
    assert "batch 4 to batch 2 was refused by the driver (ErrorTopologyChanged at node 0, a " \
        "kernel: k)" in said  # fmt: skip
    assert "an engine instantiates batch 2's graph there instead" in said
    assert r.updates == 4 and "(2 refused, instantiated anew)" in r.verdict()


def test_every_update_refused_checks_nothing_updated_and_says_so():
    every = {(a, b) for a in (1, 2) for b in (1, 2) if a != b}
    r = _check(batches=(2, 1), refuse=every)
    assert r.status == "unverified" and r.exit_code == 3
    assert any(f.kind == "none-updated" for f in r.findings)
    assert "could NOT verify" in r.verdict() and "refused every update (2)" in r.verdict()


def test_one_name_from_two_modules_is_told_in_a_whole_check_and_does_not_fail_it():
    # batch 4's kernel is another function of the same name (another module's build)
    def launches(b):
        return launches_of(b, function=0x200 if b == 4 else 0x100, kernel="scale_rows")

    r = _check(launches=launches)
    one = [f for f in r.findings if f.kind == "one-name"]
    assert one and one[0].severity == "warn" and one[0].kernel == "scale_rows"
    assert "node 0: kernel scale_rows is another function" in one[0].message
    assert r.status == "passed" and r.function_changes > 0  # a warning, never a failure


def test_an_attribute_that_differs_between_sizes_is_not_verified():
    def launches(b):
        return launches_of(b, Priority=Attribute(raw=bytes([b]), shown=str(b)))

    r = _check(launches=launches)
    assert r.status == "unverified", r.verdict()
    f = next(f for f in r.findings if f.kind == "attribute-differs")
    assert "launch attribute Priority differs" in f.message and "#37657" in f.message
    assert "instantiated from batch" in f.message


def test_a_step_that_draws_random_numbers_is_compared_with_its_own_executable_only():
    alone = random_unjudged(4, ["the CUDA default generator (cuda:0: Philox offset +4)"], True)
    assert alone.severity == "info" and "its own check compared" in alone.message
    assert random_unjudged(4, ["x"], False).severity == "unverified"


def test_a_launch_that_never_finishes_is_a_hang_and_gives_the_context_up(monkeypatch):
    # #37657's hang: the shared executable's first launch is never done (its event never
    # completes); the deadline (at least 1 s) passes and the walk stops, naming the visit
    from graph_harness.capture.check import updated
    from graph_harness.capture.replay.guard import ReplayFailed

    class Never:
        def query(self):
            return False

    monkeypatch.setattr(updated, "event", Never)
    with pytest.raises(ReplayFailed, match=r"the shared executable's walk, visit 1 of 7 "
                       r"\(batch \d, call 0\), instantiated from batch \d's graph, did not "
                       r"finish within [0-9.]+ s") as e:  # fmt: skip
        _check()
    assert e.value.context_lost and "#37657" in str(e.value)


def test_a_size_of_its_own_is_refused():
    with pytest.raises(ValueError, match="at least two sizes"):
        _check(batches=(4,))


def test_costs_are_the_median_update_into_each_size_beside_its_recapture():
    ts = [Transition(0, None, 4, "instantiated"), Transition(1, 4, 2, "success", None, 30.0),
          Transition(2, 2, 4, "success", None, 10.0), Transition(3, 4, 2, "success", None, 50.0),
          Transition(4, 2, 1, "ErrorTopologyChanged", None, 5.0)]  # fmt: skip
    costs = {c.batch: c for c in costs_of(ts, {4: 10, 2: 8, 1: 6}, {2: (100.0, 20.0)})}
    assert (costs[2].updates, costs[2].update_us, costs[2].per_node_us) == (2, 40.0, 5.0)
    assert costs[2].recapture_us == 120.0 and costs[4].recapture_us is None
    assert costs[1].update_us is None and costs[1].updates == 0  # refused: not an update


# --- the sweep's tables and document -----------------------------------------------------


def test_a_sweep_shows_its_updated_check_in_its_tables_and_files(tmp_path):
    from dataclasses import replace

    from graph_harness.reports.sweep_tables import sizes_table, updated_table
    from tests.capture.sweep.fake_sweep import _fake_sweep

    checked = _check(batches=(8, 4, 2, 1), steps=2, seed=3)
    fake = _fake_sweep()
    rows = [replace(r, updated=checked.by_size[r.batch]) for r in fake.rows]
    result = replace(fake, rows=rows, updated=checked)
    t = updated_table(result)
    assert t.row_count == 4 and "12 updates (0 refused)" in t.caption and "seed 3" in t.caption
    assert [c.header for c in t.columns][:4] == ["batch", "nodes", "updates", "update us"]
    assert sizes_table(result).columns[-1].header == "updated"
    result.write(tmp_path)
    doc = json.loads((tmp_path / "sweep.json").read_text())
    assert doc["updated"]["seed"] == 3 and doc["updated"]["updates"] == 12
    assert [s["updated"] for s in doc["sizes"]] == ["passed"] * 4
    assert doc["interleaved"] is None


def test_the_result_when_it_cannot_run_says_why_and_does_not_fail():
    r = UpdatedResult.skipped("f", [4, 2], 4, 0, 3, "it needs a CUDA GPU")
    assert r.status == "skipped" and r.exit_code == 0 and not r.passed
    assert r.verdict() == "updated-executable check not run for f: it needs a CUDA GPU"
    assert r.to_dict()["by_size"] == {"4": "skipped", "2": "skipped"}


def test_check_updated_on_the_cpu_says_it_needs_a_gpu():
    from graph_harness.capture import check_updated

    r = check_updated(S.clean, [1, 2], seed=5)
    assert r.status == "skipped" and "needs a CUDA GPU" in r.why_not and r.seed == 5
    with pytest.raises(ValueError, match="at least two sizes"):
        check_updated(S.clean, [2])


def test_sweep_step_on_the_cpu_records_the_skip_with_its_seed():
    from typing import get_args

    from graph_harness.capture.sweep.run import sweep_step
    from graph_harness.capture.sweep.settings import (
        CHECK_MODES,
        SHARED_MODES,
        SharedMode,
        SweepSettings,
    )
    from graph_harness.capture.sweep.shared import SHARED_CHECKS

    assert tuple(SHARED_CHECKS) == SHARED_MODES  # the parser's modes, each run
    assert SHARED_MODES == get_args(SharedMode) == tuple(m for m in CHECK_MODES if m != "alone")
    result = sweep_step(S.clean, [2, 1], SweepSettings(seed=11), updated=True)
    u = result.updated
    assert u.status == "skipped" and u.seed == 11 and "needs a CUDA GPU" in u.verdict()
    assert result.interleaved is None and result.options["check_steps"] == 4
    assert json.loads(json.dumps(result.to_dict()))["updated"]["status"] == "skipped"


# --- the command line --------------------------------------------------------------------


def _parse(*argv):
    from graph_harness.reports.cli.program import build_parser

    return build_parser().parse_args(["sweep", "--target", CLEAN, "--sizes", "1", "2", *argv])


def test_check_takes_the_updated_mode_with_a_seed():
    a = _parse("--check", "updated", "--seed", "4")
    assert (a.check, a.seed) == ("updated", 4)
    assert _parse("--check").check == "alone"  # as before


def _run(*argv):
    env = {**os.environ, "PYTHONPATH": str(REPO), "CUDA_VISIBLE_DEVICES": ""}
    env.pop("COLUMNS", None)
    return subprocess.run(
        [sys.executable, "-m", "graph_harness", *argv],
        capture_output=True, text=True, timeout=600, cwd=REPO, env=env,
    )  # fmt: skip


def test_the_flags_are_checked_before_the_target_is_imported():
    r = _run("sweep", "--target", "no_such_module:f", "--sizes", "4", "--check", "updated")
    assert r.returncode == 2, r.stderr
    assert "--check updated switches one executable between sizes: give --sizes at least two" \
        in r.stderr  # fmt: skip
    r = _run("sweep", "--target", CLEAN, "--sizes", "1", "2", "--seed", "3", "--check")
    assert r.returncode == 2 and "give --check interleaved or --check updated" in r.stderr


def test_on_the_cpu_the_updated_check_says_it_needs_a_gpu_and_does_not_fail(tmp_path):
    out = tmp_path / "s"
    r = _run("sweep", "--target", CLEAN, "--sizes", "1", "2", "--check", "updated",
             "--check-steps", "2", "--seed", "5", "--out", str(out))  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "updated-executable check not run" in r.stderr and "needs a CUDA GPU" in r.stderr
    doc = json.loads((out / "sweep.json").read_text())
    u = doc["updated"]
    assert u["status"] == "skipped" and (u["seed"], u["steps"], u["sizes"]) == (5, 2, [2, 1])
    assert sorted(doc["checks"]) == ["batch1", "batch2"]  # each size still checked alone


def test_the_gpu_tests_steps_keep_the_protocol_on_the_cpu():
    # what test_updated_gpu.py runs, with stand-ins: the right step passes; the
    # re-allocated workspace passes too, for a stand-in reads no captured address (the
    # eager step runs): only real graphs keep the freed plan's address
    from tests.capture.sweep import updated_steps as U

    assert _check(U.right, steps=3).status == "passed"
    U.forget_plan()
    assert _check(U.reallocated, steps=2).status == "passed"
    U.forget_plan()
