"""The fusion advisor (capture/advise/advice.py and the fusion_* modules it composes,
`graph-harness advise`): candidates found on hand-built graphs whose answer is known, the
run finder against the definition written out by brute force, prices against the replay
document's own predictions, and the shipped round's candidates against what its variants
remove (counted by another route)."""

import itertools
import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graph_harness.capture import NodeExport, RoundParams, count_round
from graph_harness.capture.advise.advice import advise
from graph_harness.capture.advise.candidates import (
    FUSABLE,
    Candidate,
    find_candidates,
    find_runs,
    node_role,
)
from graph_harness.capture.advise.costs import (
    BUILTIN_CREATED,
    BUILTIN_ENV,
    BUILTIN_PARAMS,
    BUILTIN_SAVINGS,
    BUILTIN_SLOPES,
    Costs,
    CostsError,
    MeasuredSaving,
    builtin_costs,
)
from graph_harness.capture.export.delta import node_delta
from graph_harness.capture.graph.node_types import NON_LAUNCHING
from tests.command_line import run

REPO = Path(__file__).resolve().parents[3]
REPLAY_DOC = REPO / "docs" / "data" / "replay-2026-11-30-builds.json"


def node(i, type="kernel", kernel="k", scope="a", deps=(), *, path=None, parent=None, **kw):
    return {
        "index": i,
        "type": type,
        "kernel": kernel,
        "grid": None,
        "block": None,
        "stage": kw.get("stage"),
        "step": kw.get("step", scope),
        "scope": scope,
        "scope_path": list(path) if path is not None else [scope],
        "deps": list(deps),
        "parent": parent,
    }


def export(nodes, *, source="cuda-graph", workload="callable:test", variant=None, params=None):
    e = NodeExport(source=source, workload=workload, variant=variant, params=params, nodes=nodes)
    return NodeExport.from_dict(e.to_dict())  # a valid export document, checked field by field


def serial(*specs, source="cuda-graph"):
    """Nodes each depending on the one before: specs are (type, kernel, scope)."""
    return export(
        [node(i, t, k, s, [i - 1] if i else []) for i, (t, k, s) in enumerate(specs)],
        source=source,
    )


# --- candidates on graphs whose answer is known ------------------------------------------------


@pytest.mark.smoke
def test_a_serial_chain_in_one_scope_is_one_candidate():
    e = serial(*[("kernel", f"k{i}", "a") for i in range(4)])
    assert find_candidates(e) == [Candidate("chain", (0, 1, 2, 3), 0, None)]
    assert find_candidates(e)[0].removed == (1, 2, 3)


def test_forks_and_joins_break_runs():
    # 0 -> 1 -> 3 -> 4 -> 5 -> 6, and 0 -> 2 -> 4: 0 has two dependents (a fork), 4 two
    # dependencies (a join)
    deps = {0: [], 1: [0], 2: [0], 3: [1], 4: [2, 3], 5: [4], 6: [5]}
    e = export([node(i, deps=d) for i, d in deps.items()])
    assert find_runs(e.nodes) == [(0,), (1, 3), (2,), (4, 5, 6)]
    assert [c.run for c in find_candidates(e)] == [(1, 3), (4, 5, 6)]


def test_scopes_split_runs_by_their_whole_path():
    e = export(
        [
            node(0, scope="a"),
            node(1, scope="a", deps=[0]),
            node(2, scope="b", deps=[1]),
            node(3, scope="b", deps=[2]),
            node(4, scope="x", deps=[3], path=["p", "x"]),
            node(5, scope="x", deps=[4], path=["q", "x"]),  # same label, another parent
        ]
    )
    assert find_runs(e.nodes) == [(0, 1), (2, 3), (4,), (5,)]


def test_copies_after_a_kernel_go_into_it_even_across_scopes():
    e = export(
        [
            node(0, "kernel", "_compaction_kernel", "compaction"),
            node(1, "memcpy", "", "copy", [0]),
            node(2, "memcpy", "", "copy", [1]),
            node(3, "kernel", "next", "next", [2]),
            node(4, "kernel", "other", "other", [0]),  # the kernel may feed others too
        ]
    )
    assert find_candidates(e) == [Candidate("copies-after-kernel", (1, 2), 0, 0)]
    c = find_candidates(e)[0]
    assert c.removed == (1, 2) and c.nodes == (0, 1, 2)


