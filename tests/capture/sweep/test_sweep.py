"""The capture-size ladder: padding arithmetic checked against a brute force over every
ladder, request files and their errors, and `graph-harness sweep` end to end (on the CPU:
dispatched operations per size; on a GPU: time, memory, the shared pool, the leak check)."""

import itertools
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from graph_harness.capture.settings import SettingsError
from graph_harness.capture.sweep.padding import (
    RequestsError,
    builtin_requests,
    choose,
    ladder_cost,
    read_requests,
    replay_time,
    vllm_ladder,
)
from graph_harness.capture.sweep.settings import check_sizes
from graph_harness.capture.sweep.truth import SharedRow
from tests.capture.sweep.fake_sweep import _fake_sweep

REPO = Path(__file__).resolve().parents[3]
TARGET = "tests.targets:batched_mlp"


# --- padding, by construction and by brute force --------------------------------------


def test_a_request_file_is_sizes_or_a_histogram():
    d = read_requests("# sizes seen\n3\n3\n8 2  # eight, twice\n\n", "r.txt")
    assert d == {3: 0.5, 8: 0.5}
    with pytest.raises(RequestsError, match=r"r.txt line 2: expected a batch size"):
        read_requests("4\nfour\n", "r.txt")
    with pytest.raises(RequestsError, match=r"line 1: a batch size is >= 1, got 0"):
        read_requests("0\n", "r.txt")
    with pytest.raises(RequestsError, match="no request"):
        read_requests("# nothing\n", "r.txt")


def test_numbers_past_what_a_request_file_holds_are_its_error():
    # issue 44, 7: 5,000 digits passed int()'s limit, 400 overflowed float(): exit 1
    for line in ("9" * 5000, "4 " + "9" * 400):
        with pytest.raises(RequestsError, match=r"r.txt line 2: a size or count of at most 18"):
            read_requests("1\n" + line + "\n", "r.txt")
    assert read_requests("4 000000000000000000000007\n", "r.txt") == {4: 1.0}  # zeros are none


def test_the_built_in_distributions_sum_to_one_over_their_support():
    u = builtin_requests("uniform:3-6", 64)
    assert u == {3: 0.25, 4: 0.25, 5: 0.25, 6: 0.25}
    p = builtin_requests("poisson:9", 64)
    assert math.isclose(sum(p.values()), 1.0) and max(p, key=p.get) in (8, 9)
    z = builtin_requests("zipf:1", 4)  # weights 1, 1/2, 1/3, 1/4 over 25/12
    assert z[1] == pytest.approx(12 / 25) and z[4] == pytest.approx(3 / 25)
    for bad in ("uniform:5-2", "poisson:x", "gauss:3", "zipf:-1"):
        with pytest.raises(RequestsError, match="the built-in ones: uniform:LO-HI"):
            builtin_requests(bad, 64)


def test_a_uniform_range_past_the_sizes_is_refused_before_it_is_built(monkeypatch):
    # issue 44, 2: uniform:1-6400000000 (a slip for 1-64) built 6.4e9 entries first
    import graph_harness.capture.sweep.padding as P

    def never(*args, **kwargs):
        raise AssertionError("the range was built")

    monkeypatch.setattr(P, "_normalized", never)
    with pytest.raises(RequestsError, match="batches reach 6400000000, above the largest"):
        builtin_requests("uniform:1-6400000000", 64)


def test_replay_time_is_measured_or_linear_between_and_says_which():
    t = {2: 100.0, 6: 140.0}
    assert replay_time(t, 2) == (100.0, False)
    assert replay_time(t, 3) == (110.0, True) and replay_time(t, 5) == (130.0, True)
    assert replay_time(t, 1) == (100.0, True)  # below the smallest: its time
    with pytest.raises(ValueError, match="above the largest size measured"):
        replay_time(t, 7)


