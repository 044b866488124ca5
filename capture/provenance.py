"""Which modules a torch.compile'd region's kernels came from: Inductor's provenance,
collected while it compiles (matching graph nodes to it: capture/provenance_match.py).

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
  pass added that reads each post-grad node's module stack.
- The kernel -> post-grad-node map is a module global that Inductor resets around each
  compile; it leaves the compile as the structured-trace artifact
  `inductor_provenance_tracking_node_mappings` (what tlparse reads), caught here by a
  handler on the `torch.__trace` logger while collecting.
- Entries are recorded in code-generation order, which is the order the generated
  wrapper calls them; capture/provenance_match.py matches graph nodes to them and moves
  the nodes into their modules' scopes.

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
