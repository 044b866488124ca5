"""A compiled region's nodes into the modules they came from, by Inductor's provenance:
Dynamo's module paths, the provenance a real compile leaves (CPU Inductor), and the
matching of graph nodes to it (synthetic graphs whose answer is known by construction)."""

import pytest
import torch
from torch import nn

from graph_harness.capture.attribution.provenance_match import deepest_common, match, refine
from graph_harness.capture.scopes.provenance import (
    CompiledGraph,
    ProvenanceEntry,
    collecting,
    module_path,
)
from tests.capture.scopes.provenance_inputs import Net, node


@pytest.mark.parametrize(
    ("source", "path"),
    [
        ("L['self'].layers.3.attention", "layers.3.attention"),
        ("L['self'].layers[3].attention", "layers.3.attention"),
        ("L['self']._modules['layers']._modules['3']", "layers.3"),
        ("L['self']._orig_mod.norm", "norm"),
        ("L['model'].blocks['a'].fc", "blocks.a.fc"),
        ("G['net'].fc", "fc"),
        ("L['self']", ""),
        ('L["self"].x_1.y', "x_1.y"),
    ],
)
def test_module_path_reads_dynamo_sources(source, path):
    assert module_path(source) == path


def test_deepest_common():
    assert deepest_common(["layers.3.attention", "layers.3.ffn"]) == "layers.3"
    assert deepest_common(["layers.3", "layers.30"]) == "layers"  # by parts, not characters
    assert deepest_common(["norm", "layers.1"]) == ""
    assert deepest_common(["a.b"]) == "a.b"


def test_a_real_compile_leaves_its_kernels_modules_and_restores_everything():
    # CPU Inductor (C++ kernels): the same provenance machinery as on CUDA
    import logging
    import warnings

    from torch._inductor import config

    from graph_harness.capture.scopes.provenance import _TraceHandler

    trace = logging.getLogger("torch.__trace")
    before = (trace.level, list(warnings.filters))
    torch._dynamo.reset()  # a compile, not a reuse of an earlier test's
    net = torch.compile(Net().eval(), fullgraph=True)
    with collecting() as log, torch.no_grad():
        net(torch.randn(4, 16))
    # (torch's own lazy trace handler may have removed itself on the first record: it
    # writes only under TORCH_TRACE, so that changes nothing)
    assert not any(isinstance(h, _TraceHandler) for h in trace.handlers)
    assert (trace.level, list(warnings.filters)) == before
    assert config.post_grad_custom_post_pass is None
    assert log.supported and len(log.graphs) == 1
    entries = log.graphs[0].entries
    # the two matmuls are extern calls, each from its own Linear, in call order
    mms = [e.modules for e in entries if e.name.startswith("extern_kernels.")]
    assert mms == [("fc1",), ("block.fc2",)], entries
    # the add + layer norm after fc2 is one generated kernel made from block and its norm
    fused = [e for e in entries if "layer_norm" in e.name]
    assert len(fused) == 1 and set(fused[0].modules) == {"block", "block.norm"}, entries
    assert config.trace.provenance_tracking_level == 0 and not config.force_disable_caches


def test_a_users_own_post_grad_pass_is_left_alone():
    # Inductor takes a pass, a list of passes or inference-aware passes in that one
    # setting: graph-harness reads no provenance then, rather than risk calling it wrongly
    from torch._inductor import config

    seen = []

    def theirs(graph):
        seen.append(graph)

    torch._dynamo.reset()  # a compile, not a reuse of an earlier test's
    try:
        config.post_grad_custom_post_pass = theirs
        net = torch.compile(Net().eval(), fullgraph=True)
        # caches off, so their pass runs (a cache hit would skip it)
        with config.patch(force_disable_caches=True), collecting() as log, torch.no_grad():
            y = net(torch.randn(4, 16))
        assert seen and y.shape == (4, 16), "their pass ran and their compile worked"
        assert config.post_grad_custom_post_pass is theirs
    finally:
        config.post_grad_custom_post_pass = None
    assert not log.supported and "post_grad_custom_post_pass" in log.unavailable
    assert log.graphs == []


