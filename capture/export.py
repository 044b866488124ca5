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
from capture.documents import ExportError as ExportError  # re-exported: capture.ExportError
from capture.documents import Fields, load_json, show
from capture.files import write_atomic
from capture.scopes import ScopeMark

SCHEMA = "graph-harness/nodes"
SCHEMA_VERSION = 1
SOURCES = ("cuda-graph", "cpu-dispatch")
COLUMNS = ["index", "type", "kernel", "grid", "block", "stage", "step", "deps", "parent"]


# Keys every version-1 export has; `options` came later in version 1, `total_nodes` is
# derived (checked when present), `programmatic_deps` only on nodes that have them.
DOC_KEYS = ("schema", "schema_version", "source", "workload", "variant", "params", "rank")
DOC_KEYS += ("env", "created", "nodes")
DOC_OPTIONAL = ("options", "total_nodes")
NODE_OPTIONAL = ("programmatic_deps",)


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
        """Graphviz DOT of the launching nodes; every name is quoted and escaped, so a
        quote or backslash in a kernel or scope name stays text."""
        lines = ["digraph G {", "  rankdir=TB; node [shape=box, fontsize=9];"]
        for n in self.nodes:
            if n["type"] in NON_LAUNCHING:
                continue
            where = "" if n["stage"] is None else f"stage{n['stage']}/"
            label = "\\n".join(
                [
                    f"{n['index']}: {_dot(n['type'])}",
                    _dot((n["kernel"] or "")[:48]),
                    _dot(where + n["step"]),
                ]
            )
            lines.append(f'  n{int(n["index"])} [label="{label}"];')
            for d in n["deps"]:
                lines.append(f"  n{int(d)} -> n{int(n['index'])};")
        lines.append("}")
        return write_atomic(Path(path), "\n".join(lines) + "\n")

    @classmethod
    def from_dict(cls, doc: Any, *, where: str = "export") -> NodeExport:
        """Check every field of an export document (type, range, references between
        nodes); ExportError naming `where` (the file) and the field otherwise."""
        f = Fields(where)
        if not isinstance(doc, dict):
            f.fail("", f"not a graph-harness node export: expected an object, got {show(doc)}")
        if doc.get("schema") != SCHEMA:
            got = show(doc.get("schema"))
            f.fail("", f"not a graph-harness node export (schema {got}, expected {SCHEMA!r})")
        version = doc.get("schema_version")
        if type(version) is not int or version != SCHEMA_VERSION:  # not True, not 1.0
            f.fail(
                "",
                f"export schema version {show(version)} is not the supported "
                f"{SCHEMA_VERSION}; re-export it with this graph-harness",
            )
        f.keys("", doc, DOC_KEYS, DOC_OPTIONAL)
        f.string("source", doc["source"], choices=SOURCES)
        f.string("workload", doc["workload"])
        f.string("variant", doc["variant"], none=True)
        f.ints("params", doc["params"], none=True)
        f.integer("rank", doc["rank"], lo=0, none=True)
        f.scalars("env", doc["env"])
        f.scalars("options", doc.get("options", {}))
        f.string("created", doc["created"])
        listed = f.array("nodes", doc["nodes"])
        nodes = [_check_node(f, i, n, len(listed)) for i, n in enumerate(listed)]
        export = cls(
            source=doc["source"],
            workload=doc["workload"],
            variant=doc["variant"],
            params=dict(doc["params"]) if doc["params"] is not None else None,
            nodes=nodes,
            env=dict(doc["env"]),
            created=doc["created"],
            rank=doc["rank"],
            options=dict(doc.get("options", {})),
        )
        if "total_nodes" in doc:
            total = f.integer("total_nodes", doc["total_nodes"], lo=0)
            if total != export.total:
                f.expected("total_nodes", f"{export.total} (the launching nodes listed)", total)
        return export

    @classmethod
    def read_json(cls, path: str | Path) -> NodeExport:
        """Read and check an export file; ExportError naming the file and the field."""
        return cls.from_dict(load_json(path, "export"), where=str(path))


def _check_node(f: Fields, i: int, n: object, count: int) -> dict[str, Any]:
    """Node `i` of `count`, checked; a fresh dict (the document's lists are not shared)."""
    p = f"nodes[{i}]"
    f.obj(p, n)
    f.keys(p, n, tuple(COLUMNS), NODE_OPTIONAL)
    if f.integer(f"{p}.index", n["index"]) != i:
        f.expected(f"{p}.index", f"{i} (the node's position)", n["index"])
    f.string(f"{p}.type", n["type"])
    if not n["type"]:
        f.expected(f"{p}.type", "a non-empty str", n["type"])
    f.string(f"{p}.kernel", n["kernel"], none=True)
    for key in ("grid", "block"):
        if n[key] is not None:
            dims = f.array(f"{p}.{key}", n[key])
            if not 1 <= len(dims) <= 3:
                f.expected(f"{p}.{key}", "null or a list of 1 to 3 ints", n[key])
            for j, d in enumerate(dims):
                f.integer(f"{p}.{key}[{j}]", d, lo=0, hi=2**32)
    f.integer(f"{p}.stage", n["stage"], lo=0, none=True)
    f.string(f"{p}.step", n["step"])
    node = {k: n[k] for k in COLUMNS}
    for key in ("deps", *[k for k in NODE_OPTIONAL if k in n]):
        refs = f.array(f"{p}.{key}", n[key])
        for j, d in enumerate(refs):
            f.integer(f"{p}.{key}[{j}]", d, lo=0, hi=count)
            if d == i:
                f.expected(f"{p}.{key}[{j}]", "another node's index", d)
        node[key] = list(refs)
    f.integer(f"{p}.parent", n["parent"], lo=0, hi=count, none=True)
    if n["parent"] == i:
        f.expected(f"{p}.parent", "another node's index or null", n["parent"])
    for key in ("grid", "block"):
        node[key] = None if n[key] is None else list(n[key])
    return node


def _dot(s: str) -> str:
    """`s` as text inside a DOT double-quoted string: backslashes and quotes escaped,
    line breaks as DOT's own."""
    s = s.replace("\\", "\\\\").replace('"', '\\"')
    return s.replace("\r\n", "\\n").replace("\n", "\\n").replace("\r", "\\n")


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