def test_a_ladder_costs_what_its_padding_adds():
    times = {1: 10.0, 2: 12.0, 4: 16.0, 8: 24.0}
    requests = {1: 0.25, 3: 0.5, 8: 0.25}  # 3 pads to 4 on the ladder 1 4 8
    c = ladder_cost("x", [8, 1, 4], requests, times)
    assert c.sizes == (1, 4, 8)
    assert c.expected_us == pytest.approx(0.25 * 10 + 0.5 * 16 + 0.25 * 24)
    assert c.exact_us == pytest.approx(0.25 * 10 + 0.5 * 14 + 0.25 * 24)  # 3: halfway 2-4
    assert c.lost_us == pytest.approx(1.0) and c.interpolated
    # rows replayed 0.25*1 + 0.5*4 + 0.25*8 = 4.25, of which 0.5*1 padding
    assert c.padding_share == pytest.approx(0.5 / 4.25) and c.uncovered == 0
    c = ladder_cost("y", [1, 4], requests, times)
    assert c.uncovered == 0.25  # the 8s are above the ladder: an engine runs them eagerly


def test_vllms_ladder_is_one_two_four_then_eights():
    assert vllm_ladder(1) == (1,)
    assert vllm_ladder(3) == (1, 2, 4)
    assert vllm_ladder(9) == (1, 2, 4, 8, 16)
    assert vllm_ladder(256)[-2:] == (248, 256) and len(vllm_ladder(256)) == 3 + 32


def _brute(requests, times, most=None, memory=None, budget=None):
    """Every ladder of the measured sizes that covers the requests, costed directly."""
    sizes = sorted(times)
    best = None
    for k in range(1, len(sizes) + 1):
        for ladder in itertools.combinations(sizes, k):
            if ladder[-1] < max(requests) or (most is not None and k > most):
                continue
            if budget is not None and sum(memory[s] for s in ladder) > budget:
                continue
            cost = ladder_cost("b", ladder, requests, times).expected_us
            if best is None or cost < best[0] - 1e-9:
                best = (cost, ladder)
    return best


@pytest.mark.parametrize("seed", range(12))
def test_choose_finds_what_a_brute_force_over_every_ladder_finds(seed):
    rng = np.random.default_rng(seed)
    sizes = sorted(rng.choice(np.arange(1, 65), size=7, replace=False).tolist())
    # replay time grows with the batch, unevenly (a step at a new kernel tile, say)
    times = dict(zip(sizes, np.cumsum(rng.uniform(1, 30, size=7)).tolist()))
    requests = {int(b): float(w) for b, w in zip(rng.integers(1, sizes[-1] + 1, 9), rng.random(9))}
    total = sum(requests.values())
    requests = {b: w / total for b, w in requests.items()}
    memory = {s: int(rng.integers(1, 100)) for s in sizes}
    for most, budget in ((None, None), (1, None), (2, None), (3, None), (None, 150), (2, 200)):
        want = _brute(requests, times, most, memory, budget)
        if want is None:
            with pytest.raises(ValueError, match="no ladder covers"):
                choose(requests, times, most=most, memory=memory, budget=budget)
            continue
        got = choose(requests, times, most=most, memory=memory, budget=budget)
        cost = ladder_cost("c", got, requests, times).expected_us
        assert cost == pytest.approx(want[0]), (most, budget, got, want)
        assert most is None or len(got) <= most
        assert budget is None or sum(memory[s] for s in got) <= budget


def test_choose_refuses_requests_above_every_size():
    with pytest.raises(ValueError, match="requests reach batch 9, above the largest size"):
        choose({9: 1.0}, {1: 1.0, 8: 2.0})


def test_sizes_are_whole_numbers_each_once():
    assert check_sizes([8, 1, 4]) == (1, 4, 8)
    for bad, says in (([], "empty"), ([0], ">= 1"), ([2, 2], "given twice"), ("8", "a list")):
        # the one settings error (a usage error, exit 2; a ValueError still)
        with pytest.raises(SettingsError, match=says):
            check_sizes(bad)


# --- the command -----------------------------------------------------------------------


def run(*argv, cwd=REPO):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("COLUMNS", None)
    return subprocess.run(
        [sys.executable, "-m", "graph_harness", *argv],
        capture_output=True, text=True, timeout=600, cwd=cwd, env=env,
    )  # fmt: skip


