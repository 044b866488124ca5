"""What one recording holds that another does not (`delta RECORDING_A RECORDING_B`): two
releases of an engine, two engines, a program before and after a change.

Three views, each B - A: **graphs**, paired by name (capture/record/sites.py); **steps**,
graphs grouped into one step by a `step_key` regular expression (an engine may run one
decode step as several graphs); **in total**, over every graph each side captured, by
type, kernel, kernel family and module. What each view pairs and sums: docs/compare.md,
"How two recordings are paired".
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from graph_harness.capture.errors import UsageError
from graph_harness.capture.export.delta import NodeDelta, node_delta
from graph_harness.capture.export.documents import frame_records
from graph_harness.capture.export.families import RULES, FamilyRule
from graph_harness.capture.export.nodes import NodeExport, joined_nodes
from graph_harness.capture.patterns import MAX_NAME, checked, deadline
from graph_harness.capture.rows import frame

if TYPE_CHECKING:
    import pandas as pd

    from graph_harness.capture.record.recording import Recording

SCHEMA = "graph-harness/recording-delta"
SCHEMA_VERSION = 1
MAX_KEY = 500  # characters of a step key: a pattern, not a program


class StepKeyError(UsageError, ValueError):
    """A step key that is not a regular expression this can use."""


def step_pattern(text: str) -> re.Pattern:
    if not text or len(text) > MAX_KEY:
        raise StepKeyError(f"--step-key: a regular expression of 1 to {MAX_KEY} characters")
    try:
        pattern = re.compile(text)
    except (re.error, OverflowError, RecursionError) as e:
        raise StepKeyError(f"--step-key {text!r}: not a regular expression: {e}") from None
    checked(pattern, "--step-key")
    if pattern.groups > 1:
        raise StepKeyError(
            f"--step-key {text!r} has {pattern.groups} groups: the first group (or the whole "
            "match, with none) names the step; make the others (?:...)"
        )
    return pattern


def step_of(name: str, pattern: re.Pattern | None) -> str:
    """The step a graph named `name` belongs to (itself, where nothing matches)."""
    if pattern is None:
        return name
    m = pattern.search(name[:MAX_NAME])  # a longer name: Side.step_notes says so
    if m is None:
        return name
    got = m.group(1) if pattern.groups else m.group(0)
    return name if got is None else got


@dataclass
class Side:
    """One recording's graphs by name (a process's rank or pid in front where the
    recording holds several processes), their exports, replays and steps."""

    label: str
    names: list[str]
    exports: dict[str, NodeExport]
    replays: dict[str, int]
    steps: dict[str, list[str]]  # step -> its graphs' names, in capture order
    cut: int = 0  # names longer than the step key searches (patterns.py's MAX_NAME)

    @classmethod
    def of(cls, rec: Recording, label: str, pattern: re.Pattern | None) -> Side:
        # several processes: each graph and step named with its process, by rank where
        # known, else by its place among the recording's processes (a pid never pairs
        # across two runs)
        pids = list(dict.fromkeys(g.pid for g in rec.graphs))
        names, exports, replays = [], {}, {}
        steps: dict[str, list[str]] = {}
        with deadline() as running:
            running.what, running.pattern = "--step-key", getattr(pattern, "pattern", "")
            for g, name in zip(rec.graphs, rec.names()):
                full, step = cls._one(g, name, pids, pattern, exports)
                if full is None:
                    continue
                names.append(full)
                exports[full], replays[full] = g.export, g.replays
                steps.setdefault(step, []).append(full)
        cut = sum(len(n) > MAX_NAME for n in rec.names()) if pattern is not None else 0
        return cls(label, names, exports, replays, steps, cut)

    @staticmethod
    def _one(g: Any, name: str, pids: list, pattern: re.Pattern | None, exports: dict) -> tuple:
        """One graph's full name and step (None: a graph that was not read)."""
        if g.export is None:  # a failed capture whose graph could not be read
            return None, None
        proc = None
        if len(pids) > 1:
            proc = f"rank {g.rank}" if g.rank is not None else f"process {pids.index(g.pid)}"
        full = f"{proc}: {name}" if proc else name
        if full in exports:  # two processes of one rank
            full = f"{full} (pid {g.pid})"
        step = step_of(name, pattern)  # the key is the graph's own name's
        return full, f"{proc}: {step}" if proc else step

    def step_notes(self) -> list[str]:
        """Steps whose graphs may not all run once per step: replayed unequally often, or
        several under one key (`#2`), which summing would count twice; names cut for the
        step key."""
        out = []
        if self.cut:
            out.append(
                f"{self.label}: {self.cut} graph names longer than {MAX_NAME:,} characters: "
                f"the step key searched their first {MAX_NAME:,} only"
            )
        for step, names in self.steps.items():
            if len(names) < 2:
                continue
            counts = [self.replays[n] for n in names]
            if len(set(counts)) > 1:
                out.append(
                    f"{self.label}, step {step}: its {len(names)} graphs were replayed "
                    f"{', '.join(map(str, counts))} times, not once each per step (an "
                    "alternative graph, or one captured twice, is summed into the step)"
                )
        return out

    def joined(self, names: list[str], what: str | None = None) -> NodeExport:
        """One export of the named graphs, each once (a step's `what`, or all of them)."""
        first = next((self.exports[n] for n in names), None)
        return NodeExport(
            source="cuda-graph",
            workload=self.label if what is None else f"{self.label}: {what}",
            variant=None,
            params=None,
            nodes=joined_nodes([(i, self.exports[n].nodes) for i, n in enumerate(names)]),
            env=first.env if first is not None else {},
            created=first.created if first is not None else "",
            options={
                "graphs": len(names),
                "module_depth": first.options.get("module_depth") if first else None,
            },
        )