def test_copies_in_their_kernels_scope_join_its_chain():
    e = serial(("kernel", "k", "a"), ("kernel", "k2", "a"), ("memset", "", "a"))
    assert find_candidates(e) == [Candidate("chain", (0, 1, 2), 0, None)]


def test_copies_with_no_kernel_before_them():
    e = serial(("memcpy", "", "a"), ("memcpy", "", "a"), ("event_record", "", "b"))
    assert find_candidates(e) == [Candidate("chain", (0, 1), 0, None)]
    lone = serial(("event_record", "", "a"), ("memcpy", "", "b"))
    assert find_candidates(lone) == []  # an event is no kernel to write directly


def test_library_kernels_and_non_fusable_nodes_break_runs():
    e = serial(
        ("kernel", "k", "a"),
        ("kernel", "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n", "a"),
        ("kernel", "k", "a"),
        ("kernel", "k", "a"),
        ("event_record", "", "a"),
        ("kernel", "k", "a"),
        ("kernel", "k", "a"),
        ("host", "", "a"),
        ("memcpy", "", "b"),
    )
    assert [c.run for c in find_candidates(e)] == [(2, 3), (5, 6)]
    after_gemm = serial(("kernel", "nvjet_tst_64x8_64x16", "a"), ("memcpy", "", "a"))
    assert find_candidates(after_gemm) == [Candidate("copies-after-kernel", (1,), 0, 0)]


@pytest.mark.parametrize(
    "type_, name, role",
    [
        ("kernel", "_ZN2at6native6sbtopk10gatherTopKIfjLi2ELb0EEEvNS_4cuda6detail", "library"),
        ("kernel", "_ZN2at6native18radixSortKVInPlaceILi2ELin1ELi64ELi32Efl", "library"),
        ("kernel", "pytorch_flash::flash_fwd_splitkv_kernel", "library"),
        ("kernel", "ncclDevKernel_AllGather_RING_LL", "library"),
        ("kernel", "triton_tem_fused_mm_0", "library"),  # an Inductor GEMM template
        # Inductor's own pointwise kernel, named after the op whose input it prepares
        ("kernel", "triton_poi_fused__scaled_dot_product_efficient_attention_0", "kernel"),
        ("kernel", "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctor", "kernel"),
        ("memcpy", "", "copy"),
        ("memset", "", "set"),
        ("event_record", "", None),
        ("aten", "aten.mm.default", "library"),
        # MoE experts' grouped GEMMs are library kernels, as mm and _scaled_mm (issue 60)
        ("aten", "aten._grouped_mm.default", "library"),
        ("aten", "aten._scaled_grouped_mm.default", "library"),
        ("aten", "aten._scaled_mm.default", "library"),
        ("aten", "aten.topk.default", "library"),
        ("aten", "aten.mul.Tensor", "kernel"),
        ("aten", "aten.copy_.default", "copy"),
        ("aten", "aten.fill_.Scalar", "set"),
        ("view", "aten.view.default", None),
        ("triton", "_pack_flat_kernel", "kernel"),
    ],
)
def test_node_roles(type_, name, role):
    assert node_role(node(0, type_, name)) == role


def test_child_graph_nodes_are_left_out():
    e = export(
        [
            node(0, "graph", ""),
            node(1, "kernel", "k", parent=0),
            node(2, "kernel", "k", deps=[1], parent=0),
        ]
    )
    assert find_candidates(e) == []


def test_cpu_views_are_no_dependents():
    # on the CPU source a view records the op before it as its dependency; it launches
    # nothing, so the op's only dependent is still the next op
    e = export(
        [
            node(0, "aten", "aten.mul.Tensor"),
            node(1, "view", "aten.view.default", deps=[0]),
            node(2, "aten", "aten.add.Tensor", deps=[0]),
        ],
        source="cpu-dispatch",
    )
    assert find_candidates(e) == [Candidate("chain", (0, 2), 0, None)]


