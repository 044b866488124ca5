"""Node deltas between two exports: what a change added and removed, by type, kernel and
scope. Works on any two exports of the same schema (a round's variants, or a user's own
workload before and after a change).

One sign convention everywhere: delta = B - A (a change that removes nodes is negative);
`removed()` is its negation, for pricing what a change saves."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import pandas as pd

from graph_harness.capture.attribution.repeats import Repeat, repeating_block
from graph_harness.capture.attribution.rollup import scope_tree, tree_order
from graph_harness.capture.errors import UsageError
from graph_harness.capture.export.documents import frame_records
from graph_harness.capture.export.families import OTHER, RULES, FamilyRule, families
from graph_harness.capture.export.nodes import NodeExport


class DeltaError(UsageError, ValueError):
    """Two exports that cannot be compared."""


@dataclass
class NodeDelta:
    a: NodeExport
    b: NodeExport
    by_type: pd.DataFrame  # type, a, b, delta
    by_kernel: pd.DataFrame  # type, kernel, a, b, delta (rows that differ)
    by_step: pd.DataFrame  # step, a, b, delta (per round)
    by_stage_step: pd.DataFrame  # stage, step, a, b, delta (rows that differ)
    by_scope: pd.DataFrame  # depth, scope, a, b, delta: the scope tree, every depth
    # family, a, b, delta (capture/export/families.py); None for CPU dispatch counts
    by_family: pd.DataFrame | None = None
    # graphs no one scoped (dumps): each side's block repeated back to back (a layer,
    # capture/attribution/repeats.py), and one block of each by family; None otherwise
    blocks: tuple[Repeat | None, Repeat | None] | None = None
    by_family_per_block: pd.DataFrame | None = None

    @property
    def is_round(self) -> bool:
        return self.a.is_round and self.b.is_round

    @property
    def scoped_differently(self) -> str | None:
        """One line when A and B were scoped differently (module scopes to different
        depths, or one without them), whose per-module rows then compare different cuts
        of the tree; None when alike, or when an older export does not say."""
        return scoping_difference(self.a, self.b)

    @property
    def total_delta(self) -> int:
        return self.b.total - self.a.total

    def removed_by_type(self) -> dict[str, int]:
        """Nodes of each type that B no longer has (A - B): what a change saves."""
        return {r.type: int(-r.delta) for r in self.by_type.itertuples()}

    def label(self, export: NodeExport) -> str:
        """The variant, or the workload (marked when compiled); two exports of one
        workload are told apart as (A) and (B)."""

        def name(e: NodeExport) -> str:
            base = e.name
            return base + (" [compiled]" if e.options.get("compiled") else "")

        mine, other = name(export), name(self.b if export is self.a else self.a)
        if mine == other:
            mine += " (A)" if export is self.a else " (B)"
        return mine

    def to_dict(self) -> dict:
        """The delta as one JSON-ready document (what `delta --json` prints)."""

        return {
            "schema": "graph-harness/delta",
            "schema_version": 1,
            "a": self.label(self.a),
            "b": self.label(self.b),
            "source": self.a.source,
            "sign": "b - a",
            "total_a": self.a.total,
            "total_b": self.b.total,
            "total_delta": self.total_delta,
            "headline": self.headline(),
            "scoped_differently": self.scoped_differently,
            "by_step": frame_records(self.by_step),
            "by_type": frame_records(self.by_type),
            "by_kernel": frame_records(self.by_kernel),
            "by_stage_step": frame_records(self.by_stage_step),
            "by_scope": frame_records(self.by_scope),
            "by_family": frame_records(self.by_family),
            "blocks": None
            if self.blocks is None
            else [None if r is None else asdict(r) for r in self.blocks],
            "by_family_per_block": frame_records(self.by_family_per_block),
        }

    def blocks_line(self) -> str | None:
        """`repeated block: A 53 nodes x 8, B 48 nodes x 8` (graphs no one scoped)."""
        if self.blocks is None:
            return None

        def one(e: NodeExport, r: Repeat | None) -> str:
            if r is None:
                return f"{self.label(e)} none"
            return f"{self.label(e)} {r.period} nodes x {r.times} (from node {r.start})"

        return "repeated block: " + ", ".join(
            one(e, r) for e, r in zip((self.a, self.b), self.blocks)
        )

    def headline(self) -> str:
        """e.g. `shipped -> fused: -264 nodes/round (pack -216, copy -48)`; for any other
        workload, by the outermost scopes (`layers -320, norm -4`)."""
        if self.is_round:
            rows = self.by_step.itertuples()
            parts = [f"{r.step} {int(r.delta):+d}" for r in rows if r.delta != 0]
        else:
            top = self.by_scope[self.by_scope.depth == 1]
            parts = [f"{r.scope} {int(r.delta):+d}" for r in top.itertuples() if r.delta != 0]
        unit = "nodes/round" if self.a.is_round else "nodes"
        return f"{self.label(self.a)} -> {self.label(self.b)}: {self.total_delta:+d} {unit}" + (
            f" ({', '.join(parts)})" if parts else ""
        )


def _scoping(e: NodeExport) -> str:
    d = e.options["module_depth"]
    return (
        "without module scopes"
        if d is None
        else (f"to {d}" if isinstance(d, str) else f"to depth {d}")
    )


def scoping_difference(a: NodeExport, b: NodeExport) -> str | None:
    """See NodeDelta.scoped_differently."""
    if "module_depth" not in a.options or "module_depth" not in b.options:
        return None  # an export older than schema 3 does not record it
    if a.options["module_depth"] == b.options["module_depth"]:
        scoped = [any(n["scope_path"] for n in e.nodes) for e in (a, b)]
        if a.options["module_depth"] is not None and scoped[0] != scoped[1]:
            bare = "B" if scoped[0] else "A"
            return (
                f"{bare}'s nodes sit in no module although it was recorded with module "
                "scopes (no module of a model ran around its captures, and no object on the "
                "stack held a model containing the modules it called), so the per-module rows "
                "compare a tree with nothing"
            )
        return None
    return (
        f"A was scoped {_scoping(a)}, B {_scoping(b)}: their per-module rows compare "
        "different cuts of the module tree (capture both alike; `--module-scopes` records "
        "every level)"
    )


def _side_by_side(a: pd.Series, b: pd.Series, names: list[str]) -> pd.DataFrame:
    df = pd.concat([a.rename("a"), b.rename("b")], axis=1).fillna(0).astype(int)
    df["delta"] = df["b"] - df["a"]
    df.index.names = names
    return df.reset_index()


def node_delta(
    a: NodeExport, b: NodeExport, rules: tuple[FamilyRule, ...] = RULES, *, repeats: bool = True
) -> NodeDelta:
    """B minus A. Refuses exports of different sources, or rounds of different shapes.
    `rules`: the kernel families' (a user's in front of the built-in ones: read_rules).
    `repeats`: look for the block unscoped graphs repeat (not in several graphs joined
    end to end, where a block could span two)."""
    _refuse_unlike(a, b)
    fa, fb = a.frame(), b.frame()
    fa["kernel"] = fa["kernel"].fillna("")
    fb["kernel"] = fb["kernel"].fillna("")
    by_type = _side_by_side(fa.groupby("type").size(), fb.groupby("type").size(), ["type"])
    by_kernel = _side_by_side(
        fa.groupby(["type", "kernel"]).size(),
        fb.groupby(["type", "kernel"]).size(),
        ["type", "kernel"],
    )
    by_kernel = by_kernel[by_kernel.delta != 0].sort_values("delta").reset_index(drop=True)
    by_step = _side_by_side(fa.groupby("step").size(), fb.groupby("step").size(), ["step"])
    order = {s: i for i, s in enumerate(a.step_order or b.step_order)}
    by_step = by_step.sort_values("step", key=lambda s: s.map(lambda x: order.get(x, 99)))
    by_stage_step = _side_by_side(
        fa.groupby(["stage", "step"], dropna=False).size(),
        fb.groupby(["stage", "step"], dropna=False).size(),
        ["stage", "step"],
    )
    by_stage_step = by_stage_step[by_stage_step.delta != 0].reset_index(drop=True)
    by_family = _by_family(fa, fb, rules) if a.source == "cuda-graph" else None
    blocks, per_block = None, None
    unscoped = not any(n["scope_path"] for e in (a, b) for n in e.nodes)
    if a.source == "cuda-graph" and unscoped and repeats:
        blocks, per_block = _blocks(fa, fb, rules)
    return NodeDelta(
        a,
        b,
        by_type,
        by_kernel,
        by_step.reset_index(drop=True),
        by_stage_step,
        _by_scope(fa, fb),
        by_family,
        blocks,
        per_block,
    )


def _refuse_unlike(a: NodeExport, b: NodeExport) -> None:
    """DeltaError where the two cannot be compared: different sources (graph nodes and CPU
    dispatches), or rounds of different parameters."""
    if a.source != b.source:
        raise DeltaError(
            f"cannot compare a {a.source} export with a {b.source} one: graph nodes and "
            "CPU dispatches are different units; count both on the same kind of machine"
        )
    if a.params and b.params and a.params != b.params:
        diff = {
            k: (a.params.get(k), b.params.get(k))
            for k in a.params
            if a.params.get(k) != b.params.get(k)
        }
        raise DeltaError(
            f"the exports are of rounds with different parameters {diff}; "
            "compare variants of the same shape"
        )


def _blocks(
    fa: pd.DataFrame, fb: pd.DataFrame, rules: tuple[FamilyRule, ...]
) -> tuple[tuple[Repeat | None, Repeat | None], pd.DataFrame | None]:
    """The block each unscoped graph repeats, and where both have one, one block of each
    by family (else None)."""
    blocks = (_block(fa), _block(fb))
    per_block = None
    if None not in blocks:
        ra, rb = blocks
        per_block = _by_family(
            fa.iloc[ra.start : ra.start + ra.period],
            fb.iloc[rb.start : rb.start + rb.period],
            rules,
        )
    return blocks, per_block


def _block(frame: pd.DataFrame) -> Repeat | None:
    """The block a graph's nodes repeat back to back, by type and kernel in capture order."""
    return repeating_block(list(zip(frame["type"], frame["kernel"])))