def test_sweep_on_the_cpu_counts_each_size_and_says_what_needs_a_gpu(tmp_path):
    env_cpu = {"CUDA_VISIBLE_DEVICES": ""}
    r = subprocess.run(
        [sys.executable, "-m", "graph_harness", "sweep", "--target", TARGET, "--sizes", "4",
         "1", "--out", str(tmp_path / "s"), "--requests", "uniform:1-4", "--check"],
        capture_output=True, text=True, timeout=600, cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), **env_cpu},
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "replay time and graph memory need a CUDA GPU" in r.stderr
    assert "--requests on the CPU: each ladder's padded rows" in r.stderr  # issue 44, 11
    assert "time per step and time lost to padding need a GPU" in r.stderr
    doc = json.loads((tmp_path / "s" / "sweep.json").read_text())
    assert doc["schema"] == "graph-harness/sweep" and [s["batch"] for s in doc["sizes"]] == [1, 4]
    assert list(doc["exports"]) == ["batch1", "batch4"]
    assert doc["padding"][0]["ladders"][0]["name"] == "fewest padded rows"
    # another route: count --target calls the factory with its default, batch 1
    c = subprocess.run(
        [sys.executable, "-m", "graph_harness", "count", "--target", TARGET, "--json"],
        capture_output=True, text=True, timeout=600, cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), **env_cpu},
    )  # fmt: skip
    assert c.returncode == 0, c.stderr
    counted = json.loads(c.stdout)["exports"]["target"]["total_nodes"]
    assert [s["nodes"] for s in doc["sizes"]] == [counted, counted]
    assert doc["sizes"][0]["replay_us"] is None and doc["why_not"].startswith("replay time")
    # --check on the CPU: each size's eager part, as count --check runs it there
    assert sorted(doc["checks"]) == ["batch1", "batch4"]
    assert {s["check"] for s in doc["sizes"]} == {"passed"}
    # delta reads one size of it: the batch changes the work, not the operations
    d = subprocess.run(
        [sys.executable, "-m", "graph_harness", "delta", f"{tmp_path}/s/sweep.json#batch1",
         f"{tmp_path}/s/sweep.json#batch4", "--json"],
        capture_output=True, text=True, timeout=600, cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), **env_cpu},
    )  # fmt: skip
    assert d.returncode == 0, d.stderr
    assert json.loads(d.stdout)["total_delta"] == 0


def test_sweep_refuses_a_factory_without_batch_and_flags_without_requests():
    r = run("sweep", "--target", "tests.targets:small_mlp", "--sizes", "1", "2")
    assert r.returncode == 2, r.stderr
    assert "sweep calls small_mlp(batch=...), and small_mlp takes no 'batch'" in r.stderr
    r = run("sweep", "--target", TARGET, "--sizes", "1", "--choose", "2")
    assert r.returncode == 2 and "give --requests" in r.stderr.splitlines()[-1], r.stderr
    r = run("sweep", "--target", TARGET, "--sizes", "1", "1")
    assert r.returncode == 2 and "--sizes gives 1 twice" in r.stderr, r.stderr
    r = run("sweep", "--target", TARGET, "--sizes", "0")
    assert r.returncode == 2, r.stderr
    r = run("sweep", "--target", TARGET, "--sizes", "1", "--memory-budget", "2GiB")
    assert "--memory-budget chooses sizes for --requests, or with --predict-from" in r.stderr
    for bad in ("0", "512mb", "1.5GiB"):
        r = run("sweep", "--target", TARGET, "--sizes", "1", "--requests", "uniform:1-1",
                "--memory-budget", bad)  # fmt: skip
        assert r.returncode == 2 and "expected bytes" in r.stderr, (bad, r.stderr)


