"""The repository's own kernels and examples under the `graph_check` fixture (the H200): each
kernel's graph against its eager launch over a trajectory of fresh random inputs fed
into its static buffers, and the examples' decode steps to the end of their caches. A
kernel test of one op is two lines (the last test); a decode step's, one."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

from graph_harness.kernels import pack_scores_ids, selected_local_records
from tests.kernels.inputs import make_indices, make_scores

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parents[2]
ROWS, K, WIDTH, RANK = 8, 1000, 4096, 1


def fed(step, feed):
    """`step` with `feed(i)` writing call i's inputs, in place (docs/steps-and-check.md)."""
    step.feed = feed
    return step


def test_the_pack_kernels_graph_over_fed_inputs(graph_check):
    idx = make_indices(ROWS, K, WIDTH, torch.int64, "cuda")
    scores = make_scores(ROWS, K, "cuda")
    out = torch.empty(ROWS, K, 2, device="cuda")

    def feed(i):  # fresh random inputs per call, the same for the same i
        torch.manual_seed(100 + i)
        idx.copy_(make_indices(ROWS, K, WIDTH, torch.int64, "cuda"))
        scores.copy_(make_scores(ROWS, K, "cuda"))

    step = fed(lambda: pack_scores_ids(idx, scores, RANK, WIDTH, out), feed)
    result = graph_check(step, steps=8)
    assert result.compared and result.outputs == 1 and result.fed


def test_the_compaction_kernels_graph_over_fed_inputs(graph_check):
    ids = make_indices(ROWS, K, WIDTH, torch.int32, "cuda")
    out = torch.empty(ROWS, K, dtype=torch.int32, device="cuda")
    counts = torch.empty(ROWS, dtype=torch.int32, device="cuda")

    def feed(i):
        torch.manual_seed(200 + i)
        ids.copy_(make_indices(ROWS, K, WIDTH, torch.int32, "cuda"))

    step = fed(lambda: selected_local_records(ids, RANK, WIDTH, out=out, count_out=counts), feed)
    result = graph_check(step, steps=8)
    assert result.compared and result.outputs == 2


def _example(name: str):
    spec = importlib.util.spec_from_file_location(f"{name}_gc", REPO / "examples" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # a dataclass in it looks its module up there
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("example", ["llama_decode", "hf_decode"])
def test_the_examples_to_the_end_of_their_caches(graph_check, example):
    if example == "hf_decode":
        pytest.importorskip("transformers")
    step = _example(example).make_step(preset="tiny")
    result = graph_check(step, steps="to-end", module=step.module)
    assert result.to_end and result.steps == step.max_steps


def pack_buffers(rows=4, k=64):
    """Static inputs and output of one pack: made once, outside the step."""
    idx, scores = make_indices(rows, k, WIDTH, torch.int64, "cuda"), make_scores(rows, k, "cuda")
    return idx, scores, torch.empty(rows, k, 2, device="cuda")


def test_a_kernel_in_two_lines(graph_check):
    idx, scores, out = pack_buffers()
    graph_check(lambda: pack_scores_ids(idx, scores, RANK, WIDTH, out))
