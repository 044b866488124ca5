"""The fusion advisor: from any export, what is worth fusing, ranked by time saved.

Candidates, each of which would become one node:
- a *chain*: a maximal run of nodes in one scope (equal scope paths) that form a serial
  chain: each node's only dependency is the node before it, and it is that node's only
  dependent. Fused, the run is one kernel.
- *copies after a kernel*: a maximal such run made only of copies and sets (memcpy and
  memset nodes; on the CPU source copy_, fill_ and zero_ ops) whose first node depends on
  one kernel and nothing else, in any scope. The kernel writes where the copies would
  have (a direct write) and the copies go.
Library kernels (GEMMs, attention, sort and top-k, collectives: `LIBRARY`, matched on the
kernel name) break runs: they are fused by their own libraries, not by a kernel author
writing one kernel for a run, as Inductor leaves them as extern kernels it does not fuse
into. Nodes that launch nothing fusable (events, host nodes, child graphs and their
nodes, empty nodes) break runs too.

Identical candidates form a group: the same scope with stage and layer indices stripped
(`stage*/pack`, `layers.*.attention`) and the same kernels in the same order. A group's
saving is the sum over its occurrences, per replay of the export's graph: per round for
the built-in round, per step for a callable.

Pricing (capture/costs.py: a replay document's fits, or the built-in H200 table): each
removed node at the slope of its type's chain (pricing.TYPE_CHAIN: kernel nodes at
torch-add's, memcpy and memset at theirs); or, where a chain replays the candidate's own
nodes (the built-in round's pack call and compaction copies, at the round's default
shape: pricing.step_chain), at that chain's slope, work included. Where the costs hold a
measured saving of the change a set of candidates makes (a variant pair of the built-in
round, same shape), the measurement stands beside the prediction with whether the
prediction lies in its 95% interval and, if not, the per-node figures that say why.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any

import pandas as pd

from graph_harness.capture.costs import Costs, MeasuredSaving, builtin_costs
from graph_harness.capture.dispatch import NON_LAUNCHING
from graph_harness.capture.export import NodeExport
from graph_harness.capture.params import PART_STEPS, VARIANTS, RoundParams
from graph_harness.capture.pricing import TYPE_CHAIN, step_chain

ADVICE_SCHEMA = "graph-harness/advice"
ADVICE_SCHEMA_VERSION = 1

# Kernels a kernel author does not fuse a run into: vendor GEMMs (cuBLAS, cuBLASLt's
# nvjet, CUTLASS, Inductor's GEMM templates), attention (flash, memory-efficient, cuDNN),
# sorts and top-k (torch's radix sort and gatherTopK, CUB), collectives (NCCL); on the CPU
# source, the ATen ops that dispatch to them. Matched anywhere in the kernel's name,
# mangled or not, ignoring case; Inductor's generated pointwise and reduction kernels
# (INDUCTOR) never are, whatever ops their names list (`..._scaled_dot_product_..._0`).
INDUCTOR = re.compile(r"^triton_(?:poi|red|per|for)_")
LIBRARY = re.compile(
    r"gemm|gemv|xmma|cutlass|nvjet|cublas|splitkreduce|cudnn|flash|fmha|attention|sdpa"
    r"|scaled_dot_product|sort|topk|radix|nccl|triton_tem_"
    r"|^aten\.(?:mm|addmm|bmm|baddbmm|matmul|linear|convolution|_scaled_mm)\.",
    re.IGNORECASE,
)
# CPU-source ops that are copies and sets (on a GPU, memcpy and memset nodes when both
# sides are contiguous).
_CPU_COPIES = ("aten.copy_.",)
_CPU_SETS = ("aten.fill_.", "aten.zero_.")
_KERNEL_TYPES = ("kernel", "aten", "triton", "compiled")  # graph nodes, CPU dispatches
FUSABLE = ("kernel", "copy", "set")  # roles a run is made of
_ROLE_PRICE = {"kernel": "kernel", "library": "kernel", "copy": "memcpy", "set": "memset"}

# A whole numeric part of a dotted or slashed scope name (a ModuleList index), and the
# built-in round's stage: stripped to group the same work at every layer and stage.
_INDEX = re.compile(r"(?<![^./])\d+(?![^./])")
_STAGE = re.compile(r"^stage\d+/")


def node_role(node: dict[str, Any]) -> str | None:
    """'kernel' (fusable work), 'copy', 'set', 'library' (a kernel its library fuses), or
    None: the node launches nothing fusable (an event, a host node, a child graph or a
    node inside one, an empty node; on the CPU source a view or an allocation)."""
    t, name = node["type"], node["kernel"] or ""
    if node["parent"] is not None or t in NON_LAUNCHING:
        return None
    if t == "memcpy" or (t == "aten" and name.startswith(_CPU_COPIES)):
        return "copy"
    if t == "memset" or (t == "aten" and name.startswith(_CPU_SETS)):
        return "set"
    if t in _KERNEL_TYPES:
        library = LIBRARY.search(name) and not INDUCTOR.match(name)
        return "library" if library else "kernel"
    return None


def scope_pattern(label: str) -> str:
    """`stage3/pack` -> `stage*/pack`, `layers.3.attention` -> `layers.*.attention`."""
    return _INDEX.sub("*", _STAGE.sub("stage*/", label))


def _graph(nodes: list[dict[str, Any]]) -> tuple[list[set[int]], list[set[int]]]:
    """Each node's dependencies and its dependents that launch work."""
    deps = [set(n["deps"]) for n in nodes]
    dependents: list[set[int]] = [set() for _ in nodes]
    for i, n in enumerate(nodes):
        if n["type"] not in NON_LAUNCHING:
            for d in deps[i]:
                dependents[d].add(i)
    return deps, dependents