@dataclass
class RecordingDelta:
    """B - A over two recordings: `graphs` (one row per name either side has), `steps`
    (one row per step, with a step key; else None), `total` (every graph joined, each
    side), and the per-pair deltas behind the rows that both sides have."""

    a: Side
    b: Side
    graphs: pd.DataFrame  # graph, a_nodes, b_nodes, delta, a_replays, b_replays, family
    steps: pd.DataFrame | None  # step, a_graphs, a_nodes, b_graphs, b_nodes, delta, family
    total: NodeDelta
    pairs: dict[str, NodeDelta] = field(default_factory=dict)
    step_pairs: dict[str, NodeDelta] = field(default_factory=dict)
    step_keys: tuple[str | None, str | None] = (None, None)

    @property
    def notes(self) -> list[str]:
        return [*self.a.step_notes(), *self.b.step_notes()] if self.steps is not None else []

    @property
    def only_a(self) -> list[str]:
        return [n for n in self.a.names if n not in self.b.exports]

    @property
    def only_b(self) -> list[str]:
        return [n for n in self.b.names if n not in self.a.exports]

    def headline(self) -> str:
        a, b = self.a, self.b
        parts = [
            f"{a.label} -> {b.label}: {len(a.names)} graphs against {len(b.names)}",
            f"{len(self.pairs)} paired, {len(self.only_a)} only in A, {len(self.only_b)} only in B",
        ]
        if self.steps is not None:
            both = self.steps.dropna(subset=["a_nodes", "b_nodes"])
            parts.append(f"{len(both)} steps on both sides")
        parts.append(f"{self.total.total_delta:+d} nodes over every graph")
        return "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "schema_version": SCHEMA_VERSION,
            "a": self.a.label,
            "b": self.b.label,
            "sign": "b - a",
            "step_key": {"a": self.step_keys[0], "b": self.step_keys[1]},
            "headline": self.headline(),
            "notes": self.notes,
            "scoped_differently": self.total.scoped_differently,
            "only_a": self.only_a,
            "only_b": self.only_b,
            "graphs": frame_records(self.graphs),
            "steps": frame_records(self.steps),
            "total": self.total.to_dict(),
            "pairs": {k: _pair(d) for k, d in self.pairs.items()},
            "step_pairs": {k: _pair(d) for k, d in self.step_pairs.items()},
        }


