"""Repeated layers folded (capture/attribution/repeats.py), on the CPU: a dump's repeating
block found from its nodes alone, against the module scopes a count of the same capture
gave the same nodes (docs/data/dot-2026-12-02, the H200); scope trees folded only where
the layers agree."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from graph_harness.capture.attribution.repeats import Repeat, fold_scopes, repeating_block
from graph_harness.capture.export.delta import node_delta
from graph_harness.capture.export.kinds import read_export

DATA = Path(__file__).resolve().parents[3] / "docs" / "data" / "dot-2026-12-02"


def layer_spans(export, container: str) -> list[tuple[int, int]]:
    """Each layer's first and last node position, from the module scopes."""
    spans: dict[str, list[int]] = {}
    for i, n in enumerate(export.nodes):
        layer = next((s for s in n["scope_path"] if s.startswith(container + ".")), None)
        if layer is not None and layer.count(".") == container.count(".") + 1:
            spans.setdefault(layer, []).append(i)
    return [(min(v), max(v)) for v in spans.values()]


def test_a_dumps_repeating_block_is_the_models_layers():
    # the HF step: dumped (no scopes) and counted under module_scopes, the same capture
    dumped = read_export(DATA / "dumps" / "hf_decode-eager-none.dot")
    counted = read_export(DATA / "dumps" / "hf_decode-eager-export.json")
    r = repeating_block([(n["type"], n["kernel"]) for n in dumped.nodes])
    spans = layer_spans(counted, "model.layers")
    assert len(spans) == r.times == 4
    assert [(r.start + k * r.period, r.start + (k + 1) * r.period - 1) for k in range(4)] == spans
    # the llama example: dumped, and recorded with module scopes in the same run
    dumped = read_export(DATA / "dumps" / "llama_decode-eager-plain-none.dot")
    recorded = read_export(DATA / "rec-llama" / "graph-0.json")
    r = repeating_block([(n["type"], n["kernel"]) for n in dumped.nodes])
    spans = layer_spans(recorded, "layers")
    assert len(spans) == r.times == 8
    assert [(r.start + k * r.period, r.start + (k + 1) * r.period - 1) for k in range(8)] == spans


def test_the_shortest_block_that_covers_most_and_none_where_nothing_repeats():
    assert repeating_block(list("xabcabcabcabcy")) == Repeat(1, 3, 4)
    assert repeating_block(list("abcdefgh")) is None
    assert repeating_block(list("aaaa")) is None  # one node repeated is no block
    assert repeating_block(list("abab")) == Repeat(0, 2, 2)


def tree(rows) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["depth", "scope", "a", "b", "delta"])


def test_layers_fold_only_where_they_agree():
    rows = [(0, "", 30, 20, -10), (1, "layers", 30, 20, -10)]
    for i, (a, b) in enumerate([(10, 7), (10, 7), (10, 6)]):
        rows += [(2, f"layers.{i}", a, b, b - a), (3, f"layers.{i}.mlp", 4, 2, -2)]
    got = fold_scopes(tree(rows), ["a", "b", "delta"])
    assert got[["scope", "times", "a"]].values.tolist() == [
        ["", 1, 30],
        ["layers", 1, 30],
        ["layers.{0..1}", 2, 10],
        ["layers.{0..1}.mlp", 2, 4],
        ["layers.2", 1, 10],  # not like its neighbours: its own rows
        ["layers.2.mlp", 1, 4],
    ]


def test_a_recorded_delta_folds_the_eight_layers():
    d = node_delta(
        read_export(DATA / "rec-llama" / "graph-0.json"),
        read_export(DATA / "rec-llama-compiled" / "graph-0.json"),
    )
    folded = fold_scopes(d.by_scope, ["a", "b", "delta"]).set_index("scope")
    row = folded.loc["layers.{0..7}"]
    assert row.times == 8 and (row.a, row.b) == (53, 12)
    # the other route: the layers' nodes counted from the exports' own scopes
    for side, export in (("a", d.a), ("b", d.b)):
        per = [sum("layers.3" in n["scope_path"] for n in export.nodes)]
        assert per == [row[side]]
    assert d.blocks is None  # scoped exports: the modules fold them, not the node sequence


def test_a_fold_inside_a_fold_keeps_the_outer_name_and_names_with_digits_stay():
    rows = [(0, "", 20, 10, -10), (1, "layers", 20, 10, -10)]
    for i in range(2):
        rows += [(2, f"layers.{i}", 10, 5, -5), (3, f"layers.{i}.w1", 1, 1, 0)]
        rows += [(3, f"layers.{i}.w2", 1, 1, 0), (3, f"layers.{i}.experts", 8, 3, -5)]
        rows += [(4, f"layers.{i}.experts.{e}", 4, 1, -3) for e in range(2)]
    got = fold_scopes(tree(rows), ["a", "b", "delta"])
    assert got[["scope", "times"]].values.tolist() == [
        ["", 1],
        ["layers", 1],
        ["layers.{0..1}", 2],
        ["layers.{0..1}.w1", 2],  # w1 and w2: names, not indices
        ["layers.{0..1}.w2", 2],
        ["layers.{0..1}.experts", 2],
        ["layers.{0..1}.experts.{0..1}", 2],
    ]


def test_twenty_thousand_siblings_fold_into_one():
    # (the quadratic first version took minutes here; the rows are the tree's own)
    n = 20_000
    rows = [(0, "", n, 0, -n), (1, "m", n, 0, -n)]
    rows += [(2, f"m.{i}", 1, 0, -1) for i in range(n)]
    got = fold_scopes(tree(rows), ["a", "b", "delta"])
    assert got.scope.tolist() == ["", "m", f"m.{{0..{n - 1}}}"]
    assert got.times.tolist() == [1, 1, n]