def find_runs(nodes: list[dict[str, Any]]) -> list[tuple[int, ...]]:
    """Maximal serial runs of fusable nodes (kernels, copies, sets) in one scope, single
    nodes included, in order of their first node. Node b follows a in a run when b's
    only dependency is a, a's only dependent is b, and both have the same scope path."""
    roles = [node_role(n) for n in nodes]
    deps, dependents = _graph(nodes)
    nxt: dict[int, int] = {}
    has_prev: set[int] = set()
    for b, n in enumerate(nodes):
        if roles[b] not in FUSABLE or len(deps[b]) != 1:
            continue
        (a,) = deps[b]
        if (
            roles[a] in FUSABLE
            and dependents[a] == {b}
            and nodes[a]["scope_path"] == n["scope_path"]
        ):
            nxt[a] = b
            has_prev.add(b)
    runs = []
    for i in range(len(nodes)):
        if roles[i] in FUSABLE and i not in has_prev:
            run = [i]
            while run[-1] in nxt:
                run.append(nxt[run[-1]])
            runs.append(tuple(run))
    return runs


@dataclass(frozen=True)
class Candidate:
    """One place where nodes would become one: `removed` go; `kept` (the run's first
    kernel, or the kernel the copies follow) stays, doing their work."""

    kind: str  # "chain" | "copies-after-kernel"
    run: tuple[int, ...]  # the run's nodes, in order
    kept: int  # the node that stays
    anchor: int | None  # copies-after-kernel: the kernel they follow (also `kept`)

    @property
    def removed(self) -> tuple[int, ...]:
        return tuple(i for i in self.run if i != self.kept)

    @property
    def nodes(self) -> tuple[int, ...]:
        return self.run if self.anchor is None else (self.anchor, *self.run)


def find_candidates(export: NodeExport) -> list[Candidate]:
    """Every chain of two or more nodes, and every run of copies and sets after a kernel
    (see the module's docstring), in node order."""
    nodes = export.nodes
    roles = [node_role(n) for n in nodes]
    out = []
    for run in find_runs(nodes):
        kernels = [i for i in run if roles[i] == "kernel"]
        if not kernels:  # copies and sets only
            head = set(nodes[run[0]]["deps"])
            if len(head) == 1 and roles[next(iter(head))] in ("kernel", "library"):
                (k,) = head
                out.append(Candidate("copies-after-kernel", run, k, k))
                continue
        if len(run) >= 2:
            out.append(Candidate("chain", run, kernels[0] if kernels else run[0], None))
    return out


# --- groups and their prices ---------------------------------------------------------------