def test_scope_patterns_strip_stages_and_layer_indices_only():
    from graph_harness.capture.attribution.labels import generalize as scope_pattern

    assert scope_pattern("stage12/pack") == "stage*/pack"
    assert scope_pattern("layers.3.attention") == "layers.*.attention"
    assert scope_pattern("layers.3.feed_forward.w1") == "layers.*.feed_forward.w1"
    assert scope_pattern("block3") == "block3" and scope_pattern("h.0") == "h.*"


# --- the run finder against the definition, by brute force ----------------------------------


def runs_by_brute_force(nodes):
    """The definition written out: a and b are linked when both are fusable, b's only
    dependency is a, a's only launching dependent is b, and their scope paths are equal;
    runs are the connected components of that relation (each listed in node order)."""
    n = len(nodes)
    fus = [node_role(x) in FUSABLE for x in nodes]

    def linked(a, b):
        dependents = {j for j in range(n) if a in nodes[j]["deps"]}
        dependents = {j for j in dependents if nodes[j]["type"] not in NON_LAUNCHING}
        return (
            fus[a]
            and fus[b]
            and set(nodes[b]["deps"]) == {a}
            and dependents == {b}
            and nodes[a]["scope_path"] == nodes[b]["scope_path"]
        )

    parent = {i: i for i in range(n) if fus[i]}

    def find(x):
        while parent[x] != x:
            x = parent[x]
        return x

    for a in parent:
        for b in parent:
            if linked(a, b):
                parent[find(b)] = find(a)
    comps = defaultdict(list)
    for i in parent:
        comps[find(i)].append(i)
    for comp in comps.values():  # each component is a path through its links
        assert all(linked(a, b) for a, b in itertools.pairwise(comp))
    return sorted(tuple(c) for c in comps.values())


@st.composite
def graphs(draw):
    n = draw(st.integers(1, 16))
    kinds = ["kernel"] * 4 + ["memcpy", "memset", "event_record", "view", "aten"]
    names = ["k", "k2", "gemv2T_kernel", "aten.copy_.default", "aten.topk.default"]
    nodes = []
    for i in range(n):
        t = draw(st.sampled_from(kinds))
        if i and draw(st.booleans()):
            deps = [i - 1]  # mostly serial, as a stream's capture is
        else:
            deps = draw(st.lists(st.integers(0, i - 1), max_size=3, unique=True)) if i else []
        scope = draw(st.sampled_from(["a", "b"]))
        path = draw(st.sampled_from([[scope], ["p", scope]]))
        nodes.append(node(i, t, draw(st.sampled_from(names)), scope, deps, path=path))
    return nodes


@settings(max_examples=300, deadline=None)
@given(graphs())
def test_runs_match_the_definition(nodes):
    assert sorted(find_runs(nodes)) == runs_by_brute_force(nodes)
    e = export(nodes, source="cpu-dispatch")
    removed = [i for c in find_candidates(e) for i in c.removed]
    assert len(removed) == len(set(removed)), "no node is removed twice"
    for c in find_candidates(e):
        assert c.kept not in c.removed and len(c.removed) >= 1
        if c.kind == "copies-after-kernel":
            assert nodes[c.run[0]]["deps"] == [c.anchor]
            assert node_role(nodes[c.anchor]) in ("kernel", "library")
            assert {node_role(nodes[i]) for i in c.run} <= {"copy", "set"}


# --- a round as the GPU captures it: structure from BENCHMARKS and the round profile ----------

TOPK = "_ZN2at6native6sbtopk10gatherTopKIfjLi2ELb0EEEvNS_4cuda6detail10TensorInfoIKT_T0_EE"
SORT = "_ZN2at6native18radixSortKVInPlaceILi2ELin1ELi64ELi32EflEEvNS_4cuda6detail10TensorInfoIT3"
EW = "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_"
ROUND_STEPS = {  # per stage, as counted on the H200 (docs/data/counts-2026-11-30.csv)
    "topk": [("kernel", TOPK), ("kernel", SORT), ("kernel", EW + "eq"), ("kernel", EW + "mf")],
    "pack": [("kernel", f"{EW}pack{i}") for i in range(10)],
    "select": [
        ("kernel", EW + "copy"),
        ("kernel", EW + "copy"),
        ("kernel", TOPK),
        ("kernel", SORT),
        ("kernel", "_scatter_gather_elementwise_kernel"),
    ],
    "compaction": [("kernel", "_compaction_kernel")],
    "copy": [("memcpy", ""), ("memcpy", "")],
}


