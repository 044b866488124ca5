"""Recording the graphs a program captures, on the GPU: every count checked against an
independent walk of the graph the driver holds (tests/independent.py), every replay count
against the program's own, and the program's behaviour (outputs, exceptions, exit code)
against a run without the recorder."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import torch

from graph_harness.capture import capture_and_count, module_scopes, record_graphs
from tests.independent import export_counts, independent_counts

pytestmark = pytest.mark.gpu
REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "examples"


def _load(name: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"gh_example_{name}", EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def _step(x, w):
    return torch.relu(x @ w).sum(dim=1, keepdim=True) + x[:, :1]


def capture_with_args(g, x, w, pool=None):
    with torch.cuda.graph(g, pool=pool):
        return _step(x, w)


def test_every_capture_recorded_with_the_drivers_counts():
    x = torch.randn(8, 64, device="cuda")
    w = torch.randn(64, 64, device="cuda")
    _step(x, w)  # warm-up: cuBLAS handles outside the captures
    torch.cuda.synchronize()
    with record_graphs(children=False) as rec, independent_counts() as seen:
        a = torch.cuda.CUDAGraph()  # keep_graph=False: instantiated and freed by torch
        out_a = capture_with_args(a, x, w)
        b = torch.cuda.CUDAGraph(keep_graph=True)
        out_b = capture_with_args(b, x[:4], w, pool=a.pool())
        for _ in range(5):
            a.replay()
        lin = torch.nn.Linear(64, 64).cuda()
        graphed = torch.cuda.make_graphed_callables(lin, (torch.randn(8, 64, device="cuda"),))
        y = graphed(torch.randn(8, 64, device="cuda", requires_grad=True))
        y.sum().backward()
        torch.cuda.synchronize()
    assert torch.equal(out_a, _step(x, w)), "the graph still computes the step"
    del out_b
    graphs = rec.graphs
    assert len(graphs) == len(seen) == 4, [g.key for g in graphs]
    for g, (kinds, kernels) in zip(graphs, seen):
        assert g.status == "captured"
        assert export_counts(g.export) == (kinds, kernels), g.key
    a_rec, b_rec = graphs[0], graphs[1]
    assert a_rec.replays == 5 and b_rec.replays == 0
    # named by what each region read (x, or its first 4 rows; w; x[:, :1]), not written
    assert a_rec.key_source == "shapes", (a_rec.key_source, a_rec.key_note)
    assert a_rec.key == "reads [8, 64] float32, [64, 64] float32, [8, 1] float32", a_rec.key
    assert b_rec.key == "reads [4, 64] float32, [64, 64] float32, [4, 1] float32", b_rec.key
    assert a_rec.pool == b_rec.pool, "b was captured into a's pool"
    assert a_rec.keep_graph is False and b_rec.keep_graph is True  # read back on torch < 2.12
    assert b_rec in rec.never_replayed() and a_rec not in rec.never_replayed()
    assert "test_record_gpu.py" in (a_rec.site.user or ""), a_rec.site
    # make_graphed_callables: a forward and a backward graph, each replayed once
    fwd, bwd = graphs[2], graphs[3]
    assert fwd.replays == 1 and bwd.replays == 1
    assert "make_graphed_callables" in (fwd.site.library or ""), fwd.site
    assert fwd.pool_reserved is not None and fwd.pool_reserved > 0


def test_a_pools_bytes_read_without_the_trace_are_the_same():
    # the recorder reads the segments without the history's trace (memory.py _snapshot);
    # the whole snapshot, trace and all, filtered here, is the other route. Two pools, one
    # holding three graphs, with the program recording the allocator's history
    from graph_harness.capture.graph import memory

    if not memory._traces_optional():
        pytest.skip("this torch cannot leave the trace out: pool_memory reads it whole")
    shared, kept = torch.cuda.graph_pool_handle(), []
    torch.cuda.memory._record_memory_history(max_entries=2000)
    try:
        for i, pool in enumerate([shared, shared, shared, None]):
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=pool):
                y = torch.full((4096 * (i + 1),), float(i), device="cuda").cumsum(0)
            kept.append((g, y))
        pools = {tuple(int(v) for v in g.pool()) for g, _ in kept}
        assert len(pools) == 2, pools
        whole = torch.cuda.memory._snapshot()
        assert whole["device_traces"] and any(whole["device_traces"]), "no trace: vacuous"
        for pool in pools:
            segs = [s for s in whole["segments"] if tuple(s["segment_pool_id"]) == pool]
            got = memory.pool_memory(pool)
            assert got.segments == len(segs) > 0, (pool, got)
            assert got.reserved == sum(s["total_size"] for s in segs) > 0, (pool, got)
            assert got.allocated == sum(s["allocated_size"] for s in segs) > 0, (pool, got)
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)


def test_a_failed_capture_is_recorded_and_the_programs_error_kept():
    x = torch.randn(4, device="cuda")

    def bad():
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            y = x * 2
            if y.sum().item() > 1e9:  # a sync inside capture: torch raises
                pass

    def attempt():
        try:
            bad()
        finally:  # torch.cuda.graph leaves its stream current when capture_end raises
            torch.cuda.set_stream(torch.cuda.default_stream())
            torch.cuda.synchronize()

    with pytest.raises(RuntimeError) as plain:
        attempt()
    with record_graphs(children=False) as rec, pytest.raises(RuntimeError) as recorded:
        attempt()
    assert type(recorded.value) is type(plain.value)
    assert str(recorded.value) == str(plain.value)
    (g,) = rec.graphs
    assert g.status == "failed" and g.error, g
    # the process captures again afterwards
    h = torch.cuda.CUDAGraph()
    with torch.cuda.graph(h):
        z = x + 1
    h.replay()
    torch.cuda.synchronize()
    assert torch.equal(z, x + 1)


@pytest.mark.parametrize("piecewise", [False, True], ids=["whole", "piecewise"])
def test_engine_like_runner_by_its_own_keys(piecewise):
    eng = _load("tiny_engine")
    key = eng.record_key  # in this process, the adapter itself (by name: the CLI test)
    engine = eng.Engine([1, 2, 4, 8], piecewise=piecewise, layers=2, dim=128)
    with record_graphs(children=False, key=key) as rec, independent_counts() as seen:
        engine.capture()
        for n in (1, 3, 2, 4, 1, 1, 3):
            engine.step(torch.randint(0, 512, (n,), device="cuda"))
        torch.cuda.synchronize()
    pieces = engine.n_pieces() if piecewise else 1
    assert len(rec.graphs) == len(seen) == 4 * pieces
    for g, counts in zip(rec.graphs, seen):
        assert export_counts(g.export) == counts
    # largest first, every one into one pool, named by the engine's adapter
    assert rec.graphs[0].key.startswith("bs=8")
    assert len({g.pool for g in rec.graphs}) == 1
    assert {g.key_source for g in rec.graphs} == {"engine"}
    for g in rec.graphs:
        bs = int(g.key.split()[0].removeprefix("bs="))
        assert g.replays == engine.replays[bs], (g.key, g.replays, engine.replays)
    never = rec.never_replayed()
    assert {g.key.split()[0] for g in never} == {"bs=8"} and len(never) == pieces


def test_reduce_overhead_step_counted_by_recording_its_graphs():
    ex = _load("llama_decode")
    step = ex.make_step(compiled="reduce-overhead", preset="tiny")
    with independent_counts() as seen, module_scopes(step.module):
        e = capture_and_count(step, warmup=2)
    assert e.options["cudagraphs"] == "inductor" and e.options["compiled"] is True
    graphs = e.options["graphs"]
    assert graphs >= 1 and len(seen) >= graphs
    # the step's graphs are the last ones the tree recorded: their nodes, by kind, summed
    kinds = sum((k for k, _ in seen[-graphs:]), start=type(seen[0][0])())
    got, _ = export_counts(e)
    assert got == kinds
    # by module: every layer the same work, the compiled kernels placed by provenance
    df = e.frame()
    per_layer = df[df["scope_path"].map(len) >= 2]["scope_path"].map(lambda p: p[1]).value_counts()
    layers = [f"layers.{i}" for i in range(ex.PRESETS["tiny"].n_layer)]
    assert all(per_layer.get(layer, 0) > 0 for layer in layers), per_layer
    assert len({per_layer[layer] for layer in layers}) == 1, per_layer


WORKERS = r"""
import os, sys, torch, torch.multiprocessing as mp

