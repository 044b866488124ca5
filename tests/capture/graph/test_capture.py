"""The decode round: variants agree bit for bit; nodes are counted and attributed."""

import dataclasses
import gc
import json

import pytest
import torch

from graph_harness.capture import (
    STEPS,
    VARIANTS,
    CaptureError,
    DecodeRound,
    ExportError,
    NodeExport,
    RoundParams,
    capture_and_count,
    count_round,
    scope,
    summarize,
)
from graph_harness.pools import GraphBufferPool
from tests.exact import assert_bits_equal, poison_

SMALL = RoundParams(stages=3, rows=4, k=64, world=4, rank=2, shard=256, seed=7)


def eager_outputs(params, variant, device):
    rnd = DecodeRound(params, variant, device)
    for t in rnd.outputs().values():
        poison_(t)
    rnd.run()
    return {k: v.clone() for k, v in rnd.outputs().items()}


@pytest.mark.parametrize("variant", [v for v in VARIANTS if v != "shipped-compiled"])
def test_variants_agree_on_cpu(variant):
    expected = eager_outputs(SMALL, "shipped", "cpu")
    got = eager_outputs(SMALL, variant, "cpu")
    for name in expected:
        assert_bits_equal(got[name], expected[name], name)
    counts = torch.stack([got[f"stage{s}.counts"] for s in range(SMALL.stages)])
    assert (counts > 0).any() and (counts < SMALL.k).all(), "a round with local records"
    assert (got["stage0.slot"][0, :, 1].view(torch.int32) == -1).any(), "dead entries"


def test_compiled_variant_agrees_on_cpu():
    p = RoundParams(stages=1, rows=2, k=32, world=2, rank=1, shard=64, seed=3)
    expected = eager_outputs(p, "shipped", "cpu")
    got = eager_outputs(p, "shipped-compiled", "cpu")
    for name in expected:
        assert_bits_equal(got[name], expected[name], name)


def test_cpu_dispatch_count_structure():
    exports = {v: count_round(SMALL, v, "cpu").export for v in VARIANTS}
    for v, e in exports.items():
        assert e.source == "cpu-dispatch" and e.variant == v
        df = e.frame()
        # known by construction, per stage: topk 3, pack 10 ops (1 fused or compiled),
        # select 3, compaction 1, and 2 copies where compaction allocates then copies
        pack = 10 if VARIANTS[v][0] not in ("fused", "compiled") else 1
        copies = 2 if VARIANTS[v][1] == "alloc-copy" else 0
        assert len(df) == e.total == SMALL.stages * (3 + pack + 3 + 1 + copies)
        assert set(df["step"]) <= set(STEPS)  # every op of the round lies in a scope
        per = df.groupby(["stage", "step"]).size()
        for s in range(SMALL.stages):
            pack = per.get((s, "pack"), 0)
            if VARIANTS[v][0] == "fused":
                assert (
                    pack == 1 and (df[(df.stage == s) & (df.step == "pack")].type == "triton").all()
                )
            elif VARIANTS[v][0] == "compiled":
                assert (
                    pack == 1
                    and (df[(df.stage == s) & (df.step == "pack")].type == "compiled").all()
                )
            else:
                # the eight ops, plus the two scalar tensors torch.where wraps its scalars in
                names = df[(df.stage == s) & (df.step == "pack")].kernel.tolist()
                assert pack == 10, names
                assert names.count("aten.scalar_tensor.default") == 2
            assert per.get((s, "compaction"), 0) == 1
            assert per.get((s, "copy"), 0) == (2 if VARIANTS[v][1] == "alloc-copy" else 0)
            assert per.get((s, "gather"), 0) == 0
    # shipped -> fused removes 9 pack dispatches and 2 copies per stage
    assert exports["shipped"].total - exports["fused"].total == SMALL.stages * (9 + 2)
    assert exports["shipped"].total - exports["direct-compaction"].total == SMALL.stages * 2