@pytest.mark.parametrize(
    "requests, says",
    [
        ("nope.txt", "no such file, and not a built-in distribution"),
        ("gauss:3", "the built-in ones: uniform:LO-HI"),
        ("uniform:1-9", "batches reach 9, above the largest size swept (4)"),
        ("bad.txt", "bad.txt line 2: expected a batch size"),
    ],
)
def test_a_bad_request_distribution_is_refused_before_anything_runs(tmp_path, requests, says):
    (tmp_path / "bad.txt").write_text("2\nfour\n")
    # the factory would say so if it ran: nothing is imported before the refusal
    (tmp_path / "step.py").write_text("raise SystemExit('imported')\ndef f(batch=1): ...\n")
    for argv in (
        ["sweep", "--target", "step.py:f", "--sizes", "1", "4", "--requests", requests],
        ["report", "--target", "step.py:f", "--sizes", "1", "4", "--requests", requests,
         "--out", "r"],
    ):  # fmt: skip
        r = run(*argv, cwd=tmp_path)
        assert r.returncode == 2 and says in r.stderr.splitlines()[-1], r.stderr
        assert "imported" not in r.stderr and not (tmp_path / "r").exists()


def test_padding_sections_tables_and_plots_from_a_sweep(tmp_path):
    from graph_harness.reports import plots
    from graph_harness.reports.sweep_tables import ladders_tables, sizes_table
    from graph_harness.reports.target_report import sweep_section

    r = _fake_sweep().with_padding({3: 0.5, 6: 0.5}, "mine", most=2)
    (p,) = r.padding
    # by construction: 3 pads to 4 (140 us), 6 to 8 (180 us): 160 per step at [4, 8]
    assert p.chosen == (4, 8)
    chosen, every, vllm = p.ladders
    assert chosen.expected_us == pytest.approx(160.0) and chosen.graphs == 2
    assert chosen.memory == (4 + 8) << 21
    assert chosen.interpolated  # the exact sizes 3 and 6 were not swept
    assert every.sizes == (1, 2, 4, 8) and vllm.sizes == (1, 2, 4, 8)
    # exact sizes 3 and 6 are interpolated: 130 and 160 us
    assert chosen.exact_us == pytest.approx(145.0) and chosen.lost_us == pytest.approx(15.0)
    # a budget of 9 x 2 MiB: [8] alone (16 MiB) fits, [4, 8] (24 MiB) does not
    r2 = _fake_sweep().with_padding({3: 0.5, 6: 0.5}, "mine", budget=9 << 21)
    assert r2.padding[0].chosen == (8,) and "within" in r2.padding[0].how
    # vLLM's ladder past the largest size swept is cut there, and says so
    r3 = _fake_sweep((1, 2, 3)).with_padding({3: 1.0}, "three")  # vLLM would capture 4
    assert r3.padding[0].ladders[2].name == "vLLM default (cut at 3)"
    assert r3.padding[0].ladders[2].sizes == (1, 2, 3)
    doc = r.to_dict()
    assert doc["sizes"][0]["by_type"] == {"kernel": 1} and doc["padding"][0]["chosen"] == [4, 8]
    json.dumps(doc, allow_nan=False)
    lines = sweep_section(tmp_path, r, None)
    assert any("capture [4, 8]" in x for x in lines)
    for name in ("sweep.json", "sweep.png", "padding.png", "sweep-ladders.csv"):
        assert (tmp_path / name).stat().st_size > 0, name
    plots.sweep(r, tmp_path / "again.png")
    assert sizes_table(r).row_count == 4 and ladders_tables(r)[0].row_count == 3


def test_a_sweep_of_inductors_graphs_has_no_own_pools_to_budget_and_still_renders(tmp_path):
    from dataclasses import replace

    from graph_harness.reports import plots
    from graph_harness.reports.sweep_tables import shared_pool_table, sizes_table

    fake = _fake_sweep()
    rows = [replace(r, reserved=None, allocated=None) for r in fake.rows]
    shared = [  # largest first; the first size's addition unknown
        SharedRow(batch=8, total_reserved=16 << 20, adds=None, total_allocated=0),
        SharedRow(batch=4, total_reserved=24 << 20, adds=8 << 20, total_allocated=0),
    ]
    r = replace(fake, rows=rows, shared=shared, options={"cudagraphs": "inductor"})
    with pytest.raises(ValueError, match="reduce-overhead"):
        r.with_padding({3: 0.5, 6: 0.5}, "mine", budget=9 << 21)
    padded = r.with_padding({3: 0.5, 6: 0.5}, "mine", most=2)  # time alone: as before
    assert padded.padding[0].chosen == (4, 8) and padded.padding[0].ladders[0].memory is None
    assert "Inductor's one pool" in shared_pool_table(r).title
    assert "none of its own" in sizes_table(r).caption
    json.dumps(r.to_dict(), allow_nan=False)
    plots.sweep(r, tmp_path / "inductor.png")
    assert (tmp_path / "inductor.png").stat().st_size > 0