def _pair(d: NodeDelta) -> dict[str, Any]:
    return {
        "total_a": d.a.total,
        "total_b": d.b.total,
        "total_delta": d.total_delta,
        "by_type": frame_records(d.by_type),
        "by_family": frame_records(d.by_family),
        "by_kernel": frame_records(d.by_kernel),
    }


def gap_families(d: NodeDelta | None, most: int = 2) -> str | None:
    """The kernel families that carry most of a pair's difference, largest change first
    (`GEMM: nvjet +3, GEMM: cuBLAS -3`); None where nothing differs."""
    if d is None or d.by_family is None:
        return None
    fams = d.by_family[d.by_family.delta != 0]
    if fams.empty:
        return None
    fams = fams.assign(size=fams.delta.abs()).sort_values("size", ascending=False, kind="stable")
    return ", ".join(f"{r.family} {int(r.delta):+d}" for r in fams.head(most).itertuples())


@dataclass(frozen=True)
class GraphPair:
    """A graph by name on A's side and B's (None where one lacks it): the delta's
    `graphs` table."""

    graph: str
    a_nodes: int | None
    b_nodes: int | None
    delta: int | None
    a_replays: int | None
    b_replays: int | None
    family: str | None


@dataclass(frozen=True)
class StepPair:
    """A step (its key's group) on both sides: the delta's `steps` table."""

    step: str
    a_graphs: int | None
    a_nodes: int | None
    b_graphs: int | None
    b_nodes: int | None
    delta: int | None
    family: str | None


def recording_delta(
    a: Recording,
    b: Recording,
    *,
    labels: tuple[str, str] = ("A", "B"),
    step_keys: tuple[str | None, str | None] = (None, None),
    rules: tuple[FamilyRule, ...] = RULES,
) -> RecordingDelta:
    """B - A (see the module's notes). `step_keys`: A's and B's step keys (regular
    expressions; None for none). Priced by capture/advise/delta_price.py's
    price_recording."""

    patterns = [step_pattern(k) if k is not None else None for k in step_keys]
    sa = Side.of(a, labels[0], patterns[0])
    sb = Side.of(b, labels[1], patterns[1])
    if not sa.names or not sb.names:
        empty = labels[0] if not sa.names else labels[1]
        raise UsageError(f"{empty} holds no graph that was read: nothing to compare")
    pairs: dict[str, NodeDelta] = {}
    rows = []
    for name in [*sa.names, *(n for n in sb.names if n not in sa.exports)]:
        ea, eb = sa.exports.get(name), sb.exports.get(name)
        d = node_delta(ea, eb, rules) if ea is not None and eb is not None else None
        if d is not None:
            pairs[name] = d
        rows.append(GraphPair(
            graph=name, a_nodes=None if ea is None else ea.total,
            b_nodes=None if eb is None else eb.total, delta=None if d is None else d.total_delta,
            a_replays=sa.replays.get(name), b_replays=sb.replays.get(name),
            family=gap_families(d),
        ))  # fmt: skip
    graphs = frame(rows, GraphPair, counts=True)
    steps, step_pairs = None, {}
    if any(p is not None for p in patterns):
        srows = []
        for step in [*sa.steps, *(s for s in sb.steps if s not in sa.steps)]:
            ga, gb = sa.steps.get(step), sb.steps.get(step)
            ja = sa.joined(ga, f"step {step}") if ga else None
            jb = sb.joined(gb, f"step {step}") if gb else None
            d = None
            if ja is not None and jb is not None:  # one graph a side: its repeated block
                d = node_delta(ja, jb, rules, repeats=len(ga) == len(gb) == 1)
            if d is not None:
                step_pairs[step] = d
            srows.append(StepPair(
                step=step, a_graphs=len(ga) if ga else None,
                a_nodes=None if ja is None else ja.total, b_graphs=len(gb) if gb else None,
                b_nodes=None if jb is None else jb.total,
                delta=None if d is None else d.total_delta, family=gap_families(d),
            ))  # fmt: skip
        steps = frame(srows, StepPair, counts=True)
    total = node_delta(sa.joined(sa.names), sb.joined(sb.names), rules, repeats=False)
    return RecordingDelta(sa, sb, graphs, steps, total, pairs, step_pairs, tuple(step_keys))
