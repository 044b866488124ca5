"""The node export: a versioned JSON document and a tidy DataFrame of the same nodes.

One row per node (graph node, or dispatched op on the CPU source): type, kernel name,
launch shape where known, scopes (`scope`, `scope_path`, the round's `stage` and `step`)
and dependencies; counts are group-bys of the frame. `total_nodes` (`NodeExport.total`)
counts launching nodes only: the CPU source also records "view" and "alloc" nodes
(NON_LAUNCHING). Version 3; versions 1 and 2 still read. Fields and versions:
docs/your-model.md, "The node export's fields".
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graph_harness.capture.attribution.node import COLUMNS, Node, plain
from graph_harness.capture.export.documents import (
    ExportError as ExportError,  # re-exported: capture.ExportError
)
from graph_harness.capture.export.documents import Fields, show
from graph_harness.capture.export.kinds import NODES, Source
from graph_harness.capture.export.node_check import check_node, check_options
from graph_harness.capture.export.workload import export_name, is_round, step_order, unit_of
from graph_harness.capture.files import write_atomic
from graph_harness.capture.graph.node_types import NON_LAUNCHING

# pandas where a frame is made: an export is read, checked and written without it (a
# recorded process's capture, `graph-harness record`'s own process)
if TYPE_CHECKING:
    import pandas as pd

SCHEMA = "graph-harness/nodes"
SCHEMA_VERSION = 3
READABLE_VERSIONS = (1, 2, 3)
SOURCES = ("cuda-graph", "cpu-dispatch")


# Keys every export has; `options` came later in version 1, `total_nodes` is derived
# (checked when present), `programmatic_deps` and `fused_modules` (a compiled kernel made
# from several modules: capture/scopes/provenance.py) only on nodes that have them.
DOC_KEYS = ("schema", "schema_version", "source", "workload", "variant", "params", "rank")
DOC_KEYS += ("env", "created", "nodes")
DOC_OPTIONAL = ("options", "total_nodes")


def joined_nodes(parts: list[tuple[int, list[Node]]]) -> list[Node]:
    """Several graphs' nodes as one list (a step run as several graphs, or every graph of
    a recording): each part's nodes in order, indices and edges renumbered, each node's
    `graph` the number given with its part."""
    out: list[Node] = []
    for graph, nodes in parts:
        base = len(out)
        for n in nodes:
            m = plain(n)  # a recorded graph's tuples: lists, as a count's
            m["index"] = n["index"] + base
            m["deps"] = [d + base for d in n["deps"]]
            m["parent"] = None if n["parent"] is None else n["parent"] + base
            if "programmatic_deps" in n:
                m["programmatic_deps"] = [d + base for d in n["programmatic_deps"]]
            m["graph"] = graph
            out.append(m)  # type: ignore[arg-type]
    return out


@dataclass(kw_only=True)
class NodeExport:
    source: str  # "cuda-graph" | "cpu-dispatch"
    workload: str  # ROUND_WORKLOAD (the built-in round), a target's name, "callable:<qualname>"
    variant: str | None
    params: dict[str, Any] | None
    # one record per node (capture/attribution/node.py); on the CPU source views and
    # allocs too (`type`)
    nodes: list[Node]
    env: dict[str, Any] = field(default_factory=dict)
    created: str = ""
    rank: int | None = None
    options: dict[str, Any] = field(default_factory=dict)  # e.g. {"pdl": True}

    @property
    def total(self) -> int:
        """Nodes of the graph; on the CPU source, launching dispatches (no views/allocs).
        The document's `total_nodes`; `len(nodes)` counts views and allocs as well."""
        return sum(1 for n in self.nodes if n["type"] not in NON_LAUNCHING)

    @property
    def name(self) -> str:
        """What tables call it: the round's variant, or the workload (a target's name, a
        callable's qualified name)."""
        return export_name(self.workload, self.variant)

    @property
    def is_round(self) -> bool:
        """Whether this export is of the built-in decode round (capture/export/workload.py)."""
        return is_round(self.workload)

    @property
    def unit(self) -> str:
        """What one replay of the export's graph is: "round" or "step"."""
        return unit_of(self.workload)

    @property
    def step_order(self) -> tuple[str, ...]:
        """The steps its nodes fall into, in order (the round's); () for a user's step."""
        return step_order(self.workload)

    def frame(self, *, launching_only: bool = True) -> pd.DataFrame:
        import pandas as pd

        df = pd.DataFrame(self.nodes, columns=COLUMNS)
        # a compiled kernel made from several modules lists them (None on other nodes)
        df["fused_modules"] = [n.get("fused_modules") for n in self.nodes]
        # whole numbers or missing, made from the Python ints themselves: through float64
        # (what a column of ints and Nones becomes) a stage of 2**63 - 1 is no int
        df["stage"] = pd.array([n["stage"] for n in self.nodes], dtype="Int64")
        if any("graph" in n for n in self.nodes):  # a step run as several graphs: whose
            df["graph"] = pd.array([n.get("graph") for n in self.nodes], dtype="Int64")
        if launching_only:
            df = df[~df["type"].isin(NON_LAUNCHING)].reset_index(drop=True)
        df["source"] = self.source
        df["variant"] = self.variant
        return df

    def structure(self) -> list[tuple]:
        """What makes two graphs the same graph, node by node in index order: type,
        kernel, scopes and dependencies (not timings, launch shapes or the environment).
        Two builds of one round, or two ranks of it, have the same structure."""
        return [
            (n["type"], n["kernel"], tuple(n["scope_path"]), tuple(n["deps"])) for n in self.nodes
        ]

    def counts(self, *by: str, dropna: bool = False) -> pd.Series:
        """Launching nodes counted by the frame's columns `by` ("step", "type", "stage",
        ...), a Series named "nodes" in the order of its keys; the group-bys reports and
        summarize() share. `dropna`: leave out nodes whose key is missing (a node without a
        kernel name, when counting by kernel); kept by default (a node outside every stage
        has stage <NA>)."""
        return self.frame().groupby(list(by), dropna=dropna).size().rename("nodes")

    def per_stage_step(self) -> pd.DataFrame:
        """Nodes per stage (rows; <NA> outside every stage) and step (columns)."""
        return self.counts("stage", "step").unstack(fill_value=0)

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
        return write_atomic(
            Path(path), json.dumps(self.to_dict(), indent=1, allow_nan=False) + "\n"
        )

    def write_dot(self, path: str | Path) -> Path:
        """Graphviz DOT of the launching nodes (capture/export/dot.py), written atomically."""
        from graph_harness.capture.export.dot import to_dot

        return write_atomic(Path(path), to_dot(self))

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
        if type(version) is not int or version not in READABLE_VERSIONS:  # not True, 1.0
            f.fail(
                "",
                f"export schema version {show(version)} is not one this graph-harness reads "
                f"({', '.join(map(str, READABLE_VERSIONS))}); re-export it with this "
                "graph-harness",
            )
        f.keys("", doc, DOC_KEYS, DOC_OPTIONAL)
        f.string("source", doc["source"], choices=SOURCES)
        f.string("workload", doc["workload"])
        f.string("variant", doc["variant"], none=True)
        f.ints("params", doc["params"], none=True)
        f.integer("rank", doc["rank"], lo=0, none=True)
        f.scalars("env", doc["env"])
        check_options(f, f.scalars("options", doc.get("options", {})))
        f.string("created", doc["created"])
        listed = f.array("nodes", doc["nodes"])
        nodes = [check_node(f, i, n, len(listed), version) for i, n in enumerate(listed)]
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
        """Read and check an export file, or one export of count's output (`PATH#NAME`:
        capture/export/kinds.py); ExportError naming the file and the field, or, for a
        document of another kind, the file to pass instead."""
        from graph_harness.capture.export.kinds import read_export

        return read_export(path)


# a node export as a source of itself (capture/export/sources.py); a document no source
# names is read as one too, its own checks judging it
SOURCE = Source(name="a node export", schema=NODES)


def summarize(export: NodeExport) -> dict[str, pd.DataFrame]:
    """The usual group-bys: per stage x step, per step, per kernel, per type."""
    return {
        "per_stage_step": export.per_stage_step(),
        "per_step": export.counts("step").to_frame(),
        "per_kernel": export.counts("type", "kernel", dropna=True).to_frame(),
        "per_type": export.counts("type").to_frame(),
    }