def test_padding_on_the_cpu_counts_rows_and_leaves_the_times_to_a_gpu(tmp_path):
    # issue 44, 11: with no replay times, with_padding raised and --requests was dropped,
    # though padded rows, the ladder with the fewest and vLLM's beside it need no timing
    from dataclasses import replace

    from graph_harness.reports.sweep_tables import ladders_tables
    from graph_harness.reports.target_report import sweep_section

    fake = _fake_sweep()
    rows = [replace(r, replay_us=None, replay_lo=None, replay_hi=None, trials=(),
                    reserved=None, allocated=None) for r in fake.rows]  # fmt: skip
    cpu = replace(fake, rows=rows, shared=None, why_not="replay time needs a CUDA GPU")
    (p,) = cpu.with_padding({3: 0.5, 6: 0.5}, "mine", most=2).padding
    # 3 pads to 4 and 6 to 8: 1.5 of 6 rows a step; [8] alone would pad 3.5 of 8
    assert p.chosen == (4, 8) and "by padded rows" in p.how
    fewest, every, vllm = p.ladders
    assert fewest.padding_share == pytest.approx(0.25) and fewest.expected_us is None
    assert every.sizes == (1, 2, 4, 8) and vllm.sizes == (1, 2, 4, 8)
    assert (fewest.lost_us, fewest.memory, fewest.interpolated) == (None, None, False)
    three = replace(cpu, rows=[*rows[:2], replace(rows[2], batch=3)])  # sizes 1 2 3
    (padded,) = three.with_padding({3: 1.0}, "three").padding  # vLLM's whole: 4, unswept
    assert padded.ladders[2].name == "vLLM default" and padded.ladders[2].sizes == (1, 2, 4)
    assert padded.ladders[2].padding_share == pytest.approx(0.25)
    with pytest.raises(ValueError, match="own pool"):
        cpu.with_padding({3: 1.0}, "mine", budget=1 << 30)
    r = cpu.with_padding({3: 0.5, 6: 0.5}, "mine", most=2)
    json.dumps(r.to_dict(), allow_nan=False)
    (t,) = ladders_tables(r)
    assert t.row_count == 3 and "padded rows" in t.title
    lines = sweep_section(tmp_path, r, None)
    assert any("capture [4, 8]" in x for x in lines) and not (tmp_path / "padding.png").exists()


