"""Which modules a torch.compile'd region's kernels came from, by Inductor's provenance.

Inside a compiled region no scope opens (Dynamo traces the scope calls away), so its
nodes first land in the innermost scope open around the compiled call. Inductor can say
more: with `trace.provenance_tracking_level=1` it maps each kernel it generates (and each
extern call: cuBLAS matmuls, attention) to the post-grad FX nodes it was made from, and
every FX node carries the `nn_module_stack` of the module call that produced it. Put
together, a kernel belongs to the module its FX nodes came from; a kernel fused from
several modules to their deepest common module, and marked with the modules it fused.

How the pieces are read (torch documents provenance tracking as a prototype, so every
step degrades to "no provenance", never to a wrong attribution or an error):
- While `collecting()` is open, Inductor's config is patched: provenance on, its caches
  off (a cache hit skips the code generation that records provenance), and a post-grad
  pass added that reads each post-grad node's module stack (any pass of the user's still
  runs first).
- The kernel -> post-grad-node map is a module global that Inductor resets around each
  compile; it leaves the compile as the structured-trace artifact
  `inductor_provenance_tracking_node_mappings` (what tlparse reads), caught here by a
  handler on the `torch.__trace` logger while collecting.
- Graph nodes are matched to provenance entries in launch order (`attribute`): a
  generated kernel by its name (Inductor names its Triton kernels uniquely within a
  graph); the extern calls between two matched kernels of one compiled graph own the
  nodes between them (one to one when the counts agree, else together, by their
  deepest common module). Entries are recorded in code-generation order, which is the
  order the generated wrapper calls them.

Only compiles that happen while collecting are seen: a step compiled before (warmed up
outside `module_scopes`) keeps its nodes in the enclosing scope, and the export says so.

Conventions. Work written in the compiled root's own forward (outside any submodule:
`self.freqs[input_pos]`, say) belongs to no module, so it never pulls a kernel out of the
submodule whose work it was fused into. Functionalization's write-backs of mutated inputs
(post-grad `copy_` nodes) carry no module either. A kernel counts as fused across modules
(`fused_modules`) when the modules it came from have a deepest common module that is none
of them: `attention` with its own `wqkv` is `attention`'s kernel, `layers.0` with
`layers.1.attention` is a fusion across layers.

Collecting changes process-wide state while open (Inductor's config, a handler on the
`torch.__trace` logger, a warnings filter): one `module_scopes` at a time per process.
If Inductor's `post_grad_custom_post_pass` is already set (the user's), provenance is not
read at all rather than risk changing their compile.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

ARTIFACT = "inductor_provenance_tracking_node_mappings"
# The kernel -> post-grad nodes map in that artifact (the name says C++ for every backend).
KERNEL_MAP_KEYS = ("cppCodeToPost", "tritonKernelToPost")
LAUNCHING = ("kernel", "memcpy", "memset")


@dataclass(frozen=True)
class Entry:
    """One kernel or extern call of a compiled graph, in the order the wrapper runs them."""

    name: str  # "triton_poi_fused_add_0", "extern_kernels.mm", "torch.ops.aten.x.default"
    modules: tuple[str, ...]  # qualified paths (relative to the compiled root) of its FX nodes


@dataclass
class CompiledGraph:
    entries: list[Entry]


@dataclass
class ProvenanceLog:
    """What `collecting()` saw: one CompiledGraph per Inductor compile, in order."""

    graphs: list[CompiledGraph] = field(default_factory=list)
    unavailable: str | None = None  # why no provenance could be read (None: it could)
    _post_grad: list[dict[str, str | None]] = field(default_factory=list)

    @property
    def supported(self) -> bool:
        return self.unavailable is None

    def _on_post_grad(self, graph) -> None:
        self._post_grad.append(
            {n.name: module_path_of(n.meta.get("nn_module_stack")) for n in graph.nodes}
        )

    def _on_mapping(self, payload: str) -> None:
        try:
            doc = json.loads(payload)
        except (TypeError, ValueError):
            return
        kernels = next((doc[k] for k in KERNEL_MAP_KEYS if isinstance(doc.get(k), dict)), None)
        # The graph this compile generated code for is the last post-grad graph seen; any
        # older one (a compile that left no kernel map, a backward graph) must never be
        # paired with a later compile, so the list is emptied on every artifact.
        post = self._post_grad[-1] if self._post_grad else None
        self._post_grad.clear()
        if kernels is None or post is None:
            return
        entries = []
        for key, origins in sorted(kernels.items(), key=lambda kv: _handle(kv[0])):
            name = key.rsplit(":", 1)[0]
            mods = {post.get(o) for o in origins if isinstance(o, str)}
            entries.append(Entry(name, tuple(sorted(m for m in mods if m is not None))))
        self.graphs.append(CompiledGraph(entries))


def _handle(key: str) -> int:
    tail = key.rsplit(":", 1)[-1]
    return int(tail) if tail.isdigit() else 0


_ROOT = re.compile(r"^(?:[LG]\[(?:'[^']*'|\"[^\"]*\")\]|[A-Za-z_][A-Za-z_0-9]*)")
_PARTS = re.compile(r"\._modules\[['\"]([^'\"]+)['\"]\]|\[['\"]([^'\"]+)['\"]\]|\[(\d+)\]|\.(\w+)")


def module_path(source: str) -> str:
    """A Dynamo module source (`L['self'].layers[3]._modules['attention']`,
    `L['self'].layers.3.attention`) as a qualified path relative to the compiled root
    (`layers.3.attention`); `_orig_mod` (a compiled wrapper) is no level."""
    m = _ROOT.match(source)
    rest = source[m.end() :] if m else source
    parts = [next(g for g in p.groups() if g is not None) for p in _PARTS.finditer(rest)]
    return ".".join(p for p in parts if p != "_orig_mod")


def module_path_of(stack: Any) -> str | None:
    """The innermost module of an FX node's `nn_module_stack` ({key: (source, type)})."""
    if not isinstance(stack, dict) or not stack:
        return None
    last = list(stack.values())[-1]
    source = last[0] if isinstance(last, (tuple, list)) and last else None
    return module_path(source) if isinstance(source, str) else None