def _by_family(fa: pd.DataFrame, fb: pd.DataFrame, rules: tuple[FamilyRule, ...]) -> pd.DataFrame:
    """Nodes by kernel family, side by side, in the rules' order (graph nodes only: a CPU
    dispatch count names operators, not kernels)."""
    df = _side_by_side(
        fa.groupby(families(fa, rules)).size(), fb.groupby(families(fb, rules)).size(), ["family"]
    )
    order = {f: i for i, f in enumerate(dict.fromkeys([*(r.family for r in rules), OTHER]))}
    return df.sort_values("family", key=lambda s: s.map(order)).reset_index(drop=True)


def _by_scope(fa: pd.DataFrame, fb: pd.DataFrame) -> pd.DataFrame:
    """The two scope trees side by side, every depth, in tree order (a module only one
    side has counts 0 on the other)."""
    ta, tb = scope_tree(fa), scope_tree(fb)
    keys = ["scope", "depth"]
    df = ta[[*keys, "nodes"]].merge(tb[[*keys, "nodes"]], on=keys, how="outer", sort=False)
    df = df.rename(columns={"nodes_x": "a", "nodes_y": "b"}).fillna({"a": 0, "b": 0})
    df = df.astype({"a": int, "b": int})
    df["delta"] = df["b"] - df["a"]
    df = df.loc[sorted(df.index, key=lambda i: tree_order(df.at[i, "scope"]))]
    return df[["depth", "scope", "a", "b", "delta"]].reset_index(drop=True)