def graph_round(stages=24, variant="shipped"):
    nodes = []
    for s in range(stages):
        for step, ops in ROUND_STEPS.items():
            for t, k in ops:
                i = len(nodes)
                deps = [i - 1] if i else []
                nodes.append(node(i, t, k, f"stage{s}/{step}", deps, stage=s, step=step))
    params = RoundParams(stages=stages).as_dict()
    return export(nodes, workload="decode-round", variant=variant, params=params)


def replay_doc():
    return json.loads(REPLAY_DOC.read_text())


def test_the_builtin_costs_are_the_replay_document():
    doc = replay_doc()
    assert {f["kind"]: (f["slope"], f["slope_lo"], f["slope_hi"]) for f in doc["fits"]} == (
        BUILTIN_SLOPES
    )
    saved = [
        (
            s["a"],
            s["b"],
            json.loads(s["delta_by_type"]),
            s["measured_us"],
            s["measured_lo"],
            s["measured_hi"],
        )
        for s in doc["savings"]
    ]
    assert saved == [tuple(s) for s in BUILTIN_SAVINGS]
    assert (doc["env"], doc["params"], doc["created"]) == (
        BUILTIN_ENV,
        BUILTIN_PARAMS,
        BUILTIN_CREATED,
    )
    from_file = Costs.read(REPLAY_DOC)
    builtin = builtin_costs()
    assert (from_file.slopes, from_file.savings) == (builtin.slopes, builtin.savings)
    assert "built-in H200" in builtin.label and "2026-11-30" in builtin.label


def test_the_round_puts_the_pack_and_the_copies_first():
    a = advise(graph_round())
    pack, copies, *rest = a.groups
    assert (pack.kind, pack.scope, pack.occurrences, pack.nodes_now, pack.nodes_after) == (
        "chain",
        "stage*/pack",
        24,
        10,
        1,
    )
    assert pack.removed_by_type == {"kernel": 216} and "pack-shipped" in pack.priced_by
    assert (copies.kind, copies.anchor_kernel, copies.kernels) == (
        "copies-after-kernel",
        "_compaction_kernel",
        ("memcpy", "memcpy"),
    )
    assert (copies.occurrences, copies.nodes_now, copies.removed_by_type) == (24, 3, {"memcpy": 48})
    # the rest: the pointwise pairs beside the library top-k and sort, one node each
    assert [(g.scope, g.nodes_now) for g in rest] == [("stage*/topk", 2), ("stage*/select", 2)]
    assert all(g.saving_us < copies.saving_us for g in rest)
    assert a.unit == "round" and a.frame().shape[0] == 4


def test_round_prices_agree_with_the_replay_documents_own():
    # The replay document priced each variant pair from node deltas of real GPU exports
    # (capture/round/pricing.py): by node type, and by real shapes. The advisor prices its
    # candidates; where they are the same change, the two must agree.
    doc = {(s["a"], s["b"]): s for s in replay_doc()["savings"]}
    comps = {(c.a, c.b): c for c in advise(graph_round()).comparisons}
    assert set(comps) == {
        ("shipped", "fused"),
        ("shipped", "direct-compaction"),
        ("shipped", "fused-pack"),
    }
    for pair, c in comps.items():
        assert c.removed_nodes == c.variant_removed_nodes == doc[pair]["delta_nodes"]
        assert c.predicted_by_type_us == pytest.approx(doc[pair]["predicted_us"], rel=1e-12)
        assert c.predicted_with_b_us == pytest.approx(doc[pair]["predicted_shapes_us"], rel=1e-12)
        assert c.measured_us == doc[pair]["measured_us"]