@dataclass(frozen=True)
class Group:
    """Identical candidates (same kind, scope pattern and kernels), priced together."""

    rank: int
    kind: str  # "chain" | "copies-after-kernel"
    scope: str  # the run's scope pattern (`stage*/pack`); the innermost label
    scope_path: tuple[str, ...]  # the pattern of its whole scope path
    kernels: tuple[str, ...]  # the run's kernels in order (a copy or set: its type)
    types: tuple[str, ...]  # the run's node types in order
    anchor_kernel: str | None  # copies-after-kernel: the kernel they follow
    anchor_scope: str | None  # and its scope pattern
    occurrences: int
    nodes_now: int  # per occurrence, the kernel the copies follow included
    nodes_after: int  # per occurrence: 1
    removed_by_type: dict[str, int]  # all occurrences
    us_per_node: float  # the price of one removed node (their mean)
    priced_by: str  # which chain's slope, and why
    saving_us: float  # all occurrences, per replay of the graph
    saving_by_type_us: float  # the same nodes priced by type alone
    steps: tuple[str, ...]  # the built-in round's steps its nodes (and anchor) are in
    scopes: tuple[str, ...]  # the scope labels it occurs in
    nodes: tuple[tuple[int, ...], ...]  # node indices per occurrence, anchor first
    kept: tuple[int, ...]  # per occurrence, the node that stays
    own_chain: str | None  # the chain that priced every occurrence, if one did

    @property
    def removed_nodes(self) -> int:
        return sum(self.removed_by_type.values())


@dataclass(frozen=True)
class Comparison:
    """Groups whose change a variant pair of the round makes, predicted against measured."""

    a: str
    b: str
    ranks: tuple[int, ...]  # the groups, by rank
    removed_nodes: int  # by these groups
    variant_removed_nodes: int  # by A -> B
    predicted_us: float
    predicted_by_type_us: float  # every removed node priced by its type
    predicted_with_b_us: float  # the node that stays priced at B's own chain as well
    measured_us: float
    measured_lo: float
    measured_hi: float
    within: bool | None  # None: not the same change (the nodes removed differ)
    note: str  # within the interval, or why not, in figures


@dataclass
class Advice:
    workload: str
    variant: str | None
    source: str
    compiled: bool | None
    total_nodes: int
    params: dict[str, int] | None
    unit: str  # "round" | "step": what one replay of the export's graph is
    costs: Costs
    groups: list[Group]  # ranked, best first
    comparisons: list[Comparison]
    notes: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        base = self.variant or self.workload.removeprefix("callable:")
        return base + (" [compiled]" if self.compiled else "")

    def frame(self) -> pd.DataFrame:
        """One row per group, ranked (list-valued columns as tuples)."""
        rows = [{**asdict(g), "removed_nodes": g.removed_nodes} for g in self.groups]
        return pd.DataFrame(rows, columns=[*Group.__dataclass_fields__, "removed_nodes"])

    def to_dict(self, top: int | None = None) -> dict[str, Any]:
        """The advice as one JSON-ready document (`advise --json`): the first `top` groups
        (all when None), every comparison, the costs' source and the rules."""
        shown = self.groups if top is None else self.groups[:top]
        return {
            "schema": ADVICE_SCHEMA,
            "schema_version": ADVICE_SCHEMA_VERSION,
            "export": {
                "name": self.name,
                "workload": self.workload,
                "variant": self.variant,
                "source": self.source,
                "compiled": self.compiled,
                "total_nodes": self.total_nodes,
                "params": self.params,
            },
            "unit": f"us per {self.unit}",
            "costs": {
                "source": self.costs.label,
                "builtin": self.costs.builtin,
                "env": self.costs.env,
                "created": self.costs.created,
                "us_per_node": {k: v[0] for k, v in self.costs.slopes.items()},
            },
            "rules": RULES,
            "notes": self.notes,
            "groups_total": len(self.groups),
            "groups": [{**_plain(asdict(g)), "removed_nodes": g.removed_nodes} for g in shown],
            "comparisons": [_plain(asdict(c)) for c in self.comparisons],
        }