@pytest.mark.gpu
def test_sweep_on_a_gpu_times_each_size_and_reads_its_pools(tmp_path):
    spec = f"{REPO / 'examples' / 'llama_decode.py'}:make_tiny_step"
    out = tmp_path / "s"
    r = run("sweep", "--target", spec, "--sizes", "1", "2", "4", "--module-scopes",
            "--check", "--check-steps", "2", "--requests", "uniform:1-4", "--choose", "2",
            "--trials", "6", "--out", str(out))  # fmt: skip
    assert r.returncode == 0, r.stderr
    doc = json.loads((out / "sweep.json").read_text())
    sizes = {s["batch"]: s for s in doc["sizes"]}
    for b, s in sizes.items():
        assert s["replay_lo"] <= s["replay_us"] <= s["replay_hi"], s
        assert s["reserved"] > 0 and 0 < s["allocated"] <= s["reserved"], s
        assert s["leak"] == 0 and s["leak_device"] == 0 and s["check"] == "passed", s
        assert s["rows_per_s"] == pytest.approx(b / (s["replay_us"] * 1e-6))
        assert s["host_launch_us"] > 0, s  # each size's launch, timed on the CPU
        # made executable before its first replay: timed, its memory read to the page
        assert s["instantiate_s"] > 0 and s["upload_s"] > 0 and s["exec_bytes"] >= 0, s
    # another route for the nodes: count --target of the same factory (batch 1)
    c = run("count", "--target", spec, "--json")
    assert c.returncode == 0, c.stderr
    counted = json.loads(c.stdout)
    assert sizes[1]["nodes"] == counted["exports"]["target"]["total_nodes"]
    assert counted["host_launch"]["target"]["us"] > 0, counted["host_launch"]  # it has a reset
    # memory by scope: each size's segments, by the scopes open as each was taken, sum to
    # its own pool (empty before its capture)
    by_scope = doc["memory_by_scope"]
    for b, s in sizes.items():
        assert sum(m["reserved"] for m in by_scope if m["batch"] == b) == s["reserved"], b
        # an eager step allocates inside its modules: some of it is tagged with them
        inside = [m for m in by_scope if m["batch"] == b and m["scope_path"] != "[]"]
        assert any(m["requested"] > 0 for m in inside), (b, by_scope)
    shared = doc["shared_pool"]
    assert [x["batch"] for x in shared] == [4, 2, 1]  # largest first
    # the truth, made by another route from the shared rows, against the estimators
    true = shared[-1]["total_reserved"] + sum(x["exec_bytes"] for x in shared)
    est = {e["estimator"]: e for e in doc["memory_estimates"]}
    assert {e["true_bytes"] for e in est.values()} == {true}, est
    alone = sum(s["reserved"] + s["exec_bytes"] for s in sizes.values())
    assert est["sum of per-size deltas"]["bytes"] == alone
    # freeing the shared pool's graphs gives the pool and the executables back, to a
    # page a graph (the driver maps 2 MiB pages)
    assert doc["returned"] >= true - len(shared) * (2 << 20), (doc["returned"], true)
    phases = {p["phase"]: p["seconds"] for p in doc["startup"]}
    assert phases["instantiate"] == pytest.approx(sum(s["instantiate_s"] for s in sizes.values()))
    # one pool on one stream holds at least the largest size's own pool, at most all of them
    own = [s["reserved"] for s in sizes.values()]
    assert max(own) <= shared[-1]["total_reserved"] <= sum(own), (own, shared)
    (p,) = doc["padding"]
    assert p["requests"] == "uniform:1-4" and len(p["chosen"]) <= 2 and p["chosen"][-1] == 4
    for name in ("sweep.png", "padding.png", "sweep-sizes.csv", "sweep-shared-pool.csv"):
        assert (out / name).exists(), name


def _listing(root: Path) -> dict:
    return {
        str(p.relative_to(root)): (p.is_symlink(), p.read_bytes() if p.is_file() else None)
        for p in sorted(root.rglob("*"))
    }


def test_sweep_out_never_touches_what_graph_harness_did_not_write(tmp_path):
    # a user's folder with files, a link to it, the current folder, its parent: each
    # refused as --out, --force or not, and nothing under tmp_path changes
    work = tmp_path / "work"
    mine = work / "mine"
    mine.mkdir(parents=True)
    (mine / "notes.txt").write_text("keep me")
    (work / "link").symlink_to(mine, target_is_directory=True)
    (work / "file.txt").write_text("keep me too")
    before = _listing(tmp_path)
    base = ["sweep", "--target", TARGET, "--sizes", "1"]
    for out in ("mine", "link", ".", "..", "file.txt"):
        for force in ([], ["--force"]):
            r = run(*base, "--out", out, *force, cwd=work)
            assert r.returncode == 2, (out, force, r.stderr)
            assert _listing(tmp_path) == before, (out, force)
    # a fresh folder is written whole and lists what it holds as graph-harness's own;
    # --force replaces it, and the user's files beside it stay as they were
    for force in ([], ["--force"]):
        r = run(*base, "--out", "s", *force, cwd=work)
        assert r.returncode == 0, r.stderr
    assert (work / "s" / "sweep.json").exists() and (work / "s" / "sweep-sizes.csv").exists()
    after = _listing(tmp_path)
    assert {k: v for k, v in after.items() if not k.startswith("work/s")} == before
