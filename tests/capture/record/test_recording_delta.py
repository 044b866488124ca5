"""Two recordings compared (capture/record/delta.py, `delta REC_A REC_B`), on the CPU: an
engine that runs each step as three graphs against one that runs it as one, keyed
differently. The expected figures are the engines' construction (kernels per piece,
pieces per step), counted here by hand, not read back from the delta."""

from __future__ import annotations

import json
import time

import pytest

from graph_harness.capture.export.nodes import NodeExport
from graph_harness.capture.record.delta import StepKeyError, recording_delta
from graph_harness.capture.record.graphs import GraphRecord
from graph_harness.capture.record.recording import Recording
from graph_harness.capture.record.sites import CaptureSite
from graph_harness.reports.cli.program import main
from tests.capture.delta_inputs import ADD, GEMM, NVJET, TRITON, export


def recording(graphs: list[tuple[str, NodeExport, int]]) -> Recording:
    site = CaptureSite(user="engine.py:1 in capture", library=None, stack=("engine.py:1",))
    return Recording(
        graphs=[
            GraphRecord(
                index=i,
                pid=1,
                rank=None,
                key=key,
                key_source="engine",
                site=site,
                export=e,
                replays=replays,
            )
            for i, (key, e, replays) in enumerate(graphs)
        ]
    )


# engine X: each size as 3 pieces; piece 1 two GEMMs and an add, piece 2 (attention's
# neighbours) a Triton kernel, piece 3 a GEMM and a copy. Size 8 only in X.
def engine_x() -> Recording:
    graphs = []
    for bs in (1, 4, 8):
        graphs += [
            (f"bs={bs} piece=1/3", export([GEMM, GEMM, ADD], "x"), 10),
            (f"bs={bs} piece=2/3", export([TRITON], "x"), 10),
            (f"bs={bs} piece=3/3", export([GEMM], "x", memcpy=1), 10),
        ]
    return recording(graphs)


# engine Y: one graph per size; nvjet GEMMs (3) and two Triton kernels, no copy. Size 2
# only in Y.
def engine_y() -> Recording:
    return recording(
        [(f"batch {bs}", export([NVJET] * 3 + [TRITON] * 2, "y"), 5) for bs in (1, 2, 4)]
    )


def test_steps_of_three_graphs_against_steps_of_one():
    d = recording_delta(
        engine_x(), engine_y(), labels=("X", "Y"), step_keys=(r"bs=(\d+)", r"batch (\d+)")
    )
    steps = d.steps.set_index("step")
    # X's step: 3 + 1 + 2 = 6 nodes in 3 graphs; Y's: 5 nodes in 1 graph
    row = steps.loc["1"]
    assert [row.a_graphs, row.a_nodes, row.b_graphs, row.b_nodes, row.delta] == [3, 6, 1, 5, -1]
    assert row.family == "GEMM: nvjet +3, GEMM: cuBLAS -3"  # ties: in the rules' order
    assert steps.loc["4", "delta"] == -1
    assert steps.loc["8", "b_nodes"] is pd_na() and steps.loc["8", "a_nodes"] == 6
    assert steps.loc["2", "a_nodes"] is pd_na() and steps.loc["2", "b_nodes"] == 5
    # a step's families: cuBLAS 3 -> 0, nvjet 0 -> 3, Triton 1 -> 2, ATen add 1 -> 0,
    # memcpy 1 -> 0
    fam = d.step_pairs["1"].by_family.set_index("family").delta.to_dict()
    assert {k: v for k, v in fam.items() if v} == {
        "GEMM: cuBLAS": -3,
        "GEMM: nvjet": 3,
        "Triton (Inductor)": 1,
        "ATen elementwise": -1,
        "memcpy": -1,
    }
    # no graph name is shared: every graph is one side's only
    assert not d.pairs and len(d.only_a) == 9 and len(d.only_b) == 3
    # over every graph: X 3 sizes x 6 nodes, Y 3 sizes x 5
    assert (d.total.a.total, d.total.b.total) == (18, 15)


def test_steps_priced():
    from graph_harness.capture.advise.delta_price import price_recording
    from tests.capture.delta_inputs import COSTS

    d = recording_delta(engine_x(), engine_y(), step_keys=(r"bs=(\d+)", r"batch (\d+)"))
    p = price_recording(d, COSTS)
    # a step: kernels 5 -> 5 (0 us), one copy 1 -> 0 at 3 us
    assert set(p.steps) == {"1", "4"}
    assert p.steps["1"].us == pytest.approx(-3.0)
    # every graph: kernels 15 -> 15, copies 3 -> 0
    assert p.total.us == pytest.approx(-9.0)
    assert len(p.lines()) == 1 + 2 + 1


def pd_na():
    import pandas as pd

    return pd.NA


def test_graphs_paired_by_name_and_the_family_that_carries_the_gap():
    a = recording([("bs=1", export([GEMM, ADD, ADD], "a"), 3), ("bs=2", export([GEMM], "a"), 1)])
    b = recording([("bs=1", export([GEMM, TRITON], "b"), 4), ("bs=4", export([GEMM], "b"), 2)])
    d = recording_delta(a, b)
    rows = d.graphs.set_index("graph")
    assert rows.loc["bs=1", ["a_nodes", "b_nodes", "delta"]].tolist() == [3, 2, -1]
    assert rows.loc["bs=1", "family"] == "ATen elementwise -2, Triton (Inductor) +1"
    assert d.only_a == ["bs=2"] and d.only_b == ["bs=4"]
    assert d.steps is None  # no step key: graphs only


