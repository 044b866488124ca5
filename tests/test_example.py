"""examples/llama_decode.py: a real model's decode step, eager and compiled, counted by
module. The CPU tests run the tiny preset; the GPU ones the 8-layer example, checked
against counts made by other routes (a walk of cudaGraphGetNodes written here, and what
CUPTI saw a replay run)."""

import json
import os
import subprocess
import sys
from collections import Counter

import pandas as pd
import pytest
import torch

from graph_harness.capture import capture_and_count, capture_graph, module_scopes
from graph_harness.capture.attribution.rollup import per_scope, scope_tree
from tests.independent import snake, walk_graph
from tests.llama_example import EXAMPLE, load_example


def test_tiny_step_writes_its_kv_at_the_position_only():
    ex = load_example()
    step = ex.make_step(preset="tiny", device="cpu")
    out = step()
    cfg = ex.PRESETS["tiny"]
    assert out.shape == (1, 1, cfg.vocab_size) and torch.isfinite(out).all()
    pos = int(step.inputs[1])
    for layer in step.module.layers:
        k = layer.attention.kv_cache.k_cache  # [B, Hkv, S, D]
        written = k.abs().sum(dim=(0, 1, 3)) != 0
        assert written.nonzero().flatten().tolist() == [pos]
    again = step()
    assert torch.equal(out, again), "a decode step at a fixed position is deterministic"


def test_tiny_step_module_scopes_sum_to_the_total():
    ex = load_example()
    step = ex.make_step(preset="tiny", device="cpu")
    plain = capture_and_count(step, device="cpu")
    with module_scopes(step.module):
        e = capture_and_count(step, device="cpu")
    df = e.frame()
    assert e.total == plain.total
    for depth in (1, 2, 3, 4):
        assert per_scope(df, depth).sum() == e.total
    tree = scope_tree(df).set_index("scope")
    cfg = ex.PRESETS["tiny"]
    per_layer = [tree.loc[f"layers.{i}", "nodes"] for i in range(cfg.n_layer)]
    assert len(set(per_layer)) == 1, "every layer is the same work"
    assert tree.loc["layers", "nodes"] == sum(per_layer)


# --- on the GPU ------------------------------------------------------------------


def replay_activities(graph, tmp_path) -> Counter:
    """What CUPTI saw one replay of `graph` run: kernels, memcpys and memsets."""
    from torch.profiler import ProfilerActivity, profile

    graph.replay()  # instantiates, outside the profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        graph.replay()
        torch.cuda.synchronize()
    trace = tmp_path / "trace.json"
    prof.export_chrome_trace(str(trace))
    cats = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
    return Counter(
        cats[ev["cat"]]
        for ev in json.loads(trace.read_text())["traceEvents"]
        if ev.get("ph") == "X" and ev.get("cat") in cats
    )


