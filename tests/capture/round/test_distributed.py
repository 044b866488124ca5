"""The distributed round on gloo with 2 and 8 processes: bit-identical to the single-process
emulation for every rank. World 8 on gloo runs the code path the 8-GPU NCCL run takes.
Bounded: the workers stop by themselves or are killed."""

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from graph_harness.capture.export.nodes import NodeExport
from graph_harness.capture.round.distributed import merge

WORKER = textwrap.dedent(
    """
    import faulthandler, json, sys, torch
    faulthandler.dump_traceback_later(120, exit=True)  # a hang shows its stacks, then ends
    from graph_harness.capture import RoundParams
    from graph_harness.capture.round.distributed import (
        count_distributed, emulate_rank, init_from_env, release_graphs,
    )

    setup = init_from_env(sys.argv[1])
    device = setup.device
    params = RoundParams(stages=2, rows=3, k=32, world=setup.world, rank=setup.rank,
                         shard=128, seed=11)
    result = {"rank": setup.rank, "variants": {}}
    graphs = []
    for variant in ("shipped", "fused"):
        counted = count_distributed(params, variant, setup)
        got = counted.round.outputs()
        if device.type == "cuda":  # poison, replay the captured graph, then compare
            for t in got.values():
                t.view(torch.int32).fill_(-7)
            counted.captured.graph.replay()
            torch.cuda.synchronize()
        want = emulate_rank(params, variant, setup.rank, device)
        same = all(torch.equal(got[k].view(torch.int32), want[k].view(torch.int32))
                   for k in want)
        nodes = counted.export.to_dict()
        result["variants"][variant] = {"identical": same, "export": nodes}
        if counted.captured is not None:
            graphs.append(counted.captured.graph)
    print("RESULT " + json.dumps(result), flush=True)
    release_graphs(graphs)
    torch.distributed.barrier()  # no rank tears NCCL down while its peer still works
    torch.distributed.destroy_process_group()
    """
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(tmp_path, backend, world=2):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    port = free_port()
    root = str(Path(__file__).resolve().parents[3])  # the repository: graph_harness importable
    procs, logs = [], []
    for rank in range(world):
        env = dict(
            os.environ,
            RANK=str(rank),
            LOCAL_RANK=str(rank),
            WORLD_SIZE=str(world),
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=str(port),
            PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""),
        )
        if backend == "gloo":
            env["CUDA_VISIBLE_DEVICES"] = ""  # the CPU round, even on a GPU machine
        # Files, not pipes: a rank blocked on a full pipe while we wait for the other
        # rank (inside a collective with it) would deadlock both.
        out = (tmp_path / f"rank{rank}.out").open("w")
        err = (tmp_path / f"rank{rank}.err").open("w")
        logs.append((out, err))
        procs.append(
            subprocess.Popen(
                [sys.executable, str(script), backend], env=env, stdout=out, stderr=err
            )
        )
    results = []
    try:
        for p in procs:
            p.wait(timeout=300)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        for out, err in logs:
            out.close()
            err.close()
    for rank, p in enumerate(procs):
        err = (tmp_path / f"rank{rank}.err").read_text()
        assert p.returncode == 0, err[-3000:]
        out = (tmp_path / f"rank{rank}.out").read_text()
        line = next(x for x in out.splitlines() if x.startswith("RESULT "))
        results.append(json.loads(line[len("RESULT ") :]))
    return results


def check_ranks(results, world=2):
    assert sorted(r["rank"] for r in results) == list(range(world))
    for variant in ("shipped", "fused"):
        exports = [NodeExport.from_dict(r["variants"][variant]["export"]) for r in results]
        for r in results:
            assert r["variants"][variant]["identical"], f"rank {r['rank']} {variant} differs"
        merged = merge(exports)
        assert merged.same_structure, merged.first_difference
        gathers = exports[0].frame().query("step == 'gather'")
        # One collective per stage: an NCCL kernel node in a graph, an aten op on gloo.
        # A captured NCCL call also joins its own stream with event nodes (a wait in stage
        # 0, records after): they belong to the step but launch no work.
        collectives = gathers[gathers.type.isin(["kernel", "aten"])]
        assert sorted(collectives.stage) == [0, 1], gathers
        assert all("allgather" in k.replace("_", "").lower() for k in collectives.kernel), gathers
        others = set(gathers.type) - {"kernel", "aten"}
        assert others <= {"event_record", "wait_event"}, others
        assert exports[0].options["distributed"] is True


@pytest.mark.parametrize("world", [2, 8])
def test_gloo_round_matches_emulation(tmp_path, world):
    results = run_ranks(tmp_path, "gloo", world)
    check_ranks(results, world)


@pytest.mark.gpu
def test_nccl_captured_round_matches_emulation(tmp_path):
    if torch.cuda.device_count() < 2:
        pytest.skip("needs 2 GPUs (device kind nvidia-h200-x2)")
    results = run_ranks(tmp_path, "nccl")
    check_ranks(results)
    e = NodeExport.from_dict(results[0]["variants"]["fused"]["export"])
    assert e.source == "cuda-graph"


def test_merge_reports_a_structural_difference():
    def export(rank, kernels):
        nodes = [
            dict(
                index=i,
                type="aten",
                kernel=k,
                grid=None,
                block=None,
                stage=0,
                step="pack",
                scope="stage0/pack",
                scope_path=["stage0/pack"],
                deps=[],
                parent=None,
            )
            for i, k in enumerate(kernels)
        ]
        return NodeExport(
            source="cpu-dispatch",
            workload="decode-round",
            variant="fused",
            params=None,
            nodes=nodes,
            rank=rank,
        )

    m = merge([export(0, ["a", "b"]), export(1, ["a", "c"])])
    assert not m.same_structure and "rank 1 differs from rank 0 at node 1" in m.first_difference
    assert m.totals == {0: 2, 1: 2}


def test_world_mismatch_is_explained(monkeypatch):
    from graph_harness.capture.round.distributed import DistributedError, init_from_env

    for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(k, raising=False)
    with pytest.raises(DistributedError, match="torchrun --nproc-per-node"):
        init_from_env()
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "1")
    if not torch.cuda.is_available():
        with pytest.raises(DistributedError, match="nccl needs CUDA"):
            init_from_env("nccl")