def test_a_prediction_outside_its_interval_says_why_in_figures():
    comps = {(c.a, c.b): c for c in advise(graph_round()).comparisons}
    copies = comps[("shipped", "direct-compaction")]
    assert copies.within is True and copies.ranks == (2,)
    pack = comps[("shipped", "fused-pack")]
    assert pack.within is False and pack.ranks == (1,)
    assert pack.predicted_us == pytest.approx(216 * BUILTIN_SLOPES["pack-shipped"][0])
    per = pack.measured_us / 216
    lo, hi = pack.measured_lo / 216, pack.measured_hi / 216
    for figure in (f"{per:.3f}", f"[{lo:.3f}, {hi:.3f}]", f"{pack.predicted_with_b_us:.1f}"):
        assert figure in pack.note, (figure, pack.note)
    assert pack.note.startswith("below") and "still below" in pack.note
    both = comps[("shipped", "fused")]
    assert both.ranks == (1, 2) and both.within is False


def _costs_with(*savings):
    return Costs("test costs", dict(BUILTIN_SLOPES), dict(BUILTIN_PARAMS), savings=savings)


def test_the_other_verdicts():
    fused_pack = {"kernel": 216}
    above = MeasuredSaving("shipped", "fused-pack", fused_pack, 290.0, 280.0, 300.0)
    (c,) = advise(graph_round(), _costs_with(above)).comparisons
    assert c.within is False and c.note.startswith("above") and "less than priced" in c.note
    # 311.0 misses [312, 330]; with the fused pack priced at its own chain, 317.5 is in
    near = MeasuredSaving("shipped", "fused-pack", fused_pack, 320.0, 312.0, 330.0)
    (c,) = advise(graph_round(), _costs_with(near)).comparisons
    assert c.within is False and c.note.endswith("317.5: within the interval")
    other = MeasuredSaving("shipped", "fused-pack", {"kernel": 200}, 320.0, 300.0, 330.0)
    (c,) = advise(graph_round(), _costs_with(other)).comparisons
    assert c.within is None and "not the same change" in c.note


def test_no_measured_savings_for_another_round_shape_or_the_cpu():
    a = advise(graph_round(stages=2))
    assert a.comparisons == [] and any("'stages': 24" in n for n in a.notes), a.notes
    assert "pack-shipped" in a.groups[0].priced_by  # its own chain: same shape per call
    cpu = advise(count_round(RoundParams(stages=2), "shipped", "cpu").export)
    assert cpu.comparisons == [] and any("CPU dispatches" in n for n in cpu.notes)
    assert all("its own chain" not in g.priced_by for g in cpu.groups)


def test_savings_not_measured_are_not_compared(tmp_path):
    doc = replay_doc()
    doc["savings"][3]["measured_us"] = None  # shipped -> fused-pack: null, not measured
    path = tmp_path / "replay.json"
    path.write_text(json.dumps(doc))
    costs = Costs.read(path)
    assert [(s.a, s.b) for s in costs.savings] == [
        ("shipped", "fused"),
        ("shipped-compiled", "fused"),
        ("shipped", "direct-compaction"),
    ]
    json.dumps(advise(graph_round(), costs).to_dict(), allow_nan=False)


def test_costs_without_a_kernel_price_are_refused(tmp_path):
    doc = replay_doc()
    doc["fits"] = [f for f in doc["fits"] if f["kind"] != "torch-add"]
    bad = tmp_path / "replay.json"
    bad.write_text(json.dumps(doc))
    with pytest.raises(CostsError, match="no torch-add fit"):
        Costs.read(bad)


def test_the_cpu_round_against_what_its_variants_remove():
    # Another route to the same nodes: the variants that make these two changes, counted.
    params = RoundParams(stages=3)
    shipped = count_round(params, "shipped", "cpu").export
    pack, copies = advise(shipped).groups[:2]
    assert (pack.scope, pack.nodes_now, copies.anchor_kernel) == (
        "stage*/pack",
        10,
        "_compaction_kernel",
    )
    for group, variant, steps in (
        (pack, "fused-pack", {"pack"}),
        (copies, "direct-compaction", {"copy"}),
    ):
        d = node_delta(shipped, count_round(params, variant, "cpu").export)
        assert group.removed_nodes == -d.total_delta
        changed = d.by_step[d.by_step.delta != 0]
        assert set(changed.step) == steps and -changed.delta.sum() == group.removed_nodes