RULES = [
    "a chain: a maximal serial run of nodes in one scope (each depends only on the one "
    "before, which nothing else depends on) becomes one kernel",
    "copies after a kernel: a run of memcpy/memset nodes that depends on one kernel alone "
    "goes; the kernel writes their destination directly",
    "library kernels (GEMM, attention, sort/top-k, collectives, matched by name) and nodes "
    "that launch nothing fusable break runs",
    "each removed node is priced at its type's chain slope (kernel: torch-add; memcpy; "
    "memset), or at the chain that replays the candidate's own nodes where there is one",
]


def _plain(d: dict[str, Any]) -> dict[str, Any]:
    """Tuples as lists, for JSON."""

    def conv(v):
        if isinstance(v, tuple | list):
            return [conv(x) for x in v]
        return v

    return {k: conv(v) for k, v in d.items()}


def _type_price(costs: Costs, node_type: str) -> tuple[str, float]:
    """(chain kind, us/node) pricing one removed node of `node_type` by type; a type
    whose chain is missing from the costs is priced as a kernel node."""
    kind = TYPE_CHAIN.get(node_type, TYPE_CHAIN["kernel"])
    if costs.slope(kind) is None:
        kind = TYPE_CHAIN["kernel"]
    return kind, costs.slope(kind)


def _price_type(node: dict[str, Any]) -> str:
    """The node type a removed node is priced as: its own on a graph; on the CPU source
    copies as memcpy, sets as memset, every other op as a kernel."""
    if node["type"] in TYPE_CHAIN:
        return node["type"]
    return _ROLE_PRICE.get(node_role(node) or "kernel", "kernel")


def _own_chains(export: NodeExport, cands: list[Candidate], costs: Costs) -> list[str | None]:
    """For each candidate, the chain kind that replays exactly its nodes with their real
    shapes, if the costs hold one: on the built-in round's graph, at the default shape the
    chains run at, a candidate that is a whole step's call (the shipped pack's ten
    kernels, the allocating compaction's two copies). None elsewhere."""
    d = RoundParams()
    if (
        export.workload != "decode-round"
        or export.source != "cuda-graph"
        or export.variant not in VARIANTS
        or not export.params
        or any(export.params.get(k) != getattr(d, k) for k in ("rows", "k", "shard"))
    ):
        return [None] * len(cands)
    nodes = export.nodes
    calls: dict[tuple, list[int]] = defaultdict(list)  # (stage, step) -> its nodes
    for i, n in enumerate(nodes):
        if n["type"] not in NON_LAUNCHING:
            calls[(n["stage"], n["step"])].append(i)
    out = []
    for c in cands:
        first = nodes[c.run[0]]
        kind = None
        if tuple(calls[(first["stage"], first["step"])]) == c.run:
            kind = step_chain(export.variant, first["step"])
        out.append(kind if kind is not None and costs.slope(kind) is not None else None)
    return out


def _label(node: dict[str, Any]) -> str:
    return node["kernel"] or node["type"]


def advise(export: NodeExport, costs: Costs | None = None) -> Advice:
    """What is worth fusing in `export`, ranked by saving per replay of its graph, priced
    with `costs` (default: the built-in H200 table, labelled as such)."""
    costs = costs or builtin_costs()
    nodes = export.nodes
    cands = find_candidates(export)
    chains = dict(zip(cands, _own_chains(export, cands, costs)))
    by_key: dict[tuple, list[Candidate]] = defaultdict(list)
    for c in cands:
        run = [nodes[i] for i in c.run]
        anchor = nodes[c.anchor] if c.anchor is not None else None
        key = (
            c.kind,
            tuple(scope_pattern(s) for s in run[0]["scope_path"]),
            tuple((n["type"], n["kernel"] or "") for n in run),
            None if anchor is None else (_label(anchor), scope_pattern(anchor["scope"])),
        )
        by_key[key].append(c)
    groups = [_group(export, costs, key, group, chains) for key, group in by_key.items()]
    groups.sort(key=lambda g: (-g.saving_us, -g.removed_nodes, g.nodes[0][0]))
    groups = [_with_rank(g, r) for r, g in enumerate(groups, 1)]
    comparisons, notes = _comparisons(export, groups, costs)
    if export.source == "cpu-dispatch":
        notes.insert(
            0,
            "CPU dispatch count: ATen ops and Triton launches priced as if each were a "
            "graph node; dependencies are program order (one stream)",
        )
    return Advice(
        export.workload,
        export.variant,
        export.source,
        export.options.get("compiled"),
        export.total,
        export.params,
        "round" if export.workload == "decode-round" else "step",
        costs,
        groups,
        comparisons,
        notes,
    )