class FakeNode:
    def __init__(self, name, module):
        self.name = name
        self.meta = {"nn_module_stack": {"k": (f"L['self'].{module}", object)}} if module else {}


class FakeGraph:
    def __init__(self, *nodes):
        self.nodes = [FakeNode(*n) for n in nodes]


def test_a_compile_is_never_paired_with_an_older_post_grad_graph():
    import json

    from graph_harness.capture.scopes.provenance import ProvenanceLog

    log = ProvenanceLog()
    log._on_post_grad(FakeGraph(("mm", "fc1")))
    log._on_mapping(json.dumps({"version": 2.0}))  # a compile that left no kernel map
    # a later compile whose post-grad graph our pass never saw: nothing to pair it with
    log._on_mapping(json.dumps({"cppCodeToPost": {"extern_kernels.mm:1": ["mm"]}}))
    assert log.graphs == []
    log._on_post_grad(FakeGraph(("mm", "block.fc2"), ("add", None)))
    log._on_mapping(json.dumps({"cppCodeToPost": {"extern_kernels.mm:1": ["mm", "add"]}}))
    assert [g.entries for g in log.graphs] == [
        [ProvenanceEntry("extern_kernels.mm", ("block.fc2",))]
    ]


NAMES = {"layers", "layers.0", "layers.1", "layers.0.attn", "layers.1.attn", "norm"}
KNOWN = NAMES | {"layers.0.attn.wq", "layers.1.attn.wq"}


def graph_two_layers():
    # what Inductor records for one compiled graph, in wrapper order
    return CompiledGraph(
        [
            ProvenanceEntry("extern_kernels.mm", ("layers.0.attn.wq",)),
            ProvenanceEntry("triton_poi_fused_0", ("layers.0.attn",)),
            ProvenanceEntry("triton_red_fused_1", ("layers.0", "layers.1.attn")),  # across layers
            ProvenanceEntry("extern_kernels.mm", ("layers.1.attn.wq",)),
            ProvenanceEntry(
                "torch.ops.aten._scaled_dot_product_flash_attention", ("layers.1.attn",)
            ),
            ProvenanceEntry("triton_poi_fused_0", ("layers.1.attn",)),  # the same kernel, reused
            ProvenanceEntry("triton_per_fused_2", ("norm",)),
        ]
    )


def test_match_by_name_and_by_position():
    nodes = [
        node(0, "copy_in", ("io",), "memcpy"),  # eager work before the compiled call
        node(1, "nvjet_gemm_a"),
        node(2, "triton_poi_fused_0"),
        node(3, "triton_red_fused_1"),
        node(4, "nvjet_gemm_b"),
        node(5, None, (), "memset"),  # the attention library clears its workspace
        node(6, "flash_fwd"),
        node(7, "triton_poi_fused_0"),
        node(8, "triton_per_fused_2"),
    ]
    att = match(nodes, [graph_two_layers()])
    assert att.how == {
        1: "edge",  # before the first kernel matched by name: placed by count
        2: "kernel",
        3: "kernel",
        4: "extern",
        5: "extern",
        6: "extern",
        7: "kernel",
        8: "kernel",
    }
    assert att.modules[7] == ("layers.1.attn",)  # the second call of a reused kernel
    assert att.modules[5] == att.modules[6] == ("layers.1.attn",)
    counts = refine(nodes, [graph_two_layers()], NAMES, KNOWN)
    assert counts == {"kernel": 4, "extern": 3, "externs": 0, "edge": 1, "fused": 1}
    assert nodes[0]["scope_path"] == ["io"]  # not the compiled code's: untouched
    assert nodes[1]["scope_path"] == ["layers", "layers.0", "layers.0.attn"]  # wq cut
    assert nodes[3]["scope_path"] == ["layers"] and nodes[3]["scope"] == "layers"
    assert nodes[3]["fused_modules"] == ["layers.0", "layers.1.attn"]
    assert nodes[8]["scope_path"] == ["norm"]
    assert all("fused_modules" not in n for i, n in enumerate(nodes) if i != 3)