def test_the_tiny_model_on_the_cpu_names_its_norms():
    from graph_harness.capture import capture_and_count, module_scopes
    from graph_harness.capture.attribution.rollup import scope_tree
    from tests.llama_example import load_example

    ex = load_example()
    step = ex.make_step(preset="tiny", device="cpu")
    with module_scopes(step.module):
        e = capture_and_count(step, device="cpu")
    groups = {g.scope: g for g in advise(e).groups}
    norm = groups["layers.*.attention_norm"]
    own = scope_tree(e.frame()).set_index("scope").own
    # RMSNorm holds no library op: all its nodes are one chain, in every layer
    assert norm.occurrences == ex.PRESETS["tiny"].n_layer
    assert norm.nodes_now == own["layers.0.attention_norm"] >= 2 and norm.nodes_after == 1
    assert "aten.rsqrt.default" in norm.kernels


# --- the command ---------------------------------------------------------------------------


def test_advise_prints_the_table_and_the_same_content_as_json(tmp_path):
    path = tmp_path / "nodes-shipped.json"
    graph_round().write_json(path)
    r = run("advise", str(path))
    assert r.returncode == 0, r.stderr
    for text in ("stage*/pack", "10 -> 1", "_compaction_kernel", "fused-pack", "within"):
        assert text in r.stdout, text
    assert "costs: built-in H200 costs" in r.stdout and r.stderr == ""
    r = run("advise", str(path), "--json", "--top", "3", "--costs", str(REPLAY_DOC))
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    want = advise(NodeExport.read_json(path), Costs.read(REPLAY_DOC)).to_dict(top=3)
    assert doc == json.loads(json.dumps(want))
    assert len(doc["groups"]) == 3 and doc["groups_total"] == 4
    assert doc["costs"]["source"].startswith(f"costs from {REPLAY_DOC}")


def test_advise_counts_a_variant_by_name():
    r = run("advise", "shipped", "--stages", "2", "--top", "3")
    assert r.returncode == 0, r.stderr
    assert "stage*/pack" in r.stdout and "CPU dispatch count" in r.stdout
    assert "cpu-dispatch" in r.stderr  # the banner
    # three groups in all: `clone, _unsafe_view` in select is no longer one, since
    # _unsafe_view aliases its input (a view, launching nothing: capture/graph/dispatch.py)
    assert "more group" not in r.stdout and "_unsafe_view" not in r.stdout


def test_advise_usage_errors(tmp_path):
    path = tmp_path / "nodes.json"
    graph_round(stages=1).write_json(path)
    no_kernel_price = tmp_path / "replay.json"
    doc = replay_doc()
    doc["fits"] = [f for f in doc["fits"] if f["kind"] != "torch-add"]
    no_kernel_price.write_text(json.dumps(doc))
    for args, says in (
        (["nope"], "neither a variant"),
        ([str(path), "--stages", "2"], "--stages applies to counting a variant"),
        ([str(tmp_path / "missing.json")], "missing.json does not exist"),
        ([str(path), "--costs", str(path)], "this is a node export, not a replay document"),
        ([str(path), "--costs", str(no_kernel_price)], "no torch-add fit"),
        ([str(path), "--top", "0"], "expected a whole number from 1 to 100,000"),
    ):
        r = run("advise", *args)
        assert r.returncode == 2 and says in r.stderr, (args, r.stderr)


# --- on the GPU ----------------------------------------------------------------------------


