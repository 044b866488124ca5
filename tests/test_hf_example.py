"""examples/hf_decode.py: a transformers decode step, counted by module, and its reset.

The CPU tests run the tiny preset (transformers is in the [test] extra, so CI runs them);
counts are checked by other routes: the same step counted without scopes, and one
decoder layer run alone under the dispatch counter."""

import importlib.util
import json
import sys
from collections import Counter
from pathlib import Path

import pytest
import torch

from graph_harness.capture import capture_and_count, capture_graph, module_scopes
from graph_harness.capture.attribution.records import nodes_from_dispatch
from graph_harness.capture.attribution.rollup import per_scope, scope_tree
from graph_harness.capture.export.nodes import NodeExport
from graph_harness.capture.graph.dispatch import DispatchCounter
from graph_harness.capture.graph.node_types import NON_LAUNCHING
from graph_harness.capture.scopes.recorder import Recorder, recording
from tests.command_line import run
from tests.exact import assert_bits_equal
from tests.independent import snake, walk_graph

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "hf_decode.py"


def load_example():
    spec = importlib.util.spec_from_file_location("hf_decode_example", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def cache_state(cache) -> list[torch.Tensor]:
    """Every tensor of the cache's state, cloned: each layer's keys, values, position."""
    return [
        t.detach().clone()
        for layer in cache.layers
        for t in (layer.keys, layer.values, layer.cumulative_length)
    ]


def addresses(cache) -> list[int]:
    return [t.data_ptr() for layer in cache.layers for t in (layer.keys, layer.values)]


def positions(cache) -> list[int]:
    return [int(layer.cumulative_length) for layer in cache.layers]


def test_tiny_step_advances_and_its_reset_returns_it_to_a_fresh_build():
    ex = load_example()
    fresh = ex.make_step(preset="tiny", device="cpu")
    first, second = fresh().clone(), fresh().clone()
    assert positions(fresh.cache) == [2, 2], "each call advances every layer's position"
    assert not torch.equal(first, second), "the second token attends to two positions"

    step = ex.make_step(preset="tiny", device="cpu")
    at_start = cache_state(step.cache)
    where = addresses(step.cache)
    for _ in range(5):
        step()
    moved = cache_state(step.cache)
    assert positions(step.cache) == [5, 5]
    assert not all(torch.equal(a, b) for a, b in zip(moved, at_start)), "state was written"
    step.reset()
    assert addresses(step.cache) == where, "reset allocates nothing: same addresses"
    for i, (got, want) in enumerate(zip(cache_state(step.cache), at_start)):
        assert_bits_equal(got, want, f"cache tensor {i} after reset")
    # and from there it computes what a fresh build computes, bit for bit
    assert_bits_equal(step(), first, "first logits after reset")
    assert_bits_equal(step(), second, "second logits after reset")


def test_tiny_step_counts_by_module_on_the_cpu():
    ex = load_example()
    r = run("count", "--target", f"{EXAMPLE}:make_tiny_step", "--module-scopes", "3", "--json")
    assert r.returncode == 0, r.stderr
    (doc,) = json.loads(r.stdout)["exports"].values()
    export = NodeExport.from_dict(doc)
    df = export.frame()
    assert export.source == "cpu-dispatch" and len(df) == export.total > 0
    for depth in (1, 2, 3, None):
        assert per_scope(df, depth).sum() == export.total
    tree = scope_tree(df, 3).set_index("scope")
    n_layers = ex.PRESETS["tiny"]["num_hidden_layers"]
    per_layer = [tree.loc[f"model.layers.{i}", "nodes"] for i in range(n_layers)]
    assert tree.loc["model.layers", "nodes"] == sum(per_layer)

    # Another route to the total: the same step counted in this process, no scopes.
    plain = capture_and_count(ex.make_step(preset="tiny", device="cpu"), device="cpu")
    assert plain.total == export.total

    # Another route to each layer: decoder layer 0 run alone under the dispatch counter,
    # with the arguments the model passed it (recorded by a hook during one call).
    step = ex.make_step(preset="tiny", device="cpu")
    model = step.module
    seen = {}
    layer = model.model.layers[0]
    hook = layer.register_forward_pre_hook(
        lambda m, args, kwargs: seen.setdefault("call", (args, kwargs)), with_kwargs=True
    )
    step()
    hook.remove()
    step.reset()
    args, kwargs = seen["call"]
    with torch.no_grad(), recording(Recorder()), DispatchCounter() as counter:
        layer(*args, **kwargs)
    alone = sum(n["type"] not in NON_LAUNCHING for n in nodes_from_dispatch(counter.records))
    assert alone > 10 and per_layer == [alone] * n_layers, (per_layer, alone)


def test_cache_argument_matches_the_installed_transformers():
    ex = load_example()
    step = ex.make_step(preset="tiny", device="cpu")
    name = ex.cache_argument(step.module)
    import inspect

    params = inspect.signature(type(step.module).forward).parameters
    assert name in params, (name, list(params))


# --- on the GPU ------------------------------------------------------------------


def bits(t: torch.Tensor) -> torch.Tensor:
    """The tensor's bits as integers (bf16 and fp16 as int16, fp32 as int32)."""
    if t.dtype in (torch.bfloat16, torch.float16):
        return t.view(torch.int16)
    return t.view(torch.int32) if t.dtype == torch.float32 else t


@pytest.mark.gpu
@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_hf_example_counted_exactly_by_module(compiled):
    ex = load_example()
    step = ex.make_step(compiled=compiled)
    # every level: the compile happens in the warm-up inside, so provenance is recorded
    with module_scopes(step.module):
        e = capture_and_count(step)
        step.reset()
        captured = capture_graph(step)  # the same step again, for the other route
    step.reset()
    assert e.source == "cuda-graph" and e.options["compiled"] is compiled
    walked = walk_graph(captured.graph.raw_cuda_graph())
    assert Counter({snake(k): v for k, v in walked.items()}) == Counter(
        n["type"] for n in e.nodes
    ), walked
    df = e.frame()
    for depth in (1, 2, 3, None):
        assert per_scope(df, depth).sum() == e.total
    tree = scope_tree(df, 3).set_index("scope")
    n_layers = ex.PRESETS["small"]["num_hidden_layers"]
    per_layer = [tree.loc[f"model.layers.{i}", "nodes"] for i in range(n_layers)]
    # The container's own nodes: none eager; compiled, only kernels Inductor fused across
    # its layers, placed at their deepest common module and marked with the modules fused.
    own = [n for n in e.nodes if n["scope"] == "model.layers" and n["parent"] is None]
    assert tree.loc["model.layers", "nodes"] == sum(per_layer) + len(own)
    assert all(len(n.get("fused_modules") or []) >= 2 for n in own), own
    if not compiled:
        assert not own, own
        assert len(set(per_layer)) == 1, per_layer  # every layer is the same work
        assert tree.loc["(all)", "own"] < 0.05 * e.total
    else:
        # Inductor's provenance puts the compiled kernels back in their modules: each
        # Linear is one extern matmul, a node of its own in exactly its module's scope.
        assert e.options["compiled_attribution"].startswith("inductor provenance")
        linears = [q for q, m in step.module.named_modules() if isinstance(m, torch.nn.Linear)]
        by_scope = Counter(n["scope"] for n in e.nodes if n["parent"] is None)
        for q in linears:
            assert by_scope[q] == 1, (q, by_scope)
            (mm,) = [n for n in e.nodes if n["scope"] == q]
            assert not mm["kernel"].startswith("triton_"), mm


@pytest.mark.gpu
def test_hf_compiled_step_has_fewer_nodes_than_eager():
    ex = load_example()
    totals = {}
    for compiled in (False, True):
        step = ex.make_step(compiled=compiled)
        totals[compiled] = capture_and_count(step).total
        step.reset()
    assert 0 < totals[True] < totals[False], totals


@pytest.mark.gpu
def test_hf_step_reset_on_the_gpu_restores_state_bit_for_bit():
    ex = load_example()
    step = ex.make_step()
    at_start = cache_state(step.cache)
    where = addresses(step.cache)
    first = step().clone()
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    assert positions(step.cache) == [4] * ex.PRESETS["small"]["num_hidden_layers"]
    step.reset()
    assert addresses(step.cache) == where
    for i, (got, want) in enumerate(zip(cache_state(step.cache), at_start)):
        assert torch.equal(bits(got), bits(want)), f"cache tensor {i} after reset"
    # the same kernels on the same state: the same bits
    assert torch.equal(bits(step()), bits(first)), "first logits after reset"


# --- the HF step through the commands that replay it (GPU) ---------------------------------


@pytest.mark.gpu
def test_hf_example_checked_and_profiled_eager_and_compiled(tmp_path):
    # The stateful step, eager and compiled, through `profile --check`: both graphs compute
    # what their steps compute, and every activity CUPTI saw in every replay is matched to
    # its node (the step is reset before each run of replays: its cache never fills).
    r = run(
        "profile",
        "--target",
        f"{EXAMPLE}:make_step",
        "--target",
        f"{EXAMPLE}:make_compiled_step",
        "--module-scopes",
        "--check",
        "--json",
        cpu=False,
    )
    assert r.returncode == 0, r.stderr
    assert "CUDA error" not in r.stderr, r.stderr
    doc = json.loads(r.stdout)
    assert {c["name"].rpartition(":")[2]: c["passed"] for c in doc["checks"].values()} == {
        "make_step": True,
        "make_compiled_step": True,
    }, doc["checks"]
    # over a trajectory of four calls, a new token fed at each
    assert all(c["fed"] and c["steps"] == 4 for c in doc["checks"].values()), doc["checks"]
    for name, m in doc["matching"].items():
        assert m["verified"] and m["unmatched_activities"] == 0 == m["unmatched_nodes"], (name, m)
    layers = {s["scope"] for s in doc["scopes"]}
    assert {f"model.layers.{i}" for i in range(4)} <= layers, layers


@pytest.mark.gpu
def test_hf_example_report_on_the_gpu(tmp_path):
    out = tmp_path / "report"
    r = run(
        "report",
        "--target",
        f"{EXAMPLE}:make_step",
        "--module-scopes",
        "--out",
        str(out),
        cpu=False,
    )
    assert r.returncode == 0, r.stderr
    md = (out / "report.md").read_text()
    assert "model.layers.3" in md and "dispatch" in md.lower(), md[:2000]


@pytest.mark.gpu
def test_hf_step_without_its_reset_is_refused_before_any_replay(tmp_path):
    # The failure: replayed without its reset, the HF step's cache filled past its
    # end (a device-side assert, the CUDA context lost). Now: one line, exit 2.
    target = tmp_path / "no_reset.py"
    target.write_text(
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('hf_example', {str(EXAMPLE)!r})\n"
        "hf = importlib.util.module_from_spec(spec); sys.modules[spec.name] = hf\n"
        "spec.loader.exec_module(hf)\n"
        "def make_step():\n"
        "    step = hf.make_step()\n"
        "    del step.reset\n"
        "    return step\n"
    )
    r = run("profile", "--target", f"{target}:make_step", "--module-scopes", cpu=False)
    assert r.returncode == 2, r.stderr
    (line,) = [x for x in r.stderr.splitlines() if "error:" in x]
    assert "does not repeat and has no step.reset" in line and "past_key_values" in line, line
    assert "CUDA error" not in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_a_growing_dynamic_cache_is_told_to_use_a_static_one():
    from transformers import DynamicCache

    from graph_harness.capture import check_step
    from graph_harness.capture.state.steps import StepStateError

    ex = load_example()
    model, _ = ex.build("tiny", torch.device("cpu"))
    token = torch.tensor([[3]])
    cache = DynamicCache()
    kwargs = {"input_ids": token, ex.cache_argument(model): cache, "use_cache": True}

    @torch.no_grad()
    def step():
        return model(**kwargs).logits

    with pytest.raises(StepStateError) as e:
        check_step(step, device="cpu")
    line = str(e.value)
    assert "its state grows at every call" in line and "use a static cache" in line, line
    assert "StaticCache" in line and "give the step a reset" not in line


def test_the_feed_writes_each_calls_token_in_place():
    ex = load_example()
    step = ex.make_step(preset="tiny", device="cpu")
    where = step.token.data_ptr()
    first = step().clone()
    step.reset()
    step.feed(1)
    assert step.token.data_ptr() == where, "fed in place: a graph keeps reading the buffer"
    second = step()
    assert not torch.equal(first, second), "another token, other logits"
    step.reset()
    step.feed(0)
    assert torch.equal(step(), first), "call 0's token again: the same logits"


@pytest.mark.parametrize("arch", ["qwen2", "qwen2_moe"])
def test_the_qwen2_steps_decode_and_reset_like_the_llama_one(arch):
    # the dense and the MoE model the prediction's benchmark sweeps (bench_predict.py):
    # built from a config, batch rows, the cache advanced per call and reset in place
    ex = load_example()
    step = ex.make_step(preset="tiny", device="cpu", batch=3, arch=arch)
    assert type(step.module).__name__ == {"qwen2": "Qwen2ForCausalLM",
                                          "qwen2_moe": "Qwen2MoeForCausalLM"}[arch]  # fmt: skip
    first = step().clone()
    assert first.shape == (3, 1, step.module.config.vocab_size)
    step()
    assert positions(step.cache) == [2, 2]
    step.reset()
    assert_bits_equal(step(), first, f"{arch}: first logits after reset")
    if arch == "qwen2_moe":  # static shapes: its experts gathered per token, no host sync
        assert step.module.config._experts_implementation == "batched_mm"