def test_externs_that_cannot_be_told_apart_share_their_common_module():
    nodes = [
        node(0, "triton_poi_fused_0"),
        node(1, "gemm_part1"),
        node(2, "gemm_part2"),  # one mm launching two kernels: 3 kernels for 2 calls
        node(3, "flash_fwd"),
        node(4, "triton_poi_fused_0"),
    ]
    g = CompiledGraph(
        [
            ProvenanceEntry("triton_poi_fused_0", ("layers.0.attn",)),
            ProvenanceEntry("extern_kernels.mm", ("layers.1.attn.wq",)),
            ProvenanceEntry("sdpa", ("layers.1.attn",)),
            ProvenanceEntry("triton_poi_fused_0", ("layers.1.attn",)),
        ]
    )
    counts = refine(nodes, [g], NAMES, KNOWN)
    assert counts["externs"] == 3 and counts["extern"] == 0
    assert [nodes[i]["scope"] for i in (1, 2, 3)] == ["layers.1.attn"] * 3


def test_depth_and_a_block_compiled_on_its_own():
    # a block compiled alone: Dynamo's paths are relative to it; its nodes already sit
    # in the block's scope (the hooks ran around the compiled call)
    nodes = [node(0, "triton_a", ("layers.1",)), node(1, "gemm", ("layers.1",))]
    g = CompiledGraph(
        [ProvenanceEntry("triton_a", ("attn",)), ProvenanceEntry("extern_kernels.mm", ("attn.wq",))]
    )
    refine(nodes, [g], NAMES, KNOWN)
    assert nodes[0]["scope_path"] == ["layers.1", "layers.1.attn"]
    assert nodes[1]["scope_path"] == ["layers.1", "layers.1.attn"]
    shallow = [node(0, "triton_a", ("layers.1",))]
    refine(shallow, [g], {"layers", "layers.0", "layers.1"}, KNOWN)  # depth 2
    assert shallow[0]["scope_path"] == ["layers.1"]


def test_a_later_graph_called_again_is_told_from_an_earlier_one_with_the_same_names():
    # graph A's kernel names recur in graph B (Inductor's counters restart per graph);
    # calls A, B, B: the second B call must not fall back to A
    a = CompiledGraph(
        [ProvenanceEntry("t_add_0", ("layers.0.attn",)), ProvenanceEntry("t_mul_1", ("norm",))]
    )
    b = CompiledGraph(
        [
            ProvenanceEntry("t_add_0", ("layers.1.attn",)),
            ProvenanceEntry("t_sub_1", ("layers.1.attn",)),
            ProvenanceEntry("t_mul_1", ("layers.1",)),
        ]
    )
    names = ["t_add_0", "t_mul_1"] + ["t_add_0", "t_sub_1", "t_mul_1"] * 2
    nodes = [node(i, k) for i, k in enumerate(names)]
    refine(nodes, [a, b], NAMES, KNOWN)
    scopes = [n["scope"] for n in nodes]
    assert scopes == ["layers.0.attn", "norm"] + ["layers.1.attn", "layers.1.attn", "layers.1"] * 2


def test_a_module_with_its_own_children_is_no_fusion_across_modules():
    nodes = [node(0, "triton_a")]
    g = CompiledGraph([ProvenanceEntry("triton_a", ("layers.0.attn", "layers.0.attn.wq"))])
    assert refine(nodes, [g], NAMES, KNOWN)["fused"] == 0
    assert nodes[0]["scope"] == "layers.0.attn" and "fused_modules" not in nodes[0]


