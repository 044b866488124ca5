"""A graph's life beyond its replays (capture/graph/lifecycle.py): refusals and the
driver's answers read on the CPU; capture, instantiate, upload, update and executable
memory on a GPU."""

import pytest
import torch

from graph_harness.capture.graph import lifecycle as L


def test_without_cuda_it_says_what_it_needs(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(RuntimeError, match="instantiate, upload and update.*need CUDA"):
        L.measure_lifecycle(lambda: None)


def test_the_drivers_answer_to_an_update_is_said_as_it_is():
    class Err(int):
        @property
        def name(self):
            return {0: "cudaSuccess", 910: "cudaErrorGraphExecUpdateFailure"}[int(self)]

    class Result:
        name = "cudaGraphExecUpdateErrorTopologyChanged"

    class Info:
        result = Result()

    cleared = []

    class Runtime:
        @staticmethod
        def cudaGetLastError():
            cleared.append(1)
            return (Err(0),)

    assert L.update_result(Runtime, (Err(0), Info())) == "success" and cleared == []
    assert L.update_result(Runtime, (Err(910), Info())) == "ErrorTopologyChanged"
    assert cleared == [1], "a refusal is cleared from the runtime that returned it"
    assert L.update_result(Runtime, (Err(910),)) == "cudaErrorGraphExecUpdateFailure"


@pytest.mark.gpu
def test_a_graphs_life_on_a_gpu():
    from graph_harness.capture.graph.capture import capture_graph
    from graph_harness.capture.graph.reader import read_graph

    x = torch.randn(1 << 16, device="cuda")

    def step():
        for _ in range(50):
            x.mul_(0.5).add_(1.0)

    life = L.measure_lifecycle(step, repeats=3)
    graph = capture_graph(step).graph  # held while read: a temporary's address dangles
    nodes = len(read_graph(graph.raw_cuda_graph()))
    assert life.nodes == nodes == 100, (life.nodes, nodes)
    assert life.update_result == "success"
    for k in ("capture", "instantiate", "upload", "update", "recapture"):
        assert len(life.samples[k]) == 3 and min(life.samples[k]) > 0, k
    # destroying the graph gives back what its executable held, to the driver's page; an
    # executable under a page is said to be unresolved, not read as free
    if life.exec_bytes >= L.PAGE:
        assert life.returned_bytes >= life.exec_bytes - L.PAGE, life
    else:
        assert life.below_a_page, life


@pytest.mark.gpu
def test_an_update_across_a_changed_topology_is_refused_and_the_graph_still_runs():
    x = torch.randn(1024, device="cuda")
    calls = [0]

    def step():  # one more node at every capture: no two captures share a topology
        calls[0] += 1
        for _ in range(2 + calls[0]):
            x.add_(1.0)

    life = L.measure_lifecycle(step, repeats=2, warmup=1)  # each round replays the old one
    assert life.update_result != "success", life.update_result
    assert len(life.samples["update"]) == 2, "a second round captures into a pool of its own"
