"""What an update may not carry: each kernel node of the graph an executable was
instantiated from (its origin) against the node it was updated to, by function and by
launch attribute (plain data: capture/graph/attributes.py reads them), node by node in
the driver's order, for every update that succeeded. An executable's attributes cannot be
read back, and an update can report success while keeping the origin's value of one the
driver does not report (sgl-project/sglang #37657). Flags **unverified** or **warn**;
which and why: docs/sweep.md, "capture/check/updated_launches.py".
"""

from __future__ import annotations

from dataclasses import dataclass

from graph_harness.capture.graph.attributes import GraphLaunches

SEVERITY = {
    "attribute-differs": "unverified",
    "attribute-unreadable": "warn",
    "one-name": "warn",
    "unpaired": "unverified",
}


@dataclass(frozen=True)
class LaunchFlag:
    """One node of one update flagged: `kind` (a key of SEVERITY), the node's place and
    kernel, the attribute where there is one, and what was read, in words."""

    kind: str
    index: int | None
    kernel: str
    attribute: str | None
    detail: str

    @property
    def severity(self) -> str:
        return SEVERITY[self.kind]


def compare_launches(origin: GraphLaunches, target: GraphLaunches) -> list[LaunchFlag]:
    """The flags of one update from `origin`'s graph to `target`'s (module docstring)."""
    if origin.kinds != target.kinds:
        what = f"{origin.nodes} nodes against {target.nodes}"
        if origin.nodes == target.nodes:
            first = next(i for i, (a, b) in enumerate(zip(origin.kinds, target.kinds)) if a != b)
            what = f"node {first} is a {origin.kinds[first]} node, then a {target.kinds[first]}"
        return [LaunchFlag("unpaired", None, "", None, what)]
    out: list[LaunchFlag] = []
    for o, t in zip(origin.kernels, target.kernels, strict=True):
        moved = o.function != t.function
        if moved and o.kernel == t.kernel:
            out.append(LaunchFlag("one-name", t.index, t.kernel, None,
                                  f"function {o.function:#x}, then {t.function:#x}"))  # fmt: skip
        for name, a in o.attributes.items():
            b = t.attributes.get(name)
            if b is None:
                continue
            if a.unreadable or b.unreadable:
                if moved:
                    why = a.unreadable or b.unreadable
                    out.append(LaunchFlag("attribute-unreadable", t.index, t.kernel, name, why))
            elif a.raw != b.raw:
                out.append(LaunchFlag("attribute-differs", t.index, t.kernel, name,
                                      f"{a.shown}, then {b.shown}"))  # fmt: skip
    return out


def function_changes(origin: GraphLaunches, target: GraphLaunches) -> int:
    """Kernel nodes whose function an update from `origin` to `target` changes (0 where
    the nodes cannot be paired)."""
    if origin.kinds != target.kinds:
        return 0
    return sum(o.function != t.function for o, t in zip(origin.kernels, target.kernels))