def test_repeated_graphs_are_followed_in_order_and_strangers_left_alone():
    # two compiles of the same code (one per block): the second call's kernels belong
    # to the second graph; a kernel no graph lists is left where capture put it
    g0 = CompiledGraph([ProvenanceEntry("triton_a", ("layers.0.attn",))])
    g1 = CompiledGraph([ProvenanceEntry("triton_a", ("layers.1.attn",))])
    nodes = [node(0, "triton_a"), node(1, "triton_a"), node(2, "elementwise_kernel")]
    refine(nodes, [g0, g1], NAMES, KNOWN)
    assert [n["scope"] for n in nodes] == ["layers.0.attn", "layers.1.attn", "unscoped"]


def test_no_provenance_changes_nothing():
    nodes = [node(0, "triton_a", ("x",)), node(1, "gemm", ("x",))]
    before = [dict(n) for n in nodes]
    assert refine(nodes, [], NAMES, KNOWN)["kernel"] == 0
    assert nodes == before


def test_fused_modules_survive_a_file_and_show_in_the_tree(tmp_path):
    from graph_harness.capture.attribution.rollup import scope_tree
    from graph_harness.capture.export.nodes import NodeExport

    nodes = [node(0, "triton_a"), node(1, "triton_b"), node(2, "gemm")]
    g = CompiledGraph(
        [
            ProvenanceEntry("triton_a", ("layers.0.attn", "layers.1.attn")),
            ProvenanceEntry("triton_b", ("norm",)),
            ProvenanceEntry("extern_kernels.mm", ("layers.1.attn.wq",)),
        ]
    )
    refine(nodes, [g], NAMES, KNOWN)
    e = NodeExport(
        source="cuda-graph", workload="callable:step", variant=None, params=None, nodes=nodes
    )
    back = NodeExport.read_json(e.write_json(tmp_path / "e.json"))
    assert back.nodes == nodes and back.nodes[0]["fused_modules"] == [
        "layers.0.attn",
        "layers.1.attn",
    ]
    tree = scope_tree(back.frame()).set_index("scope")
    assert tree.loc["layers", ["own", "fused"]].tolist() == [1, 1]
    assert tree.loc["layers.1.attn", ["own", "fused"]].tolist() == [1, 0]
    assert scope_tree(back.frame(), depth=1).set_index("scope").loc["layers", "fused"] == 1


class MaskedAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.q = nn.Linear(16, 16)

    def forward(self, x, mask):
        q = self.q(x).view(1, 2, 4, 8)  # [B, H, T, D]
        return torch.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=mask)


class MaskMaker(nn.Module):
    """HF's layout in small: the mask is made in the parent, the attention in its child."""

    def __init__(self) -> None:
        super().__init__()
        self.attn = MaskedAttention()

    def forward(self, x):
        mask = torch.ones(4, 4, dtype=torch.bool).tril()[None, None]  # made here, in the parent
        return self.attn(x, mask)


def test_an_extern_call_goes_to_the_module_that_made_it_not_to_its_inputs_makers():
    # Inductor lists the views and masks it folds into an extern call's arguments among
    # its origins; the attention is attn's, though the mask came from the parent.
    torch._dynamo.reset()
    net = torch.compile(nn.Sequential(MaskMaker()).eval(), fullgraph=True)
    with collecting() as log, torch.no_grad():
        net(torch.randn(1, 4, 16))
    entries = log.graphs[0].entries
    attention = [e for e in entries if "scaled_dot_product" in e.name and "." in e.name]
    externs = [e for e in attention if e.name.startswith(("torch.ops.", "extern_kernels."))]
    assert externs and all(e.modules == ("0.attn",) for e in externs), entries


def test_extern_anchors():
    from graph_harness.capture.scopes.provenance import extern_anchors

    ops = {"mm_1": "aten.mm.default", "view": "aten.view.default", "sdpa": "aten._sdpa.default"}
    assert extern_anchors("extern_kernels.mm", ["view", "mm_1"], ops) == ["mm_1"]
    assert extern_anchors("torch.ops.aten._sdpa.default", ["view", "sdpa"], ops) == ["sdpa"]
    assert extern_anchors("triton_poi_fused_mm_view_0", ["view", "mm_1"], ops) == []  # fused
    assert extern_anchors("extern_kernels.bmm", ["view"], ops) == []  # no anchor: all count