def test_export_roundtrip_and_schema(tmp_path):
    e = count_round(SMALL, "fused", "cpu").export
    path = e.write_json(tmp_path / "nodes.json")
    doc = json.loads(path.read_text())
    assert doc["schema"] == "graph-harness/nodes" and doc["schema_version"] == 3
    assert doc["source"] == "cpu-dispatch" and doc["params"] == SMALL.as_dict()
    assert doc["total_nodes"] == e.total and {"torch", "triton", "device"} <= set(doc["env"])
    back = NodeExport.read_json(path)
    assert back.frame().equals(e.frame())
    # the fused round's count by construction (test_cpu_dispatch_count_structure): per stage
    # topk 3, pack 1, select 3, compaction 1, no copies; 3 stages
    want = SMALL.stages * (3 + 1 + 3 + 1)
    sums = summarize(back)
    assert e.total == want and sums["per_step"]["nodes"].sum() == want
    assert sums["per_stage_step"].to_numpy().sum() == want
    dot = e.write_dot(tmp_path / "g.dot").read_text()
    assert dot.startswith("digraph") and dot.count("->") >= e.total - 1
    assert not list(tmp_path.glob(".*tmp")), "no temporary files left"
    bad = dict(doc, schema_version=99)
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    with pytest.raises(ExportError, match="schema version 99"):
        NodeExport.read_json(tmp_path / "bad.json")
    (tmp_path / "junk.json").write_text("{not json")
    with pytest.raises(ExportError, match="cannot read export"):
        NodeExport.read_json(tmp_path / "junk.json")


@pytest.mark.parametrize(
    "change,message",
    [
        (dict(k=300), "k=300 must be <= shard=256"),
        (dict(rank=4), r"rank must be in \[0, world=4\)"),
        (dict(stages=0), "stages must be an int from 1 to 100,000, got 0"),
        (dict(rows=-1), "rows must be an int from 1 to 100,000, got -1"),
        (dict(world=2.0), "world must be an int from 1 to 100,000, got 2.0"),
        (dict(shard=2**31, k=1), "shard must be an int from 1 to 2,147,483,647"),
        (dict(rows=10**23), "rows must be an int from 1 to 100,000"),  # a typo, not a round
        (dict(seed=2**64), "seed must be an int from 0 to 18,446,744,073,709,551,615"),
        (dict(seed=True), "seed must be an int"),
    ],
)
def test_bad_params(change, message):
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(SMALL, **change)


def test_unknown_variant():
    with pytest.raises(ValueError, match="unknown variant 'fastest'; choose one of: shipped"):
        DecodeRound(SMALL, "fastest", "cpu")


def test_capture_and_count_user_callable_cpu():
    pool = GraphBufferPool("cpu", poison=True)
    x = pool.carve("x", (16,), torch.float32)  # [16] input
    y = pool.carve("y", (16,), torch.float32)  # [16] output
    x.copy_(torch.randn(16))

    def step():
        with scope("mlp"):
            torch.mul(x, 2.0, out=y)
            y.add_(1.0)
        y.relu_()

    e = capture_and_count(step, pool=pool, device="cpu")
    assert pool.frozen
    df = e.frame()
    assert e.workload.startswith("callable:") and e.source == "cpu-dispatch"
    assert df.groupby("step").size().to_dict() == {"mlp": 2, "unscoped": 1}


def test_round_nodes_carry_their_scope_columns():
    df = count_round(SMALL, "shipped", "cpu").export.frame()
    # the round's scopes are flat: each node's path is its one (stage, step) scope
    labels = [f"stage{s}/{t}" for s, t in zip(df["stage"], df["step"])]
    assert df["scope"].tolist() == labels
    assert df["scope_path"].map(tuple).tolist() == [(x,) for x in labels]


def test_version_1_exports_are_read(tmp_path):
    e = count_round(SMALL, "fused", "cpu").export
    doc = json.loads(json.dumps(e.to_dict()))  # a copy: to_dict shares the node dicts
    doc["schema_version"] = 1
    for n in doc["nodes"]:
        del n["scope"], n["scope_path"]
    doc["nodes"][0].update(stage=None, step="unscoped")  # an unscoped node, as v1 wrote it
    back = NodeExport.from_dict(doc)
    assert back.nodes[0]["scope"] == "unscoped" and back.nodes[0]["scope_path"] == []
    assert [n["scope"] for n in back.nodes[1:]] == [n["scope"] for n in e.nodes[1:]]
    assert back.to_dict()["schema_version"] == 3