@pytest.mark.gpu
@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_example_counted_exactly_by_module(compiled, tmp_path):
    ex = load_example()
    step = ex.make_step(compiled=compiled)
    with module_scopes(step.module):
        e = capture_and_count(step)
        captured = capture_graph(step)  # the same step again, for the other routes
    assert e.source == "cuda-graph" and e.options["compiled"] is compiled
    types = Counter(n["type"] for n in e.nodes if n["parent"] is None)
    walked = walk_graph(captured.graph.raw_cuda_graph())
    assert Counter({snake(k): v for k, v in walked.items()}) == Counter(
        n["type"] for n in e.nodes
    ), (walked, types)
    ran = replay_activities(captured.graph, tmp_path)
    mine = Counter(n["type"] for n in e.nodes)
    assert ran["kernel"] == mine["kernel"] > 0, (ran, mine)
    assert ran["memcpy"] == mine["memcpy"] and ran["memset"] == mine["memset"]
    df = e.frame()
    for depth in (1, 2, 3, None):
        assert per_scope(df, depth).sum() == e.total
    tree = scope_tree(df).set_index("scope")
    if not compiled:
        # eager: every layer is the same work, and the layers hold nearly everything
        per_layer = [tree.loc[f"layers.{i}", "nodes"] for i in range(8)]
        assert len(set(per_layer)) == 1 and tree.loc["layers", "nodes"] == sum(per_layer)
        assert tree.loc["(all)", "own"] < 0.05 * e.total
    else:
        # the whole model compiled: Inductor's provenance puts its kernels back in their
        # modules. Checked by the model's structure: each Linear is one extern matmul, a
        # node of its own in exactly that module's scope (depth None: every level).
        assert e.options["compiled_attribution"].startswith("inductor provenance")
        linears = [q for q, m in step.module.named_modules() if isinstance(m, torch.nn.Linear)]
        by_scope = Counter(n["scope"] for n in e.nodes if n["parent"] is None)
        for q in linears:
            assert by_scope[q] == 1, (q, by_scope)
            (mm,) = [n for n in e.nodes if n["scope"] == q]
            assert not mm["kernel"].startswith("triton_"), mm
        for i in range(8):  # and each layer holds its attention and feed-forward work
            assert tree.loc[f"layers.{i}.attention", "nodes"] > 3
            assert tree.loc[f"layers.{i}.feed_forward", "nodes"] > 3
        assert tree.loc["(all)", "own"] < 0.1 * e.total
        fused = [n for n in e.nodes if "fused_modules" in n]
        assert fused and all(len(n["fused_modules"]) > 1 for n in fused)


@pytest.mark.gpu
def test_compiled_example_replays_like_eager_and_has_fewer_nodes():
    ex = load_example()
    outs, totals = {}, {}
    for compiled in (False, True):
        step = ex.make_step(compiled=compiled)
        holder = {}
        captured = capture_graph(lambda s=step, h=holder: h.__setitem__("y", s()))
        captured.graph.replay()
        torch.cuda.synchronize()
        outs[compiled] = holder["y"].float().clone()
        totals[compiled] = capture_and_count(step).total
    # bf16 through 8 layers, fused and rounded differently by Inductor: the same logits
    # direction, not the same bits (random weights make near-ties, so no argmax check)
    a, b = outs[True].flatten(), outs[False].flatten()
    assert torch.nn.functional.cosine_similarity(a, b, dim=0) > 0.99
    assert totals[True] < totals[False], totals


def test_bench_model_smoke(tmp_path):
    # the benchmark's CPU path runs end to end and writes what it says it writes
    bench = EXAMPLE.parents[1] / "benchmarks" / "bench_model.py"
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    r = subprocess.run(
        [sys.executable, str(bench), "--out", str(tmp_path), "--smoke"],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert r.returncode == 0, r.stderr
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["eager_nodes"] > 0 and summary["attribute_10k_nested_s"] > 0
    per_module = pd.read_csv(tmp_path / "per_module.csv")
    sums = per_module.groupby("depth").nodes.sum()
    assert (sums == summary["eager_nodes"]).all(), sums  # every depth sums to the total


def test_expand_kv_is_repeat_interleave():
    ex = load_example()
    x = torch.randn(2, 3, 5, 4)  # [B, Hkv, S, D]
    assert torch.equal(ex.expand_kv(x, 6), x.repeat_interleave(2, dim=1))


def test_the_feed_writes_a_token_and_a_position_in_place_and_the_reset_empties_the_cache():
    ex = load_example()
    step = ex.make_step(preset="tiny", device="cpu")
    idx, pos = step.inputs
    start = int(pos)
    first = step().clone()
    step.feed(2)
    assert int(pos) == start + 2 and step.inputs[0] is idx, "written in place"
    step()
    k = step.module.layers[0].attention.kv_cache.k_cache
    written = (k.abs().sum(dim=(0, 1, 3)) != 0).nonzero().flatten().tolist()
    assert written == [start, start + 2]
    step.reset()
    assert not k.any(), "the reset empties the caches"
    step.feed(0)
    assert int(pos) == start and torch.equal(step(), first)
