"""Graph nodes matched to Inductor's provenance entries (capture/scopes/provenance.py collects
them), and moved into the module scopes they came from.

Matching runs in launch order: a generated kernel by its name, the extern calls between
two matched kernels by position, those before the first or after the last by count. The
rules in full: docs/your-model.md, "capture/attribution/provenance_match.py"; the
conventions are provenance.py's.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from graph_harness.capture.scopes.provenance import CompiledGraph, ProvenanceEntry

LAUNCHING = ("kernel", "memcpy", "memset")


@dataclass
class Attribution:
    """For each node index attributed: the modules (relative paths) it came from, and how
    it was matched ("kernel": by name; "extern": one to one between matched kernels;
    "externs": together with other extern calls whose nodes could not be told apart;
    "edge": an extern call before the first or after the last matched kernel of a
    compiled call, placed by count, one kernel each: the least certain)."""

    modules: dict[int, tuple[str, ...]] = field(default_factory=dict)
    how: dict[int, str] = field(default_factory=dict)


LOOKAHEAD = 8  # kernels looked at to tell which graph a compiled call runs


def _follows(graph: CompiledGraph, p: int, names: list[str]) -> int:
    """How many of `names` occur, in order, among `graph`'s entries after position p."""
    got, i = 0, p + 1
    for name in names:
        while i < len(graph.entries) and graph.entries[i].name != name:
            i += 1
        if i == len(graph.entries):
            break
        got, i = got + 1, i + 1
    return got


def match(nodes: list[dict[str, Any]], graphs: list[CompiledGraph]) -> Attribution:
    """Match top-level launching nodes (in capture order) to the graphs' entries."""
    seq = [n for n in nodes if n["parent"] is None and n["type"] in LAUNCHING]
    m = _Matching(seq, graphs, {n["kernel"] for n in seq if n["kernel"]})
    hits = m.kernels()
    m.between(hits)
    if hits:
        m.ends(hits)
    return m.out


@dataclass
class _Matching:
    """One match's state: the launching nodes in order, the graphs, the kernel names
    the nodes launch, and the attribution so far."""

    seq: list[dict[str, Any]]
    graphs: list[CompiledGraph]
    names: set[str]
    out: Attribution = field(default_factory=Attribution)

    def kernels(self) -> list[tuple[int, int, int]]:
        """Each generated kernel matched by name, in launch order: (position in seq,
        graph, entry) of each."""
        seq, graphs, out = self.seq, self.graphs, self.out
        where: dict[str, list[tuple[int, int]]] = {}
        for g, graph in enumerate(graphs):
            for p, e in enumerate(graph.entries):
                if e.name in self.names:
                    where.setdefault(e.name, []).append((g, p))
        hits: list[tuple[int, int, int]] = []  # (position in seq, graph, entry)
        anchored = [k for k, n in enumerate(seq) if n["kernel"] in where]
        cur: tuple[int, int] | None = None
        for j, k in enumerate(anchored):
            n = seq[k]
            occ = where[n["kernel"]]
            # Within a compiled call, its graph's next entry of that name. Otherwise a new
            # call begins, of any graph (names such as triton_poi_fused_add_0 recur across
            # graphs, whose counters restart): the occurrence after which the most of the
            # next kernels follow in order, ties to the next graph, then the first.
            pick = None
            if cur is not None:
                pick = next(((g, p) for g, p in occ if g == cur[0] and p > cur[1]), None)
            if pick is None:
                ahead = [seq[i]["kernel"] for i in anchored[j + 1 : j + 1 + LOOKAHEAD]]
                after = cur[0] if cur is not None else -1
                pick = max(
                    occ,
                    key=lambda gp: (_follows(graphs[gp[0]], gp[1], ahead), gp[0] > after, -gp[0]),
                )
            cur = pick
            hits.append((k, *cur))
            out.modules[n["index"]] = graphs[cur[0]].entries[cur[1]].modules
            out.how[n["index"]] = "kernel"
        return hits

    def externs(self, g: int, lo: int, hi: int) -> list[ProvenanceEntry]:
        """The extern calls among graph g's entries lo to hi (those no node names)."""
        return [e for e in self.graphs[g].entries[lo:hi] if e.name not in self.names]

    def give(
        self,
        gap: list[dict],
        ext: list[ProvenanceEntry],
        *,
        exact_only: bool,
        how: str = "extern",
    ) -> None:
        """The nodes of `gap` given to the extern calls `ext`: one kernel each where the
        counts agree, else (unless `exact_only`) all of them together."""
        if not gap or not ext:
            return
        out = self.out
        kernels = [n for n in gap if n["type"] == "kernel"]
        if len(kernels) == len(ext):
            # one kernel per extern call; a library's own memset or copy (cuDNN clearing
            # its workspace, say) goes with the next kernel, the call that issued it
            owner = dict(zip((n["index"] for n in kernels), ext))
            entry = None
            for n in reversed(gap):
                entry = owner.get(n["index"], entry)
                entry = entry if entry is not None else ext[-1]
                out.modules[n["index"]], out.how[n["index"]] = entry.modules, how
        elif not exact_only:
            mods = tuple(sorted({m for e in ext for m in e.modules}))
            for n in gap:
                out.modules[n["index"]], out.how[n["index"]] = mods, "externs"

    def between(self, hits: list[tuple[int, int, int]]) -> None:
        """The nodes between two matched kernels: inside one compiled call, its extern
        calls'; at a boundary between two calls, the edges' by count."""
        seq, graphs = self.seq, self.graphs
        for (k1, g1, p1), (k2, g2, p2) in itertools.pairwise(hits):
            gap = seq[k1 + 1 : k2]
            if g1 == g2 and p2 > p1:  # inside one compiled call: every node between is its
                self.give(gap, self.externs(g1, p1 + 1, p2), exact_only=False)
                continue
            tail = self.externs(g1, p1 + 1, len(graphs[g1].entries))
            head = self.externs(g2, 0, p2)
            if len(gap) >= len(tail) + len(head):  # a boundary between two compiled calls
                self.give(_same_scope(gap[: len(tail)], seq[k1]), tail, exact_only=True, how="edge")
                edge = _same_scope(gap[len(gap) - len(head) :], seq[k2])
                self.give(edge, head, exact_only=True, how="edge")

    def ends(self, hits: list[tuple[int, int, int]]) -> None:
        """The extern calls before the first and after the last matched kernel, by count."""
        seq = self.seq
        (k, g, p), (kl, gl, pl) = hits[0], hits[-1]
        head = self.externs(g, 0, p)
        before = seq[max(0, k - len(head)) : k]
        if len(before) == len(head):
            self.give(_same_scope(before, seq[k]), head, exact_only=True, how="edge")
        tail = self.externs(gl, pl + 1, len(self.graphs[gl].entries))
        after = seq[kl + 1 : kl + 1 + len(tail)]
        if len(after) == len(tail):
            self.give(_same_scope(after, seq[kl]), tail, exact_only=True, how="edge")


