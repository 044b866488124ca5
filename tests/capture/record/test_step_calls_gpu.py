"""A step compiled with mode="reduce-overhead" profiled and swept on the GPU, replayed by
calling it (capture/record/steps.py StepCalls): every node of every graph it replays
matched in every profiled call, counts against an independent walk of what the driver
held at each capture (tests/independent.py), and its calls held to its steady state."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import torch

from graph_harness.capture.count import capture_and_keep
from graph_harness.capture.profile.run import profile_steps
from graph_harness.capture.profile.settings import ProfileSettings
from graph_harness.capture.record.steps import RecordedStepError, StepCalls, chained
from graph_harness.capture.replay.guard import Replayer
from tests.independent import export_counts, independent_counts

pytestmark = pytest.mark.gpu
REPO = Path(__file__).resolve().parents[3]
SPEC = f"{REPO / 'examples' / 'llama_decode.py'}:make_tiny_reduce_overhead_step"
QUICK = ProfileSettings(trials=3, windows=2, replays=4, calibration_rounds=1)


class TwoPieces(torch.nn.Module):
    """Two compiled pieces with eager code between (a graph break): Inductor records a
    graph per piece, and the eager kernel runs between them at every call."""

    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(64, 64)
        self.b = torch.nn.Linear(64, 64)

    def forward(self, x):
        y = torch.relu(self.a(x))
        torch._dynamo.graph_break()
        y = y * 2 + 1  # eager, between the pieces
        return torch.sigmoid(self.b(y)).sum(dim=1)


def two_piece_step():
    torch.manual_seed(0)
    model = TwoPieces().cuda()
    fn = torch.compile(model, mode="reduce-overhead")
    x = torch.randn(8, 64, device="cuda")

    @torch.no_grad()
    def step():
        return fn(x)

    step.module = model
    return step


def test_a_step_of_two_graphs_profiled_call_by_call():
    torch._dynamo.reset()
    step = two_piece_step()
    with independent_counts() as seen:
        kept = capture_and_keep(step, warmup=2, own_graphs=True)
    rec = kept.recorded
    assert kept.captured is None and len(rec.graphs) == 2 and rec.replays == [1, 1]
    kinds = sum((k for k, _ in seen[-2:]), start=Counter())  # the two the call replays
    assert export_counts(kept.export)[0] == kinds
    export = chained(kept.export, rec)
    calls = StepCalls(step, rec)
    result = profile_steps({"two": (export, Replayer(calls, "two"))}, QUICK)
    p = result.profiles["two"]
    assert p.matching["verified"], p.matching
    # every launching node once in every sampled call, the second graph's too
    sampled = QUICK.windows * QUICK.replays
    per_node = p.samples.node.value_counts()
    assert len(per_node) == kept.export.total and set(per_node) == {sampled}
    # the eager multiply-add between the pieces, at least, ran outside the graphs
    assert min(p.matching["outside_graphs_per_call"]) >= 1
    # the call's time was measured on its own timing, the net figures on the chains
    assert result.round_trials.variant.eq("two").sum() == QUICK.trials
    assert p.excess_basis != "timing"
    assert calls.calls > sampled  # timed and profiled: steady() held them (above)


def test_a_call_that_records_again_is_not_measured():
    torch._dynamo.reset()
    step = two_piece_step()
    kept = capture_and_keep(step, warmup=2, own_graphs=True)
    calls = StepCalls(step, kept.recorded)
    with calls.steady("a steady run"):
        for _ in range(3):
            calls.replay()
    # calls that also run a model Inductor has not recorded: it records it, mid-measure
    other = torch.compile(TwoPieces().cuda(), mode="reduce-overhead")
    x = torch.randn(4, 64, device="cuda")
    mixed = StepCalls(lambda: (step(), other(x)), kept.recorded)
    with (
        pytest.raises(RecordedStepError, match="left its steady state in the profile: .* new"),
        torch.no_grad(),
        mixed.steady("the profile"),
    ):
        for _ in range(3):
            mixed.replay()


def _path(p) -> list[str]:
    return json.loads(p) if isinstance(p, str) else list(p)


def test_cli_profile_and_report_of_a_reduce_overhead_target(tmp_path):
    gh = [sys.executable, "-m", "graph_harness"]
    quick = ["--trials", "3", "--windows", "1", "--replays", "4", "--calibration-rounds", "1"]
    count = subprocess.run(
        [*gh, "count", "--target", SPEC, "--module-scopes", "--json"],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert count.returncode == 0, count.stderr
    assert "captures its own graphs" in count.stderr
    counted = json.loads(count.stdout)["exports"]["target"]
    assert counted["options"]["cudagraphs"] == "inductor" and counted["options"]["graphs"] >= 1
    prof = subprocess.run(
        [*gh, "profile", "--target", SPEC, "--module-scopes", "--json", *quick],
        capture_output=True, text=True, cwd=tmp_path, timeout=400,
    )  # fmt: skip
    assert prof.returncode == 0, prof.stderr
    doc = json.loads(prof.stdout)
    (matching,) = doc["matching"].values()
    assert matching["verified"], matching
    # every activity node of the counted graphs, sampled in every profiled call
    active = [n for n in counted["nodes"] if n["type"] in ("kernel", "memcpy", "memset")]
    assert len(doc["nodes"]) == len(active) and {r["samples"] for r in doc["nodes"]} == {4}
    # counted under module scopes; profiled as the program runs it, outside them, where
    # the step compiles again: the same graphs node for node, carrying the counted modules
    assert "node for node the counted ones" in prof.stderr, prof.stderr
    paths = {tuple(_path(r["scope_path"])[:2]) for r in doc["nodes"]}
    assert {("layers", "layers.0"), ("layers", "layers.1")} <= paths, paths
    checked = subprocess.run(
        [*gh, "profile", "--target", SPEC, "--check"],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert checked.returncode == 2 and "to check it, compile it" in checked.stderr
    out = tmp_path / "rep"
    rep = subprocess.run(
        [*gh, "report", "--target", SPEC, "--out", str(out)],
        capture_output=True, text=True, cwd=tmp_path, timeout=400,
    )  # fmt: skip
    assert rep.returncode == 0, rep.stderr
    (written,) = out.glob("nodes-*.json")
    assert json.loads(written.read_text())["total_nodes"] == counted["total_nodes"]
    # profiled call by call: the dispatch section, its table and its timeline
    assert (out / "dispatch.csv").exists() and (out / "dispatch_share.png").exists()
    assert "dispatch" in (out / "report.md").read_text().lower()


def test_sweep_of_a_reduce_overhead_step(tmp_path):
    from graph_harness.capture.sweep.run import sweep_step
    from graph_harness.capture.sweep.settings import SweepSettings

    sys.path.insert(0, str(REPO / "examples"))
    try:
        import llama_decode as ex
    finally:
        sys.path.pop(0)
    torch._dynamo.reset()
    marks: dict[int, int] = {}
    with independent_counts() as seen:

        def say(line: str) -> None:
            if line.endswith("building and capturing (own pool)"):
                marks[int(line.split()[1].rstrip(":"))] = len(seen)

        result = sweep_step(
            lambda b: ex.make_step(compiled="reduce-overhead", preset="tiny", batch=b),
            [1, 4],
            SweepSettings(trials=3, replays=4, leak_replays=8),
            name="tiny",
            warmup=2,
            progress=say,
        )
    assert result.options["cudagraphs"] == "inductor"
    ends = {4: marks[1], 1: len(seen)}  # largest first: batch 4's captures, then batch 1's
    for row in result.rows:
        export = result.exports[f"batch{row.batch}"]
        graphs = export.options["graphs"]
        walked = seen[marks[row.batch] : ends[row.batch]][-graphs:]
        assert export_counts(export)[0] == sum((k for k, _ in walked), start=Counter())
        assert row.nodes == export.total and row.replay_us > 0
        assert row.reserved is None and row.leak == 0, row  # one pool, and it holds
    shared = {r.batch: r for r in result.shared}
    assert [r.batch for r in result.shared] == [4, 1]  # largest first
    assert shared[4].total_reserved > 0
    # before the first size's graphs no pool of Inductor's was known: its addition unknown
    assert shared[4].adds is None and shared[1].adds is not None


def test_cli_sweep_of_a_reduce_overhead_target_by_module(tmp_path):
    gh = [sys.executable, "-m", "graph_harness"]
    quick = ["--trials", "3", "--replays", "4", "--leak-replays", "4"]
    r = subprocess.run(
        [*gh, "sweep", "--target", SPEC, "--sizes", "1", "2", "--module-scopes", "--json", *quick],
        capture_output=True, text=True, cwd=tmp_path, timeout=400,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["options"]["cudagraphs"] == "inductor"
    assert "replayed" not in doc["options"], doc["options"]  # the counted graphs, replayed
    sizes = {s["batch"]: s for s in doc["sizes"]}
    assert set(sizes) == {1, 2} and all(s["replay_us"] > 0 for s in sizes.values())
    assert all(s["reserved"] is None for s in sizes.values())  # no pool of its own
    assert [row["batch"] for row in doc["shared_pool"]] == [2, 1]
    for name, export in doc["exports"].items():
        paths = {tuple(n["scope_path"][:1]) for n in export["nodes"]}
        assert ("layers",) in paths, (name, paths)
