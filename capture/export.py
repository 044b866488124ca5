"""The node export: a versioned JSON document and a tidy DataFrame of the same nodes.

One row per node (graph node, or dispatched op on the CPU source), with its type, kernel
name, launch shape where known, scope (stage, step) and dependencies. Per-round,
per-stage, per-step and per-kernel counts are group-bys of the frame.
"""

from __future__ import annotations

import json
import platform
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from capture.cudagraph import RawNode, ancestors
from capture.dispatch import NON_LAUNCHING, Dispatched
from capture.files import write_atomic
from capture.scopes import ScopeMark

SCHEMA = "graph-harness/nodes"
SCHEMA_VERSION = 1
SOURCES = ("cuda-graph", "cpu-dispatch")
COLUMNS = ["index", "type", "kernel", "grid", "block", "stage", "step", "deps", "parent"]


class ExportError(ValueError):
    """An export document that cannot be read (wrong schema, version or content)."""


@dataclass
class NodeExport:
    source: str  # "cuda-graph" | "cpu-dispatch"
    workload: str  # "decode-round" or "callable:<qualname>"
    variant: str | None
    params: dict[str, Any] | None
    nodes: list[dict[str, Any]]  # one dict per node, keys COLUMNS
    env: dict[str, Any] = field(default_factory=dict)
    created: str = ""
    rank: int | None = None
    options: dict[str, Any] = field(default_factory=dict)  # e.g. {"pdl": True}

    @property
    def total(self) -> int:
        """Nodes of the graph; on the CPU source, launching dispatches (no views/allocs)."""
        return sum(1 for n in self.nodes if n["type"] not in NON_LAUNCHING)

    def frame(self, *, launching_only: bool = True) -> pd.DataFrame:
        df = pd.DataFrame(self.nodes, columns=COLUMNS)
        if launching_only:
            df = df[~df["type"].isin(NON_LAUNCHING)].reset_index(drop=True)
        df["source"] = self.source
        df["variant"] = self.variant
        df["stage"] = df["stage"].astype("Int64")
        return df

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "schema_version": SCHEMA_VERSION,
            "source": self.source,
            "workload": self.workload,
            "variant": self.variant,
            "params": self.params,
            "rank": self.rank,
            "options": self.options,
            "env": self.env,
            "created": self.created,
            "total_nodes": self.total,
            "nodes": self.nodes,
        }

    def write_json(self, path: str | Path) -> Path:
        """Write atomically: a temporary file in the same folder, renamed when complete."""
        return write_atomic(Path(path), json.dumps(self.to_dict(), indent=1) + "\n")

    def write_dot(self, path: str | Path) -> Path:
        lines = ["digraph G {", "  rankdir=TB; node [shape=box, fontsize=9];"]
        for n in self.nodes:
            if n["type"] in NON_LAUNCHING:
                continue
            label = f"{n['index']}: {n['type']}\\n{(n['kernel'] or '')[:48]}\\n"
            label += f"{'' if n['stage'] is None else 'stage{}/'.format(n['stage'])}{n['step']}"
            lines.append(f'  n{n["index"]} [label="{label}"];')
            for d in n["deps"]:
                lines.append(f"  n{d} -> n{n['index']};")
        lines.append("}")
        return write_atomic(Path(path), "\n".join(lines) + "\n")

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> NodeExport:
        if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
            raise ExportError(f"not a graph-harness node export (schema != {SCHEMA!r})")
        if doc.get("schema_version") != SCHEMA_VERSION:
            raise ExportError(
                f"export schema version {doc.get('schema_version')!r} is not the supported "
                f"{SCHEMA_VERSION}; re-export it with this graph-harness"
            )
        if doc.get("source") not in SOURCES:
            raise ExportError(f"unknown source {doc.get('source')!r}; expected one of {SOURCES}")
        nodes = doc.get("nodes")
        if not isinstance(nodes, list) or any(set(COLUMNS) - set(n) for n in nodes):
            raise ExportError(f"nodes must be a list of records with keys {COLUMNS}")
        return cls(
            source=doc["source"],
            workload=doc.get("workload", ""),
            variant=doc.get("variant"),
            params=doc.get("params"),
            nodes=nodes,
            env=doc.get("env", {}),
            created=doc.get("created", ""),
            rank=doc.get("rank"),
            options=doc.get("options", {}),
        )

    @classmethod
    def read_json(cls, path: str | Path) -> NodeExport:
        try:
            doc = json.loads(Path(path).read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise ExportError(f"cannot read export {path}: {e}") from e
        return cls.from_dict(doc)


def environment(device: torch.device) -> dict[str, Any]:
    env: dict[str, Any] = {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "device": "cpu" if device.type == "cpu" else torch.cuda.get_device_name(device),
    }
    try:
        import triton

        env["triton"] = triton.__version__
    except ImportError:
        env["triton"] = None
    if device.type == "cuda":
        env["cuda_runtime"] = torch.version.cuda
        try:
            from cuda.bindings import driver

            _, v = driver.cuDriverGetVersion()
            env["driver_cuda_version"] = f"{v // 1000}.{v % 1000 // 10}"
            import cuda.bindings

            env["cuda_bindings"] = cuda.bindings.__version__
        except Exception:  # the reader reports the real error when it runs
            pass
    return env


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def nodes_from_graph(raw: list[RawNode], marks: list[ScopeMark]) -> list[dict[str, Any]]:
    """Node records with scopes: a scope's nodes are the ancestors of its end frontier
    minus the ancestors of its begin frontier. Child-graph nodes take their parent's."""
    index = {n.handle: i for i, n in enumerate(raw)}
    top = [n for n in raw if n.parent is None]
    parents = {n.handle: n.deps for n in top}
    scope_of: dict[int, tuple[int | None, str]] = {}
    for m in marks:
        for h in ancestors(m.end, parents) - ancestors(m.begin, parents):
            if h in scope_of:
                raise RuntimeError(f"node {h:#x} falls in two scopes; scopes must not overlap")
            scope_of[h] = (m.key.stage, m.key.step)
    out = []
    for i, n in enumerate(raw):
        owner = n.handle if n.parent is None else _top_parent(n, raw, index)
        stage, step = scope_of.get(owner, (None, "unscoped"))
        out.append(
            {
                "index": i,
                "type": n.kind,
                "kernel": n.kernel,
                "grid": list(n.grid) if n.grid else None,
                "block": list(n.block) if n.block else None,
                "stage": stage,
                "step": step,
                "deps": sorted(index[d] for d in n.deps),
                "parent": None if n.parent is None else index[n.parent],
                **(
                    {"programmatic_deps": [index[d] for d in n.programmatic_deps]}
                    if n.programmatic_deps
                    else {}
                ),
            }
        )
    return out


def _top_parent(n: RawNode, raw: list[RawNode], index: dict[int, int]) -> int:
    while n.parent is not None:
        n = raw[index[n.parent]]
    return n.handle


def nodes_from_dispatch(records: list[Dispatched]) -> list[dict[str, Any]]:
    """Node records from dispatched ops, in dispatch order; each depends on the previous
    launching one (one stream: program order)."""
    out, last = [], None
    for i, r in enumerate(records):
        out.append(
            {
                "index": i,
                "type": r.type,
                "kernel": r.name,
                "grid": None,
                "block": None,
                "stage": r.stage,
                "step": r.step if r.step is not None else "unscoped",
                "deps": [] if last is None else [last],
                "parent": None,
            }
        )
        if r.type not in NON_LAUNCHING:
            last = i
    return out


def summarize(export: NodeExport) -> dict[str, pd.DataFrame]:
    """The usual group-bys: per stage x step, per step, per kernel, per type."""
    df = export.frame()
    return {
        "per_stage_step": df.groupby(["stage", "step"], dropna=False).size().unstack(fill_value=0),
        "per_step": df.groupby("step").size().rename("nodes").to_frame(),
        "per_kernel": df.groupby(["type", "kernel"]).size().rename("nodes").to_frame(),
        "per_type": df.groupby("type").size().rename("nodes").to_frame(),
    }
