"""A node delta priced (capture/advise/delta_price.py), on the CPU: slopes set here, the
expected microseconds worked out by hand from the nodes each side was built with."""

from __future__ import annotations

import json

import pytest

from graph_harness.capture.advise.delta_price import price_delta
from graph_harness.capture.export.delta import node_delta
from graph_harness.reports.cli.program import main
from tests.capture.delta_inputs import ADD, COSTS, GEMM, NVJET, TRITON, export


def with_events(e, n: int):
    """`e` with `n` event-record nodes appended (a type no chain prices)."""
    base = len(e.nodes)
    e.nodes += [
        {**e.nodes[0], "index": base + i, "type": "event_record", "kernel": "", "deps": []}
        for i in range(n)
    ]
    return e


def test_priced_by_type_split_by_family_and_events_left_unpriced():
    a = export([GEMM, GEMM, ADD, ADD, ADD], "a", memcpy=2)  # 5 kernels, 2 copies
    b = with_events(export([NVJET, TRITON], "b"), 3)  # 2 kernels, 3 events
    p = price_delta(node_delta(a, b), COSTS)
    # kernels 5 -> 2 at 2 us, copies 2 -> 0 at 3 us; events not priced
    assert p.us == pytest.approx(-3 * 2.0 - 2 * 3.0)
    assert p.unpriced == {"event_record": 3}
    fam = p.by_family.set_index("family")
    assert fam.loc["ATen elementwise", "us"] == pytest.approx(-6.0)
    assert fam.loc["GEMM: cuBLAS", "us"] == pytest.approx(-4.0)
    assert fam.loc["GEMM: nvjet", "us"] == pytest.approx(2.0)
    assert fam.loc["memcpy", "us"] == pytest.approx(-6.0)
    assert fam.index[0] in ("ATen elementwise", "memcpy")  # the largest first
    assert "event_record +3" in p.line()


def test_cli_delta_prices_with_a_replay_document(tmp_path, capsys):
    a, b = export([GEMM, ADD, ADD], "a"), export([GEMM], "b")
    (tmp_path / "a.json").write_text(json.dumps(a.to_dict()))
    (tmp_path / "b.json").write_text(json.dumps(b.to_dict()))
    assert main(["delta", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    slope = doc["price"]["by_type"][0]["us_per_node"]  # the built-in table's kernel price
    assert doc["price"]["us"] == pytest.approx(-2 * slope)
    assert "built-in H200" in doc["price"]["costs"]