@pytest.mark.gpu
def test_the_shipped_round_on_the_gpu():
    params = RoundParams()  # the costs' own round: measured savings stand beside
    shipped = count_round(params, "shipped").export
    assert shipped.source == "cuda-graph"
    a = advise(shipped)
    pack, copies = a.groups[:2]
    assert (pack.kind, pack.scope, pack.occurrences, pack.nodes_now, pack.nodes_after) == (
        "chain",
        "stage*/pack",
        params.stages,
        10,
        1,
    )
    assert copies.kind == "copies-after-kernel" and copies.anchor_scope == "stage*/compaction"
    assert copies.types == ("memcpy", "memcpy") and copies.occurrences == params.stages
    # what the variants that make these changes remove, counted from their own graphs
    for group, variant in ((pack, "fused-pack"), (copies, "direct-compaction")):
        d = node_delta(shipped, count_round(params, variant).export)
        assert group.removed_by_type == {t: n for t, n in d.removed_by_type().items() if n}
    comps = {(c.a, c.b): c for c in a.comparisons}
    assert comps[("shipped", "fused-pack")].ranks == (1,)
    assert comps[("shipped", "direct-compaction")].ranks == (2,)
    assert comps[("shipped", "direct-compaction")].within is True
    fused_pack = comps[("shipped", "fused-pack")]
    # the real pack call is priced by its own chain, as the replay document priced it
    assert fused_pack.predicted_us == pytest.approx(216 * BUILTIN_SLOPES["pack-shipped"][0])
    doc = {(s["a"], s["b"]): s for s in replay_doc()["savings"]}
    for pair, c in comps.items():
        assert c.predicted_with_b_us == pytest.approx(doc[pair]["predicted_shapes_us"], rel=1e-12)
    assert fused_pack.within or "Per removed node the round saved" in fused_pack.note


@pytest.mark.gpu
@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_the_example_model_on_the_gpu_names_what_to_fuse(compiled):
    from graph_harness.capture import capture_and_count, module_scopes
    from tests.llama_example import load_example

    step = load_example().make_step(compiled=compiled)
    with module_scopes(step.module):
        e = capture_and_count(step)
    a = advise(e)
    assert a.groups, "something to fuse"
    top = a.groups[0]
    assert top.nodes_now > top.nodes_after and top.saving_us > 0
    named = [k for k, t in zip(top.kernels, top.types) if t == "kernel"]
    assert named and all(k not in ("kernel", "<unknown>") for k in named), top.kernels
    if not compiled:  # the same work in every layer is one group, 8 times
        assert any(g.scope.startswith("layers.*.") and g.occurrences == 8 for g in a.groups)


def test_bench_advise_smoke(tmp_path):
    # the benchmark's CPU path runs end to end and writes what it says it writes
    bench = REPO / "benchmarks" / "bench_advise.py"
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    r = subprocess.run(
        [sys.executable, str(bench), "--out", str(tmp_path), "--smoke", "--costs", str(REPLAY_DOC)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert r.returncode == 0, r.stderr
    variants = pd.read_csv(tmp_path / "variants.csv")
    assert list(variants.scope) == ["stage*/pack", "stage*/copy"] and variants.same.all()
    for name in ("shipped", "eager"):
        for costs in ("builtin", "replay"):
            doc = json.loads((tmp_path / f"advice-{name}-{costs}.json").read_text())
            assert doc["schema"] == "graph-harness/advice" and doc["groups"]
            assert (tmp_path / f"top5-{name}-{costs}.csv").is_file()
    assert "`stage*/pack`" in (tmp_path / "advise.md").read_text()


def test_a_round_read_from_a_file_is_advised_alike_whatever_was_imported_before(tmp_path):
    # The bug (review, session 17): the round registered its own chains and measured
    # savings only once graph_harness.capture.round was imported, so advise() of a round
    # export read from a file dropped them in a process that had not imported it.
    path = tmp_path / "shipped.json"
    graph_round().write_json(path)
    code = (
        "import json, sys\n"
        "from graph_harness.capture.advise.advice import advise\n"
        "from graph_harness.capture.export.nodes import NodeExport\n"
        f"a = advise(NodeExport.read_json({str(path)!r}))\n"
        "print(json.dumps([len(a.comparisons), sorted({g.own_chain or '' for g in a.groups})]))\n"
    )
    fresh = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert fresh.returncode == 0, fresh.stderr
    here = advise(NodeExport.read_json(path))
    assert json.loads(fresh.stdout) == [
        len(here.comparisons),
        sorted({g.own_chain or "" for g in here.groups}),
    ]
    assert here.comparisons, "not vacuous: the built-in costs hold the round's measured savings"