def test_scope_path_must_end_in_the_scope():
    doc = count_round(SMALL, "fused", "cpu").export.to_dict()
    doc["nodes"][2]["scope_path"] = ["stage0/other"]
    with pytest.raises(ExportError, match=r"nodes\[2\]\.scope_path: expected .* last"):
        NodeExport.from_dict(doc)


# --- on the GPU ------------------------------------------------------------------


def replay_poisoned(counted):
    """Poison the round's outputs and replay its graph: the outputs after."""
    outs = counted.round.outputs()
    for t in outs.values():
        poison_(t)
    counted.captured.graph.replay()
    torch.cuda.synchronize()
    return outs


@pytest.mark.gpu
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_replay_matches_eager_and_shipped(variant):
    # Poison the outputs, replay the captured graph, compare with the eager shipped round:
    # proves the work was captured on the right stream and every element written.
    expected = eager_outputs(SMALL, "shipped", "cuda")
    outs = replay_poisoned(count_round(SMALL, variant, "cuda"))
    for name in expected:
        assert_bits_equal(outs[name], expected[name], f"{variant} {name}")
    again = eager_outputs(SMALL, variant, "cuda")
    for name in expected:
        assert_bits_equal(again[name], expected[name], f"{variant} eager {name}")


@pytest.mark.gpu
def test_graph_count_matches_what_the_gpu_ran(tmp_path):
    # Another route to the same count: replay the graph under CUPTI (torch.profiler) and
    # count the device activities it ran, one per kernel, memcpy and memset node; the
    # kernels' names must match the export's, demangled, as multisets.
    import json
    from collections import Counter

    from torch.profiler import ProfilerActivity, profile

    counted = count_round(SMALL, "shipped", "cuda")
    e = counted.export
    assert e.source == "cuda-graph"
    g = counted.captured.graph
    g.replay()  # instantiates; outside the profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        g.replay()
        torch.cuda.synchronize()
    prof.export_chrome_trace(str(tmp_path / "trace.json"))
    events = json.loads((tmp_path / "trace.json").read_text())["traceEvents"]
    ran = [
        ev
        for ev in events
        if ev.get("ph") == "X" and ev.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
    ]

    # The driver may run a device-to-device memcpy node as its own copy kernel: on the
    # H200 (driver 580) CUPTI files it under "kernel" as `memcpy32_post`. Sort by name too.
    def kind(ev) -> str:
        if ev["cat"] == "gpu_memcpy" or ev["name"].lower().startswith("memcpy"):
            return "memcpy"
        if ev["cat"] == "gpu_memset" or ev["name"].lower().startswith("memset"):
            return "memset"
        return "kernel"

    types = Counter(n["type"] for n in e.nodes)
    assert len(ran) == types["kernel"] + types["memcpy"] + types["memset"], (len(ran), types)
    kinds = Counter(kind(ev) for ev in ran)
    assert kinds == Counter({t: types[t] for t in ("kernel", "memcpy", "memset") if types[t]}), (
        Counter((ev["cat"], ev["name"][:50]) for ev in ran)
    )
    ran_names = Counter(ev["name"] for ev in ran if kind(ev) == "kernel")
    ours = Counter(torch._C._demangle(n["kernel"]) for n in e.nodes if n["type"] == "kernel")
    assert ran_names == ours
    df = e.frame()
    assert (df["step"] != "unscoped").all(), df[df.step == "unscoped"]
    per = df.groupby(["stage", "step"]).size()
    for s in range(SMALL.stages):
        assert per.get((s, "copy"), 0) == 2  # the allocating path's two copies
        assert per.get((s, "gather"), 0) == 0
    fused = count_round(SMALL, "fused", "cuda").export.frame()
    fp = fused.groupby(["stage", "step"]).size()
    for s in range(SMALL.stages):
        assert fp.get((s, "pack")) == 1 and fp.get((s, "copy"), 0) == 0
        pack_kernels = fused[(fused.stage == s) & (fused.step == "pack")].kernel.tolist()
        assert pack_kernels == ["_pack_flat_kernel"]