def test_cli_delta_of_two_recordings(tmp_path, capsys):
    x, y = tmp_path / "x", tmp_path / "y"
    x.mkdir(), y.mkdir()
    engine_x().write(x)
    engine_y().write(y)
    assert main(["delta", str(x), str(y), "--step-key", r"(\d+)", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "graph-harness/recording-delta"
    steps = {r["step"]: r for r in doc["steps"]}
    assert steps["1"]["a_nodes"] == 6 and steps["1"]["b_nodes"] == 5
    assert main(["delta", str(x), str(y), "--step-key", r"bs=(\d+)", r"batch (\d+)"]) == 0
    out = capsys.readouterr().out
    # no graph name on both sides: the steps and the totals, no table of unpaired graphs
    assert "nodes per step" in out and "graphs paired by name" not in out
    assert "by kernel family" in out and "priced by" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--step-key", "("], "not a regular expression"),
        (["--step-key", "(a)(b)"], "2 groups"),
        (["--step-key", "a", "b", "c"], "one key for both"),
        (["--step-key", "(a+)+b"], "--step-key '(a+)+b': a repeat inside a repeat"),
    ],
)
def test_bad_step_keys_are_one_line(tmp_path, capsys, argv, message):
    x = tmp_path / "x"
    x.mkdir()
    engine_x().write(x)
    assert main(["delta", str(x), str(x), *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


def test_a_recording_against_an_export_is_refused(tmp_path, capsys):
    x = tmp_path / "x"
    x.mkdir()
    engine_x().write(x)
    assert main(["delta", str(x), str(x / "graph-0.json")]) == 2
    assert "is a recording and the other is not" in capsys.readouterr().err
    with pytest.raises(StepKeyError):
        recording_delta(engine_x(), engine_y(), step_keys=("", None))


def test_ranks_keep_their_own_graphs_and_steps():
    site = CaptureSite(user="e.py:1 in c", library=None, stack=("e.py:1",))

    def rec(rank_kernels):
        return Recording(
            graphs=[
                GraphRecord(
                    index=0, pid=100 + r, rank=r, key="bs=4", key_source="engine", site=site,
                    export=export([GEMM] * k, "x"), replays=3,
                )
                for r, k in rank_kernels
            ]
        )  # fmt: skip

    d = recording_delta(rec([(0, 2), (1, 3)]), rec([(0, 1), (1, 1)]), step_keys=(r"(\d+)", None))
    # the key is searched in the graph's own name (never "rank 1"), and a step is a rank's
    steps = d.steps.set_index("step")
    assert steps.loc["rank 0: 4", "a_nodes"] == 2 and steps.loc["rank 1: 4", "a_nodes"] == 3
    assert d.pairs["rank 1: bs=4"].total_delta == -2
    assert (d.total.a.total, d.total.b.total) == (5, 2)


def test_a_step_whose_graphs_ran_unequally_is_said():
    x = engine_x()
    x.graphs[1].replays = 3  # bs=1 piece=2/3 ran 3 times, its siblings 10
    d = recording_delta(x, engine_y(), step_keys=(r"bs=(\d+)", r"batch (\d+)"))
    (note,) = d.notes
    assert "step 1" in note and "10, 3, 10 times" in note


def test_a_step_key_that_backtracks_without_end_is_stopped_and_named(monkeypatch):
    # `(a|aa)+b` nests no quantifier, yet backtracks exponentially on a run of a's: the
    # deadline stops it and the usage error names it
    import graph_harness.capture.patterns as patterns

    monkeypatch.setattr(patterns, "DEADLINE_S", 0.3)
    x = recording([("a" * 40, export([GEMM], "x"), 1)])
    with pytest.raises(patterns.PatternError, match=r"--step-key '\(a\|aa\)\+b' ran past 0.3 s"):
        recording_delta(x, x, step_keys=(r"(a|aa)+b", None))


def test_a_long_name_is_searched_in_its_first_characters_and_said(monkeypatch):
    # `(\d+) piece` on 100,000 digits is quadratic (51 s): the key sees 4,096 characters
    long = "9" * 100_000 + " piece"
    x = recording([(long, export([GEMM], "x"), 1), ("bs=4 piece", export([GEMM], "x"), 1)])
    t0 = time.perf_counter()
    d = recording_delta(x, x, step_keys=(r"(\d+) piece", None))
    assert time.perf_counter() - t0 < 5
    assert any("1 graph names longer than 4,096 characters" in n for n in d.notes), d.notes


def test_inline_exports_and_an_export_named_recording_json(tmp_path, capsys):
    # `record --json` prints each export inline: delta of two recordings reads it as
    # advise FILE#NAME does; a node export that happens to be named recording.json is one
    x, y, n1, n2 = (tmp_path / d for d in ("x", "y", "n1", "n2"))
    for d in (x, y, n1, n2):
        d.mkdir()
    engine_x().write(x)
    doc = engine_y().to_dict(inline=True)
    (y / "recording.json").write_text(json.dumps(doc))
    assert main(["delta", str(x), str(y), "--step-key", r"(\d+)", "--json"]) == 0
    steps = {r["step"]: r for r in json.loads(capsys.readouterr().out)["steps"]}
    assert steps["1"]["b_nodes"] == 5
    for d, n in ((n1, 3), (n2, 4)):
        export([GEMM] * n, "n").write_json(d / "recording.json")
    assert main(["delta", str(n1 / "recording.json"), str(n2 / "recording.json"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["total_delta"] == 1