def _with_rank(g: Group, rank: int) -> Group:
    return Group(**{**asdict(g), "rank": rank})


def _group(
    export: NodeExport,
    costs: Costs,
    key: tuple,
    cands: list[Candidate],
    chains: dict[Candidate, str | None],
) -> Group:
    kind, path, kernels, anchor = key
    nodes = export.nodes
    removed_by_type: dict[str, int] = defaultdict(int)
    saving = by_type = 0.0
    own = {chains[c] for c in cands}
    for c in cands:
        chain = chains[c]
        for i in c.removed:
            removed_by_type[nodes[i]["type"]] += 1
            _, typed = _type_price(costs, _price_type(nodes[i]))
            by_type += typed
            saving += typed if chain is None else costs.slope(chain)
    removed = sum(removed_by_type.values())
    if own == {None}:
        used = sorted({_type_price(costs, _price_type(nodes[i])) for c in cands for i in c.removed})
        priced_by = "by node type: " + ", ".join(f"{k} {us:.3f}" for k, us in used)
    elif None not in own and len(own) == 1:
        (chain,) = own
        priced_by = f"its own chain: {chain} {costs.slope(chain):.3f}"
    else:
        priced_by = "partly its own chain, partly by node type"
    steps = sorted({nodes[i]["step"] for c in cands for i in c.nodes})
    scopes = []
    for c in cands:
        if nodes[c.run[0]]["scope"] not in scopes:
            scopes.append(nodes[c.run[0]]["scope"])
    return Group(
        rank=0,
        kind=kind,
        scope=path[-1] if path else "unscoped",
        scope_path=path,
        kernels=tuple(k or t for t, k in kernels),
        types=tuple(t for t, _ in kernels),
        anchor_kernel=None if anchor is None else anchor[0],
        anchor_scope=None if anchor is None else anchor[1],
        occurrences=len(cands),
        nodes_now=len(cands[0].nodes),
        nodes_after=1,
        removed_by_type=dict(removed_by_type),
        us_per_node=saving / removed,
        priced_by=priced_by,
        saving_us=saving,
        saving_by_type_us=by_type,
        steps=tuple(steps),
        scopes=tuple(scopes),
        nodes=tuple(c.nodes for c in cands),
        kept=tuple(c.kept for c in cands),
        own_chain=next(iter(own)) if len(own) == 1 else None,
    )


# --- predicted against measured ------------------------------------------------------------


def _comparisons(
    export: NodeExport, groups: list[Group], costs: Costs
) -> tuple[list[Comparison], list[str]]:
    """Each measured variant pair A -> B of the costs, A being this export's variant,
    against the groups in the steps B changes. Notes say why there are none, when the
    costs hold pairs of this variant that cannot be compared."""
    pairs = [s for s in costs.savings if s.a == export.variant]
    if export.workload != "decode-round" or export.variant not in VARIANTS or not pairs:
        return [], []
    if export.source != "cuda-graph":
        return [], [
            "no measured savings beside the predictions: the costs' rounds were timed as "
            "CUDA graphs, and this export counts CPU dispatches"
        ]
    if export.params != costs.params:
        diff = {
            k: (costs.params or {}).get(k)
            for k in export.params or {}
            if (costs.params or {}).get(k) != export.params.get(k)
        }
        return [], [
            f"no measured savings beside the predictions: the costs' rounds have {diff}, "
            "this export's differ; count the round with those parameters to compare"
        ]
    out = []
    for s in pairs:
        if s.b not in VARIANTS:
            continue
        changed = [i for i in range(len(PART_STEPS)) if VARIANTS[s.a][i] != VARIANTS[s.b][i]]
        steps = {st for i in changed for st in PART_STEPS[i]}
        members = [g for g in groups if g.steps and set(g.steps) <= steps]
        if members:
            out.append(_compare(export, s, members, costs))
    return out, []