def _same_scope(run: list[dict], anchor: dict) -> list[dict]:
    """The nodes of `run` in the anchor's scope."""
    return [n for n in run if n["scope_path"] == anchor["scope_path"]]


# --- scopes from modules -----------------------------------------------------------------


def deepest_common(paths: list[str]) -> str:
    """The deepest module containing every path ("" is the root)."""
    if not paths:
        return ""
    split = [p.split(".") if p else [] for p in paths]
    common: list[str] = []
    for parts in zip(*split):
        if any(x != parts[0] for x in parts):
            break
        common.append(parts[0])
    return ".".join(common)


def _within(path: str, names: set[str]) -> str:
    """`path` cut to its deepest ancestor-or-self in `names` ("" when none)."""
    parts = path.split(".") if path else []
    for i in range(len(parts), 0, -1):
        cand = ".".join(parts[:i])
        if cand in names:
            return cand
    return ""


def resolve(rel: str, enclosing: list[str], known: set[str]) -> str | None:
    """A path relative to the compiled root, as a qualified name in the model: the root
    is the deepest enclosing module scope whose name + `rel` is a module (a block compiled
    on its own), else the model itself. None when it names no module of the model."""
    for label in reversed(enclosing):
        if label in known:
            cand = f"{label}.{rel}" if rel else label
            if cand in known:
                return cand
    return rel if rel == "" or rel in known else None


def refine(
    nodes: list[dict[str, Any]],
    graphs: list[CompiledGraph],
    names: set[str],
    known: set[str],
) -> dict[str, int]:
    """Move the nodes of compiled graphs into the module scopes they came from, in place.

    `names`: the module scopes open-able (qualified names, cut at module_scopes' depth);
    `known`: every module's qualified name (to resolve Dynamo's paths). A node whose
    modules, cut to `names`, are several goes to their deepest common module and carries
    them in `fused_modules`. Returns how many nodes were matched each way, and how many
    carry `fused_modules`."""
    att = match(nodes, graphs)
    counts = {"kernel": 0, "extern": 0, "externs": 0, "edge": 0, "fused": 0}
    for i, rels in att.modules.items():
        n = nodes[i]
        enclosing = list(n["scope_path"])
        full = [resolve(r, enclosing, known) for r in rels]
        cut = sorted({_within(p, names) for p in full if p is not None})
        if not cut:
            continue
        home = _within(deepest_common(cut), names)
        # the module levels below the deepest enclosing scope that already contains home
        have = max(
            (x for x in enclosing if home == x or home.startswith(x + ".")), key=len, default=""
        )
        parts = home.split(".") if home else []
        chain = [".".join(parts[:j]) for j in range(1, len(parts) + 1)]
        chain = [c for c in chain if c in names and len(c) > len(have) and c not in enclosing]
        n["scope_path"] = enclosing + chain
        if chain:
            n["scope"], n["step"], n["stage"] = chain[-1], chain[-1], None
        if len(cut) > 1 and home not in cut:  # not a module and its own children
            n["fused_modules"] = cut
            counts["fused"] += 1
        counts[att.how[i]] += 1
    return counts
