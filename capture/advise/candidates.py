"""Where nodes could become one: each node's role, the serial runs of fusable nodes, and
the candidates they make. Finds; does not group, price or rank (capture/advise/groups.py).

Candidates, each of which would become one node: a *chain* (a maximal serial run of nodes
in one scope) and *copies after a kernel* (a maximal such run of memcpy/memset nodes, or
the CPU's copy_/fill_/zero_, depending on one kernel alone). Library kernels (`LIBRARY`:
GEMMs, attention, sort and top-k, collectives) and nodes that launch nothing fusable break
runs (docs/advise.md, "Candidates").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from graph_harness.capture.export.nodes import NodeExport
from graph_harness.capture.graph.node_types import NON_LAUNCHING

# Kernels a kernel author does not fuse a run into: vendor GEMMs (cuBLAS, cuBLASLt's
# nvjet, CUTLASS, Inductor's GEMM templates), attention (flash, memory-efficient, cuDNN),
# sorts and top-k (torch's radix sort and gatherTopK, CUB), collectives (NCCL); on the CPU
# source, the ATen ops that dispatch to them (MoE experts' grouped GEMMs among them).
# Matched anywhere in the kernel's name, mangled or not, ignoring case; Inductor's
# generated pointwise and reduction kernels (INDUCTOR) never are, whatever ops their
# names list (`..._scaled_dot_product_..._0`).
INDUCTOR = re.compile(r"^triton_(?:poi|red|per|for)_")
LIBRARY = re.compile(
    r"gemm|gemv|xmma|cutlass|nvjet|cublas|splitkreduce|cudnn|flash|fmha|attention|sdpa"
    r"|scaled_dot_product|sort|topk|radix|nccl|triton_tem_"
    r"|^aten\.(?:mm|addmm|bmm|baddbmm|matmul|linear|convolution|_scaled_mm"
    r"|_grouped_mm|_scaled_grouped_mm)\.",
    re.IGNORECASE,
)
# CPU-source ops that are copies and sets (on a GPU, memcpy and memset nodes when both
# sides are contiguous).
_CPU_COPIES = ("aten.copy_.",)
_CPU_SETS = ("aten.fill_.", "aten.zero_.")
_KERNEL_TYPES = ("kernel", "aten", "triton", "compiled")  # graph nodes, CPU dispatches
FUSABLE = ("kernel", "copy", "set")  # roles a run is made of


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


Kind = Literal["chain", "copies-after-kernel"]  # a run of kernels, or copies after one


@dataclass(frozen=True)
class Candidate:
    """One place where nodes would become one: `removed` go; `kept` (the run's first
    kernel, or the kernel the copies follow) stays, doing their work."""

    kind: Kind
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
