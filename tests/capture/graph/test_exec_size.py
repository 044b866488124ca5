"""One executable's bytes below the page (capture/graph/exec_size.py): on the CPU against a
driver that packs executables into 2 MiB pages and keeps pages from before (the arithmetic
of the jumps); on the GPU against N copies held at once, read as one drop."""

from __future__ import annotations

import pytest
import torch

from graph_harness.capture.graph import exec_size as X
from graph_harness.capture.graph.lifecycle import PAGE

MIB = 1 << 20


class PackingDriver:
    """cudaGraphInstantiateWithFlags / Upload / ExecDestroy / MemGetInfo as a driver that
    packs `each`-byte executables into pages, `kept` bytes of free pages held already;
    with `upload_each`, an upload's bytes go to pages of their own (two runs of pages)."""

    def __init__(self, each: int, kept: int, upload_each: int = 0):
        self.each, self.kept, self.upload_each = each, kept, upload_each
        self.used, self.pages = [0, 0], [0, 0]
        self.live = set()

    def _take(self, run: int, n: int) -> None:
        self.used[run] += n
        while self.used[run] > self.pages[run] * PAGE + (self.kept if run == 0 else 0):
            self.pages[run] += 1

    def cudaGraphInstantiateWithFlags(self, raw, flags):
        assert raw == "raw" and flags == X.AUTO_FREE_ON_LAUNCH
        self._take(0, self.each)
        handle = len(self.live) + 1
        while handle in self.live:
            handle += 1
        self.live.add(handle)
        return (0, handle)

    def cudaGraphUpload(self, ex, stream):
        if self.upload_each:
            self._take(1, self.upload_each)
        return (0,)

    def cudaGraphExecDestroy(self, ex):
        self.live.discard(ex)
        return (0,)

    def cudaMemGetInfo(self):
        return (0, (80 << 30) - sum(self.pages) * PAGE, 0)


class Stream:
    cuda_stream = 7

    def synchronize(self):
        pass


class Graph:
    def raw_cuda_graph(self):
        return "raw"


@pytest.mark.parametrize("each", [64 * 1024, 700_001, 2_490_368, 10 * MIB + 12345])
@pytest.mark.parametrize("kept", [0, 3 * MIB + 5])
@pytest.mark.parametrize("upload_share", [0.0, 0.3])
def test_the_bytes_of_one_executable_to_within_its_spread(monkeypatch, each, kept, upload_share):
    up = int(each * upload_share)
    drv = PackingDriver(each - up, kept, upload_each=up)
    monkeypatch.setattr(X, "runtime", lambda: drv)
    got = X.exec_size(Graph(), Stream())
    assert got.bytes is not None and got.spread is not None, got
    assert abs(got.bytes - each) <= got.spread, (got, each)
    assert got.spread <= (each + PAGE) / 12 + 1, got  # within the limits: 12 copies apart at least
    assert not drv.live  # every copy destroyed


def test_too_few_pages_within_the_limits_gives_a_bound_only(monkeypatch):
    drv = PackingDriver(4096, 0)
    monkeypatch.setattr(X, "runtime", lambda: drv)
    got = X.exec_size(Graph(), Stream(), most_copies=300)
    assert got.bytes is None and got.copies == 300, got
    assert not drv.live


@pytest.mark.gpu
def test_on_the_gpu_against_copies_held_at_once():
    # another route: 48 copies instantiated and held, their drop read once, over 48 (to
    # within what the driver held before, over 48); then the jumps' figure
    from graph_harness.capture.graph.lifecycle import runtime

    x = torch.zeros(256, device="cuda")
    x.add_(1)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph(keep_graph=True)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        graph.capture_begin()
        for _ in range(1000):
            x.add_(1)
        graph.capture_end()
    rt = runtime()
    torch.cuda.synchronize()
    free0 = torch.cuda.mem_get_info()[0]
    held = [rt.cudaGraphInstantiateWithFlags(graph.raw_cuda_graph(), 1)[1] for _ in range(48)]
    for ex in held:
        rt.cudaGraphUpload(ex, stream.cuda_stream)
    torch.cuda.synchronize()
    bulk = (free0 - torch.cuda.mem_get_info()[0]) / 48
    for ex in held:
        rt.cudaGraphExecDestroy(ex)
    got = X.exec_size(graph, stream)
    assert got.bytes is not None, got
    assert abs(got.bytes - bulk) <= max(got.spread, 0.05 * bulk) + 2 * PAGE / 48, (got, bulk)