@pytest.mark.gpu
def test_capture_failure_names_scope_and_recovers():
    pool = GraphBufferPool("cuda")
    x = pool.carve("x", (8,), torch.float32)
    x.copy_(torch.randn(8, device="cuda"))

    def bad():
        with scope("sync", stage=3):
            x.sum().item()

    # the op, its scope and the class of failure, first (capture/graph/diagnose/failure.py)
    read_back = r"^aten\._local_scalar_dense in scope stage3/sync: a value read back to the host"
    with pytest.raises(CaptureError, match=read_back):
        capture_and_count(bad, pool=pool, warmup=0)

    def frozen():
        with scope("alloc", stage=1):
            pool.carve("late", (8,), torch.float32)

    frozen_pool = r"^GraphBufferPool\.carve in scope stage1/alloc: an allocation from a frozen"
    with pytest.raises(CaptureError, match=frozen_pool + ".*PoolFrozen"):
        capture_and_count(frozen, warmup=0)
    # and the process can capture again
    e = capture_and_count(lambda: x.mul_(2.0), warmup=0)
    assert e.total == 1 and e.source == "cuda-graph"


@pytest.mark.gpu
def test_a_failed_capture_leaves_random_numbers_working_and_unmoved():
    # A failed capture left the default generator marked as capturing (torch 2.11 on the
    # H200): every random op after it raised. The generator is put back, not moved.
    x = torch.randn(8, device="cuda")
    before = torch.cuda.get_rng_state()

    def bad():
        x.sum().item()

    with pytest.raises(CaptureError):
        capture_and_count(bad, warmup=0)
    assert torch.equal(torch.cuda.get_rng_state(), before)
    a = torch.randn(64, device="cuda")  # raised before the fix
    torch.cuda.set_rng_state(before)
    assert torch.equal(torch.randn(64, device="cuda"), a)


@pytest.mark.gpu
def test_shared_pool_outlives_its_graphs():
    # Graphs sharing one memory pool come and go (a node-count probe, then the real
    # capture): capturing into the pool after every earlier graph died must work.
    from graph_harness.capture import capture_graph

    graph_pool = torch.cuda.graph_pool_handle()
    x = torch.randn(64, device="cuda")
    first = capture_graph(lambda: x.mul(2.0), graph_pool=graph_pool)
    del first
    gc.collect()
    y = x.clone()
    again = capture_graph(lambda: y.add_(1.0), graph_pool=graph_pool)
    again.graph.replay()
    torch.cuda.synchronize()
    expected = x.clone()
    for _ in range(3 + 1):  # three warm-up calls, one replay
        expected.add_(1.0)
    assert torch.equal(y, expected)


@pytest.mark.gpu
def test_default_stream_refused():
    from graph_harness.capture import capture_graph

    with pytest.raises(ValueError, match="default stream"):
        capture_graph(lambda: None, stream=torch.cuda.default_stream())


@pytest.mark.gpu
def test_pdl_round_is_exact_and_sets_pdl_only_behind_a_signalling_kernel():
    expected = eager_outputs(SMALL, "shipped", "cuda")
    counted = count_round(SMALL, "fused", "cuda", pdl=True)
    outs = replay_poisoned(counted)
    for name in expected:
        assert_bits_equal(outs[name], expected[name], f"pdl {name}")
    e = counted.export
    assert e.options == {"pdl": True, "distributed": False}
    ours = {"_pack_flat_kernel", "_compaction_kernel"}
    mine = [n for n in e.nodes if n["kernel"] in ours]
    # Read from the graph, independently of the gating: no kernel of ours follows another
    # of ours in the round (each follows a torch kernel, which never signals) ...
    assert mine and all(e.nodes[d]["kernel"] not in ours for n in mine for d in n["deps"])
    # ... so none was launched with PDL: the round is the plain one, edge for edge
    assert not any(n.get("programmatic_deps") for n in e.nodes)
    plain = count_round(SMALL, "fused", "cuda").export
    assert plain.total == e.total
    assert [n["deps"] for n in plain.nodes] == [n["deps"] for n in e.nodes]


