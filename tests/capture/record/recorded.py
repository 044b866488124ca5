"""Graph records and a process's session files made as a recorder makes them, for tests
of recordings (no GPU)."""

from __future__ import annotations

import json

from graph_harness.capture.export.nodes import NodeExport
from graph_harness.capture.record.graphs import GraphRecord
from graph_harness.capture.record.sites import CaptureSite


def export(n: int, key: str) -> NodeExport:
    nodes = [
        {
            "index": i,
            "type": "kernel",
            "kernel": f"k{i % 2}",
            "grid": [1, 1, 1],
            "block": [32, 1, 1],
            "stage": None,
            "step": "unscoped",
            "scope": "unscoped",
            "scope_path": [],
            "deps": [i - 1] if i else [],
            "parent": None,
        }
        for i in range(n)
    ]
    return NodeExport(
        source="cuda-graph", workload=key, variant=None, params=None, nodes=nodes,
        env={"device": "test"}, created="now", options={"recorded": True},
    )  # fmt: skip


def record(index: int, pid: int, key: str, nodes: int, **kw) -> GraphRecord:
    return GraphRecord(
        index=index,
        pid=pid,
        rank=kw.pop("rank", None),
        key=key,
        key_source="engine",
        site=CaptureSite(user="engine.py:10 in capture", library=None, stack=("engine.py:10",)),
        pool=(0, 1),
        pool_reserved=2 << 20,
        export=export(nodes, key),
        **kw,
    )


def write_process(folder, pid, records, *, exit_counts=None, snapshot=None, tail=b""):
    stem = folder / f"{pid}-abcd"
    lines = [{"event": "process", "pid": pid, "ppid": 1, "argv": ["serve.py"], "notes": []}]
    lines += [{"event": "graph", "record": r.to_dict()} for r in records]
    if exit_counts is not None:
        lines.append({"event": "exit", "replays": exit_counts, "notes": []})
    data = b"".join(json.dumps(x).encode() + b"\n" for x in lines) + tail
    stem.with_suffix(".jsonl").write_bytes(data)
    if snapshot is not None:
        stem.with_suffix(".replays.json").write_text(json.dumps(snapshot))