class _TraceHandler(logging.Handler):
    def __init__(self, log: ProvenanceLog) -> None:
        super().__init__(logging.DEBUG)
        self.log = log

    def emit(self, record: logging.LogRecord) -> None:
        meta = getattr(record, "metadata", None)
        artifact = meta.get("artifact") if isinstance(meta, dict) else None
        if isinstance(artifact, dict) and artifact.get("name") == ARTIFACT:
            self.log._on_mapping(getattr(record, "payload", None))


@contextlib.contextmanager
def collecting() -> Iterator[ProvenanceLog]:
    """Record the provenance of every Inductor compile inside (see the module's notes)."""
    log = ProvenanceLog()
    try:
        from torch._inductor import config
    except Exception:  # pragma: no cover - a torch without Inductor
        log.unavailable = "this torch has no Inductor"
        yield log
        return
    level = (
        ("trace.provenance_tracking_level", 1)
        if hasattr(config.trace, "provenance_tracking_level")
        else ("trace.provenance_tracking", True)
        if hasattr(config.trace, "provenance_tracking")
        else None
    )
    if level is None:
        log.unavailable = "this torch has no Inductor provenance tracking"
        yield log
        return
    if config.post_grad_custom_post_pass is not None:
        # Inductor takes one setting here, in several forms (a pass, a list of passes,
        # inference-aware passes); wrapping the user's would risk calling it wrongly, and
        # their compile must never change because graph-harness watches it.
        log.unavailable = (
            "Inductor's post_grad_custom_post_pass is already set (yours), and "
            "graph-harness reads module paths through that setting"
        )
        yield log
        return

    patch = {level[0]: level[1], "force_disable_caches": True}
    patch["post_grad_custom_post_pass"] = log._on_post_grad
    trace = logging.getLogger("torch.__trace")
    handler, old_level = _TraceHandler(log), trace.level
    trace.addHandler(handler)
    if not trace.isEnabledFor(logging.DEBUG):
        trace.setLevel(logging.DEBUG)
    try:
        with config.patch(patch), warnings.catch_warnings():
            # the caches are off on purpose; torch's note that this disables Dynamo's
            # profile-guided recompilation too says nothing the user needs to act on
            warnings.filterwarnings("ignore", message=r"dynamo_pgo force disabled")
            yield log
    finally:
        trace.removeHandler(handler)
        trace.setLevel(old_level)


# --- matching graph nodes to entries ---------------------------------------------------


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
    names = {n["kernel"] for n in seq if n["kernel"]}
    where: dict[str, list[tuple[int, int]]] = {}
    for g, graph in enumerate(graphs):
        for p, e in enumerate(graph.entries):
            if e.name in names:
                where.setdefault(e.name, []).append((g, p))
    out = Attribution()
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

    def externs(g: int, lo: int, hi: int) -> list[Entry]:
        return [e for e in graphs[g].entries[lo:hi] if e.name not in names]

    def give(gap: list[dict], ext: list[Entry], *, exact_only: bool, how="extern") -> None:
        if not gap or not ext:
            return
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

    def same_scope(run: list[dict], anchor: dict) -> list[dict]:
        return [n for n in run if n["scope_path"] == anchor["scope_path"]]

    for (k1, g1, p1), (k2, g2, p2) in itertools.pairwise(hits):
        gap = seq[k1 + 1 : k2]
        if g1 == g2 and p2 > p1:  # inside one compiled call: every node between is its
            give(gap, externs(g1, p1 + 1, p2), exact_only=False)
            continue
        tail, head = externs(g1, p1 + 1, len(graphs[g1].entries)), externs(g2, 0, p2)
        if len(gap) >= len(tail) + len(head):  # a boundary between two compiled calls
            give(same_scope(gap[: len(tail)], seq[k1]), tail, exact_only=True, how="edge")
            edge = same_scope(gap[len(gap) - len(head) :], seq[k2])
            give(edge, head, exact_only=True, how="edge")
    if hits:
        (k, g, p), (kl, gl, pl) = hits[0], hits[-1]
        head = externs(g, 0, p)
        before = seq[max(0, k - len(head)) : k]
        if len(before) == len(head):
            give(same_scope(before, seq[k]), head, exact_only=True, how="edge")
        tail = externs(gl, pl + 1, len(graphs[gl].entries))
        after = seq[kl + 1 : kl + 1 + len(tail)]
        if len(after) == len(tail):
            give(same_scope(after, seq[kl]), tail, exact_only=True, how="edge")
    return out


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
