"""Which modules a torch.compile'd region's kernels came from: Inductor's provenance,
collected while it compiles (matching graph nodes to it: capture/attribution/provenance_match.py;
reusing it in later captures: capture/scopes/provenance_cache.py).

With `trace.provenance_tracking_level=1` Inductor maps each kernel (and extern call) to
the post-grad FX nodes it came from, each with its `nn_module_stack`. While `collecting()`
is open Inductor's config is patched (process-wide: one `module_scopes` at a time); every
step degrades to "no provenance", never to a wrong attribution or an error. How it is
read, and the conventions: docs/your-model.md, "capture/scopes/provenance.py".
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from types import CodeType
from typing import TYPE_CHECKING, Any

from graph_harness.capture.scopes import provenance_cache as cache
from graph_harness.capture.text import printable

if TYPE_CHECKING:
    import torch.fx

ARTIFACT = "inductor_provenance_tracking_node_mappings"
# The kernel -> post-grad nodes map in that artifact (the name says C++ for every backend).
KERNEL_MAP_KEYS = ("cppCodeToPost", "tritonKernelToPost")


@dataclass(frozen=True)
class ProvenanceEntry:
    """One kernel or extern call of a compiled graph, in the order the wrapper runs them."""

    name: str  # "triton_poi_fused_add_0", "extern_kernels.mm", "torch.ops.aten.x.default"
    modules: tuple[str, ...]  # qualified paths (relative to the compiled root) of its FX nodes


@dataclass(eq=False)
class CompiledGraph:
    entries: list[ProvenanceEntry]
    compile_id: str | None = None  # Dynamo's ("0/1": frame 0, its second compile)


@dataclass
class ProvenanceLog:
    """What `collecting()` saw: one CompiledGraph per Inductor compile, in order
    (`graphs`); `graphs_for` adds those kept from earlier captures that still run."""

    graphs: list[CompiledGraph] = field(default_factory=list)
    unavailable: str | None = None  # why no provenance could be read (None: it could)
    # per post-grad graph: (compile id, frame, {node: module}, {node: its op, as a str})
    _post_grad: list[tuple[Any, CodeType | None, dict[str, str | None], dict[str, str]]] = field(
        default_factory=list
    )
    _pending: list[cache.Pending] = field(default_factory=list)
    not_kept: list[str] = field(default_factory=list)  # why a compile here was not kept

    @property
    def supported(self) -> bool:
        return self.unavailable is None

    def graphs_for(self, codes: set[CodeType]) -> tuple[list[CompiledGraph], int, list[str]]:
        """The graphs to match a capture's nodes against: those compiled here, then those
        kept from earlier captures of frames in `codes` whose compiled code still runs.
        Also how many of them were reused, and why any compile of those frames was not
        kept for reuse."""
        self.keep()
        got = cache.offered(codes, exclude=self.graphs)
        return [*self.graphs, *got.graphs], len(got.graphs), got.unkept

    def keep(self, *, final: bool = False) -> None:
        """Bind the compiles seen so far to the cache entries Dynamo made for them (done
        once each compile has returned; one still compiling stays pending, unless
        `final`: collecting has ended, and every compile inside with it)."""
        still = []
        for p in self._pending:
            now = [e.code for e in cache.entries_of(p.frame)]
            returned = any(all(c is not b for b in p.before) for c in now)
            if not final and p.frame is not None and not returned:
                still.append(p)  # no new entry yet: its compile has not returned
                continue
            reason = cache.bind(p)
            if reason is not None:
                self.not_kept.append(reason)
        self._pending = still

    def _on_post_grad(self, graph: torch.fx.Graph) -> None:
        self.keep()  # an earlier compile of this session has returned by now
        frame, cid = cache.current_frame()
        mods = {n.name: module_path_of(n.meta.get("nn_module_stack")) for n in graph.nodes}
        ops = {
            n.name: str(n.target) for n in graph.nodes if getattr(n, "op", None) == "call_function"
        }
        self._post_grad.append((cid, frame, mods, ops))

    def _on_mapping(self, payload: str) -> None:
        try:
            doc = json.loads(payload)
        except (TypeError, ValueError):
            return
        kernels = next((doc[k] for k in KERNEL_MAP_KEYS if isinstance(doc.get(k), dict)), None)
        # The graph this compile generated code for is the post-grad graph of the same
        # compile id (where ids are known), else the last one seen; any older one (a
        # compile that left no kernel map, a backward graph) must never be paired with a
        # later compile, so the list is emptied on every artifact.
        _, cid = cache.current_frame()
        seen, self._post_grad = self._post_grad, []
        same = [p for p in seen if cid is None or p[0] is None or cache.same_compile_id(p[0], cid)]
        if kernels is None or not same:
            return
        _, frame, post, ops = same[-1]
        entries = []
        for key, origins in sorted(kernels.items(), key=lambda kv: _handle(kv[0])):
            name = key.rsplit(":", 1)[0]
            origins = [o for o in origins if isinstance(o, str)]
            origins = extern_anchors(name, origins, ops) or origins
            mods = {post.get(o) for o in origins}
            entries.append(ProvenanceEntry(name, tuple(sorted(m for m in mods if m is not None))))
        graph = CompiledGraph(entries, None if cid is None else str(cid))
        self.graphs.append(graph)
        self._pending.append(cache.pending(graph, frame, cid))


def extern_anchors(name: str, origins: list[str], ops: dict[str, str]) -> list[str]:
    """For an extern call (`extern_kernels.mm`, `torch.ops.aten._scaled_dot_product_...`),
    the origins that are the call itself: the module is the one that made the call, not
    whichever modules made its inputs. Inductor lists the views and masks it folded into
    an extern call's arguments among its origins (HF's attention mask, made once in
    `model`, and the rotary embedding): without this the attention of every layer would go
    to their common ancestor `model`. [] for a generated kernel (fused, by design) or
    where no origin is the call (then every origin counts, as before)."""
    for prefix in ("extern_kernels.", "torch.ops."):
        if name.startswith(prefix):
            op = name[len(prefix) :]
            break
    else:
        return []

    def is_call(target: str) -> bool:  # aten.mm.default is extern_kernels.mm
        return target == op or target.split(".")[1:2] == [op] or target.startswith(op + ".")

    return [o for o in origins if is_call(ops.get(o, ""))]


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
    return qualified(next(g for g in p.groups() if g is not None) for p in _PARTS.finditer(rest))


def qualified(parts: Iterable[str]) -> str:
    """A module path's parts (named_modules' or Dynamo's) as graph-harness names the
    module: torch.compile's `_orig_mod` wrappers are no level, and the name is text
    (capture/text.py), so a model's names and Dynamo's paths of them compare equal."""
    return printable(".".join(p for p in parts if p != "_orig_mod"))


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
        import torch._functorch.config as functorch_config
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

    patch = {level[0]: level[1], "post_grad_custom_post_pass": log._on_post_grad}
    caches = ("fx_graph_cache", "fx_graph_remote_cache")
    patch.update({k: False for k in caches if hasattr(config, k)})
    functorch_patch = {
        k: False
        for k in ("enable_autograd_cache", "enable_remote_autograd_cache")
        if hasattr(functorch_config, k)
    }
    trace = logging.getLogger("torch.__trace")
    handler, old_level = _TraceHandler(log), trace.level
    trace.addHandler(handler)
    if not trace.isEnabledFor(logging.DEBUG):
        trace.setLevel(logging.DEBUG)
    try:
        with config.patch(patch), functorch_config.patch(functorch_patch):
            yield log
    finally:
        trace.removeHandler(handler)
        trace.setLevel(old_level)
        log.keep(final=True)  # every compile inside has returned: bind them for reuse