@pytest.mark.gpu
def test_pdl_kept_behind_our_signalling_launch_and_dropped_behind_torch():
    from graph_harness.capture import capture_graph
    from graph_harness.capture.graph.reader import read_graph
    from graph_harness.kernels.empty import empty_kernel

    x = torch.zeros(1, device="cuda")
    y = torch.randn(4, device="cuda")

    def step():
        y.add_(1.0)  # torch: never signals
        for _ in range(3):
            empty_kernel.launch(x.device, (1,), x, num_warps=1, pdl=True)
        y.add_(1.0)
        empty_kernel.launch(x.device, (1,), x, num_warps=1, pdl=True)
        empty_kernel.launch(x.device, (1,), x, num_warps=1)  # not a PDL kernel: plain

    before = y.clone()
    captured = capture_graph(step)
    nodes = read_graph(captured.graph.raw_cuda_graph())
    kinds = [("ours" if "empty_kernel" in n.kernel else "torch") for n in nodes]
    assert kinds == ["torch", "ours", "ours", "ours", "torch", "ours", "ours"], kinds
    assert [bool(n.programmatic_deps) for n in nodes] == [0, 0, 1, 1, 0, 0, 0]
    captured.graph.replay()
    torch.cuda.synchronize()
    expected = before.clone()
    for _ in range(2 * (3 + 1)):  # two adds per call: three warm-up calls, one replay
        expected.add_(1.0)
    assert torch.equal(y, expected)


def test_structure_tells_two_builds_alike_and_two_variants_apart():
    """NodeExport.structure, the one "same graph" check (profile builds, distributed
    ranks): two fresh builds of one round agree; another variant, or a node's scope
    moved, does not."""
    first, again = (count_round(SMALL, "fused", "cpu").export for _ in range(2))
    assert first is not again and first.structure() == again.structure()
    assert first.structure() != count_round(SMALL, "shipped", "cpu").export.structure()
    moved = NodeExport.from_dict(first.to_dict())
    moved.nodes[0]["scope_path"] = ["elsewhere"]
    assert moved.structure() != first.structure()
    assert first.counts("step").sum() == first.total == first.per_stage_step().to_numpy().sum()


def test_an_inductor_failure_on_the_shipped_pack_is_one_line(monkeypatch, tmp_path):
    # On the H200 (torch 2.11), a Python-int rank or dynamic=True makes Inductor fail in
    # its generated Triton code; here torch.compile gives a function that fails so.
    from torch._inductor.exc import InductorError

    from graph_harness.capture.round.decode import compiled_shipped_pack
    from tests.in_process import _run

    class Failed(InductorError):
        def __init__(self, message):
            Exception.__init__(self, message)

    def compile_that_fails(fn, **kwargs):
        def compiled(*args, **kw):
            raise Failed("CompilationError: at 12:4:\nCannot bitcast data-type of size 64 to 32")

        return compiled

    compiled_shipped_pack.cache_clear()
    monkeypatch.setattr(torch, "compile", compile_that_fails)
    try:
        small = ["--stages", "1", "--rows", "2", "--k", "32", "--world", "2", "--shard", "64"]
        argv = ["count", *small, "--variant", "shipped-compiled", "--out", "out"]
        code, out, err = _run(argv, tmp_path)
    finally:
        compiled_shipped_pack.cache_clear()  # the next test compiles for real
    line = err.splitlines()[-1]
    assert code == 1 and out == "" and not (tmp_path / "out").exists(), err
    assert line.startswith(
        "graph-harness count: error: CompileError: the shipped pack could "
        "not be compiled by Inductor on torch "
    ), line
    assert "CompilationError: at 12:4: ... Cannot bitcast data-type of size 64 to 32" in line
    assert "--variant shipped --variant fused" in line and "Traceback" not in err, err