def _nonzero(d: dict[str, int]) -> dict[str, int]:
    return {k: v for k, v in d.items() if v}


def _compare(
    export: NodeExport, s: MeasuredSaving, members: list[Group], costs: Costs
) -> Comparison:
    removed: dict[str, int] = defaultdict(int)
    for g in members:
        for t, n in g.removed_by_type.items():
            removed[t] += n
    n = sum(removed.values())
    predicted = sum(g.saving_us for g in members)
    by_type = sum(g.saving_by_type_us for g in members)
    with_b = predicted + _kept_change(export, s, members, costs)
    ranks = tuple(g.rank for g in members)
    if _nonzero(removed) != _nonzero(s.removed_by_type):
        within, note = (
            None,
            (
                f"not the same change: {s.a} -> {s.b} removes {_nonzero(s.removed_by_type)}, "
                f"these candidates {_nonzero(removed)}"
            ),
        )
    elif s.lo <= predicted <= s.hi:
        within, note = True, f"within the measured interval [{s.lo:.1f}, {s.hi:.1f}]"
    else:
        within, note = False, _why_not(predicted, by_type, with_b, n, s, members, costs)
    return Comparison(
        s.a,
        s.b,
        ranks,
        n,
        s.removed_nodes,
        predicted,
        by_type,
        with_b,
        s.measured_us,
        s.lo,
        s.hi,
        within,
        note,
    )


def _kept_change(
    export: NodeExport, s: MeasuredSaving, members: list[Group], costs: Costs
) -> float:
    """What the node that stays saves when B makes it: for groups priced by their own
    chain, the kept node at A's chain less the one node B makes there at B's chain (the
    shipped pack's node at pack-shipped against the fused pack at pack-fused); 0 where
    either chain is missing (the node that stays is then priced unchanged)."""
    total = 0.0
    for g in members:
        if g.own_chain is None:
            continue
        for k in g.kept:
            step = export.nodes[k]["step"]
            ka, kb = step_chain(s.a, step), step_chain(s.b, step)
            if ka and kb and costs.slope(ka) is not None and costs.slope(kb) is not None:
                total += costs.slope(ka) - costs.slope(kb)
    return total


def _why_not(
    predicted: float,
    by_type: float,
    with_b: float,
    n: int,
    s: MeasuredSaving,
    members: list[Group],
    costs: Costs,
) -> str:
    """Why a prediction misses its measured interval, in the figures that make it up."""
    lo, hi, m = s.lo / n, s.hi / n, s.measured_us / n
    side = "below" if predicted < s.lo else "above"
    text = (
        f"{side} the measured [{s.lo:.1f}, {s.hi:.1f}]. Per removed node the round saved "
        f"{m:.3f} us [{lo:.3f}, {hi:.3f}]; priced here at {predicted / n:.3f}"
    )
    chains = sorted({g.own_chain for g in members if g.own_chain})
    if chains:
        text += (
            f" ({', '.join(chains)}: the candidate's own nodes replayed in a chain, the "
            f"work each carries included; by node type alone {by_type / n:.3f})"
        )
    else:
        kernel = costs.slope(TYPE_CHAIN["kernel"])
        text += f" (by node type: a one-element kernel node costs {kernel:.3f})"
    best = predicted
    if with_b != predicted:
        best = with_b
        inside = s.lo <= with_b <= s.hi
        text += (
            f". With the node that stays priced at {s.b}'s own chain as well, "
            f"{with_b:.1f}: {'within the interval' if inside else 'still ' + side}"
        )
        if inside:
            return text
    if side == "below":
        text += (
            f". The rest, {s.lo - best:.1f} to {s.hi - best:.1f} us ({(s.lo - best) / n:.3f} "
            f"to {(s.hi - best) / n:.3f} per node), is what the nodes cost in the round "
            "beyond a chain replayed back to back, which chains cannot see"
        )
    else:
        text += (
            f". The round saves {best - s.hi:.1f} to {best - s.lo:.1f} us less than "
            "priced: the node that stays takes on work the prediction counts as gone "
            "with the removed nodes"
        )
    return text
