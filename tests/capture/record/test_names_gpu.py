"""Graphs named by what their captured region read (capture/record/reads.py), on the GPU,
with no key adapter: a runner that captures several batch sizes in one loop, the same
runner capturing one size twice (which captures share a key), and examples/tiny_engine.py
whole and piecewise. Each name is checked against the graph it names by its replays (the
program replays each size's graph a known number of times). The CPU side (the naming, the
mode, the wrappers on a stand-in graph): test_reads_cpu.py, test_names_cpu.py."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from graph_harness.capture import record_graphs
from graph_harness.reports.record_tables import recaptured_lines
from tests.independent import independent_counts

pytestmark = pytest.mark.gpu
REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "examples"

RUNNER = r"""
import sys, torch
from torch import nn


class Step(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(512, 64)
        self.head = nn.Linear(64, 512)
        self.register_buffer("cache", torch.zeros(8, 64))  # state: updated in place

    def forward(self, ids):
        b = ids.shape[0]
        x = self.embed(ids)
        self.cache[:b].add_(x)
        return self.head(x + self.cache[:b])


def capture_sizes(model, ids, sizes, pool):
    graphs = []
    for b in sizes:  # every size in one loop: no forward context, no adapter
        model(ids[:b])  # warm-up
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=pool):
            model(ids[:b])
        graphs.append((b, g))
    return graphs


if __name__ == "__main__":
    model = Step().cuda().eval()
    ids = torch.zeros(8, dtype=torch.long, device="cuda")  # the static input buffer [max]
    pool = torch.cuda.graph_pool_handle()
    with torch.no_grad():
        graphs = capture_sizes(model, ids, (8, 4, 1), pool)
        if sys.argv[1] == "twice":  # size 4 again: a second graph reading what the first reads
            graphs += capture_sizes(model, ids, (4,), pool)
        for i, (b, g) in enumerate(graphs):
            for _ in range(b + i):  # each graph its own count of replays
                g.replay()
    torch.cuda.synchronize()
    print("runner", sys.argv[1], len(graphs))
"""


def _record(tmp_path: Path, variant: str, *flags: str) -> subprocess.CompletedProcess:
    prog = tmp_path / "runner.py"
    prog.write_text(RUNNER)
    cmd = [sys.executable, "-m", "graph_harness", "record", *flags, "--", str(prog), variant]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=300)


def test_a_runner_capturing_sizes_in_one_loop_named_by_them(tmp_path):
    r = _record(tmp_path, "sizes", "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "runner sizes 3" in r.stderr, "the program's stdout, on stderr under --json"
    graphs = json.loads(r.stdout)["graphs"]
    # the ids as each graph read them; the cache (written in place) and the weights left out
    assert [g["key"] for g in graphs] == ["reads [8] int64", "reads [4] int64", "reads [1] int64"]
    assert [g["name"] for g in graphs] == [g["key"] for g in graphs]
    assert {g["key_source"] for g in graphs} == {"shapes"}
    assert [g["reads"] for g in graphs] == [["[8] int64"], ["[4] int64"], ["[1] int64"]]
    assert [g["replays"] for g in graphs] == [8, 5, 3], "each name on the graph it names"
    assert [g["shares_key_with"] for g in graphs] == [[], [], []]
    assert all(g["total_nodes"] > 0 for g in graphs), "the mode changed nothing captured"


def test_a_runner_capturing_one_size_twice_shows_which_captures_share_its_key(tmp_path):
    out = tmp_path / "rec"
    r = _record(tmp_path, "twice", "--out", str(out))
    assert r.returncode == 0, r.stderr[-3000:]
    graphs = json.loads((out / "recording.json").read_text())["graphs"]
    assert [g["name"] for g in graphs] == [
        "reads [8] int64", "reads [4] int64 #1", "reads [1] int64", "reads [4] int64 #2",
    ]  # fmt: skip
    assert [g["index"] for g in graphs] == [0, 1, 2, 3]
    assert [g["shares_key_with"] for g in graphs] == [[], [3], [], [1]]
    assert [g["replays"] for g in graphs] == [8, 5, 3, 7]
    assert "captures under one key: main #1 and #3 share 'reads [4] int64'" in r.stdout, r.stdout
    assert "record --key" in r.stdout
    with open(out / "graphs.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(x["shares_key_with"], x["reads"]) for x in rows] == [
        ("", "[8] int64"), ("3", "[4] int64"), ("", "[1] int64"), ("1", "[4] int64"),
    ]  # fmt: skip


def _load_engine():
    import importlib.util

    path = EXAMPLES / "tiny_engine.py"
    spec = importlib.util.spec_from_file_location("gh_names_tiny_engine", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_tiny_engine_without_its_adapter_named_by_batch_size():
    eng = _load_engine()
    with independent_counts() as plain:  # no recording: nothing looks at the reads
        eng.Engine([1, 4, 8], piecewise=False, layers=2, dim=128).capture()
    engine = eng.Engine([1, 4, 8], piecewise=False, layers=2, dim=128)
    # no key=: the engine's adapter not named
    with record_graphs(children=False) as rec, independent_counts() as seen:
        engine.capture()
        for n in (1, 3, 2, 4, 1, 1, 3):
            engine.step(torch.randint(0, 512, (n,), device="cuda"))
        torch.cuda.synchronize()
    # largest first; each reads its ids and its rows of the layers' K and V caches
    # ([max_batch, heads 4, seq 16, head_dim 32], read by torch.cat, never written)
    want = [f"reads [{b}] int64, [{b}, 4, 16, 32] float32" for b in (8, 4, 1)]
    assert [g.key for g in rec.graphs] == want, [(g.key, g.reads) for g in rec.graphs]
    assert rec.names() == want and rec.shared_keys() == []
    assert seen == plain, "looking at what the regions read changed what they captured"
    for g, b in zip(rec.graphs, (8, 4, 1)):
        assert g.replays == engine.replays[b], (g.key, g.replays, engine.replays)


def test_tiny_engines_pieces_without_its_adapter_share_keys_by_size():
    """Piecewise, the pieces after the first each read the piece before's output and the
    eager attention's: `[b, 128] float32` both, for every piece of a size. The shapes
    cannot tell them apart; the recording says which captures share each size's key."""
    eng = _load_engine()
    engine = eng.Engine([1, 4], piecewise=True, layers=2, dim=128)
    with record_graphs(children=False) as rec:
        engine.capture()
        torch.cuda.synchronize()
    n = engine.n_pieces()  # 3: the embedding's piece, then one per layer
    keys = [g.key for g in rec.graphs]
    assert keys == [
        "reads [4] int64", "reads [4, 128] float32", "reads [4, 128] float32",
        "reads [1] int64", "reads [1, 128] float32", "reads [1, 128] float32",
    ], [(g.key, g.reads) for g in rec.graphs]  # fmt: skip
    groups = [[g.index for g in gs] for gs in rec.shared_keys()]
    first = rec.graphs[0].index
    assert groups == [[first + 1, first + 2], [first + n + 1, first + n + 2]], groups
    (line,) = recaptured_lines(rec)
    assert f"main #{first + 1} and #{first + 2} share 'reads [4, 128] float32'" in line, line