def work(rank, n):
    os.environ["RANK"] = str(rank)
    x = torch.randn(16, device="cuda")
    y = x * 2  # warm-up
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = torch.sin(x) * (rank + 1)
    for _ in range(n + rank):
        g.replay()
    torch.cuda.synchronize()

if __name__ == "__main__":
    ctx = mp.get_context(sys.argv[1])
    ps = [ctx.Process(target=work, args=(r, 3)) for r in range(2)]
    [p.start() for p in ps]
    [p.join() for p in ps]
    print("workers", [p.exitcode for p in ps])
    sys.exit(5)
"""


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_every_process_of_a_program_recorded(method, tmp_path):
    from graph_harness.capture import run_program

    prog = tmp_path / "workers.py"
    prog.write_text(WORKERS)
    out = tmp_path / "out.txt"
    with open(out, "w") as f:
        rec = run_program([sys.executable, str(prog), method], stdout=f.fileno())
    assert rec.exit_code == 5
    assert out.read_text().strip() == "workers [0, 0]", "the program's own output, unchanged"
    by_rank = {g.rank: g for g in rec.graphs}
    assert sorted(by_rank) == [0, 1], [(g.pid, g.rank) for g in rec.graphs]
    assert by_rank[0].replays == 3 and by_rank[1].replays == 4
    assert by_rank[0].pid != by_rank[1].pid
    assert all(p.exited for p in rec.processes if any(g.pid == p.pid for g in rec.graphs))


def test_cli_record_writes_the_recording_and_keeps_the_exit_code(tmp_path):
    stats = tmp_path / "stats.json"
    out = tmp_path / "rec"
    cmd = [
        sys.executable, "-m", "graph_harness", "record", "--out", str(out),
        "--key", f"{EXAMPLES / 'tiny_engine.py'}:record_key", "--",
        str(EXAMPLES / "tiny_engine.py"), "--piecewise", "--layers", "2", "--steps", "12",
        "--stats", str(stats),
    ]  # fmt: skip
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("tiny engine: 12 steps"), r.stdout  # the program's line first
    doc = json.loads((out / "recording.json").read_text())
    engine = json.loads(stats.read_text())
    graphs = doc["graphs"]
    assert len(graphs) == engine["graphs"] == 4 * engine["pieces"]
    for g in graphs:
        bs = g["key"].split()[0].removeprefix("bs=")
        assert g["replays"] == engine["replays_per_size"][bs], g["key"]
        assert (out / g["export"]).exists()
    assert "never replayed" in r.stdout and "bs=8 piece=0/3" in r.stdout


def _by_scope(export) -> Counter:
    return Counter(tuple(n["scope_path"]) for n in export.nodes)


@pytest.mark.parametrize("compiled", [False, "reduce-overhead"], ids=["eager", "reduce-overhead"])
def test_module_scopes_in_a_model_nobody_named(compiled):
    ex = _load("llama_decode")
    step = ex.make_step(compiled=compiled, preset="tiny")
    # the other route: graph-harness's own count of the same model, named to it (compiled:
    # a step of its own, so that the recording below sees its step's tree record)
    other = ex.make_step(compiled=compiled, preset="tiny") if compiled else step
    with module_scopes(other.module):
        counted = capture_and_count(other, warmup=2)
    with record_graphs(module_scopes=True, children=False) as rec:
        if compiled:
            for _ in range(3):  # the tree's warm-up, its recording, a replay
                step()
        else:
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                step()
        torch.cuda.synchronize()
    (graph,) = [g for g in rec.graphs if g.nodes]
    assert graph.export.options["module_depth"] == "every level"
    assert _by_scope(graph.export) == _by_scope(counted), graph.export.options
    layers = {p[1] for p in _by_scope(graph.export) if len(p) > 1 and p[0] == "layers"}
    assert layers == {f"layers.{i}" for i in range(ex.PRESETS["tiny"].n_layer)}


def test_module_scopes_in_an_engines_pieces():
    """An engine that captures its model piece by piece calls blocks from its own methods:
    no module runs around a capture, so the recorder names the modules in the model the
    engine holds (capture/scopes/program.py), checked against count's own scoping of the
    same pieces under module_scopes(engine.model)."""
    eng = _load("tiny_engine")
    engine = eng.Engine([1, 2], piecewise=True, layers=2, dim=128)
    with record_graphs(module_scopes=True, children=False) as rec:
        engine.capture()
        torch.cuda.synchronize()
    n = engine.n_pieces()
    assert len(rec.graphs) == 2 * n
    ones = rec.graphs[n:]  # largest first: batch 1's pieces are the last
    for i, g in enumerate(ones):
        carry = None if i == 0 else (engine.outputs[1][i - 1][0], engine.carries[1][i - 1])
        with module_scopes(engine.model):
            piece = torch.no_grad()(lambda i=i, carry=carry: engine.piece(i, 1, carry))
            counted = capture_and_count(piece)
        assert _by_scope(g.export) == _by_scope(counted), (i, _by_scope(g.export))
    # named from the model's root: a piece that spans two blocks shows both under `layers`
    # (the bug this guards named everything inside the first block called)
    paths = [p for p in _by_scope(ones[1].export) if p]
    assert {p[0] for p in paths} == {"layers"}, paths
    assert {p[:2] for p in paths} >= {("layers", "layers.0"), ("layers", "layers.1")}, paths
