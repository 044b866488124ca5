"""One executable's bytes below the page (capture/graph/exec_size.py): on the CPU against a
driver that packs executables into 2 MiB pages and keeps pages from before (the arithmetic
of the jumps); on the GPU against N copies held at once, read as one drop."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from graph_harness.capture.graph import exec_size as X
from graph_harness.capture.graph.lifecycle import PAGE

MIB = 1 << 20
REPO = Path(__file__).resolve().parents[3]


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


def test_a_page_every_32_copies_is_read_exactly(monkeypatch):
    # 64 KiB executables, nothing held: every jump is 32 copies and one page apart
    drv = PackingDriver(64 * 1024, 0)
    monkeypatch.setattr(X, "runtime", lambda: drv)
    got = X.exec_size(Graph(), Stream())
    assert got.bytes == 64 * 1024, got


@pytest.mark.parametrize("held_copies", [64, 200])
def test_pages_held_in_both_runs_as_copies_leave_them(monkeypatch, held_copies):
    # what an earlier resolution leaves: its copies' pages, in both runs, in their shares
    each, up = 1_250_000, 375_000
    drv = PackingDriver(each - up, held_copies * (each - up), upload_each=up)
    drv.used[1] -= held_copies * up  # the upload run's share held too
    monkeypatch.setattr(X, "runtime", lambda: drv)
    got = X.exec_size(Graph(), Stream())
    assert got.bytes is not None and abs(got.bytes - each) <= got.spread, (got, each)


def test_too_few_pages_within_the_limits_are_said(monkeypatch):
    drv = PackingDriver(4096, 0)
    monkeypatch.setattr(X, "runtime", lambda: drv)
    got = X.exec_size(Graph(), Stream(), most_copies=300)
    assert got.bytes is None and got.copies == 300, got
    assert not drv.live


@pytest.mark.gpu
def test_on_the_gpu_against_copies_held_at_once():
    # another route, in a process of its own (no pages held from earlier tests): 48 copies
    # instantiated and held, their drop read once, over 48; then the jumps' figure
    r = subprocess.run(
        [sys.executable, "-m", "tests.capture.graph.exec_copies"],
        capture_output=True, text=True, cwd=REPO, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    bulk, each, spread = got["bulk"], got["bytes"], got["spread"]
    assert each is not None, got
    assert abs(each - bulk) <= max(spread, 0.05 * bulk) + 2 * PAGE / 48, got
