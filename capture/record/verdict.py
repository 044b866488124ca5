"""One recorded graph's check verdict (`record --check`), as the recording keeps it: what
was compared, at which replays, and the first difference, assertion or reason found.

Statuses: `agrees`, `differs` (replay `first.replay` did not), `assert`, `not verified`,
`not checked` (`reason` says why), `skipped` (nothing to compare by design: not a doubt),
`unchecked` (never replayed). What each means: docs/record.md, "The verdicts as the
recording keeps them".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from graph_harness.capture.export.documents import Fields

VerdictStatus = Literal[
    "agrees", "differs", "assert", "not verified", "not checked", "skipped", "unchecked"
]
STATUSES: tuple[str, ...] = get_args(VerdictStatus)
FAILING = ("differs", "assert")  # the exit code's: a graph computed what its code does not
SHOWN = 64  # replay numbers kept in `compared` (the count is `compared_count`)
LISTED = 12  # tensors listed in a difference


@dataclass(kw_only=True)
class Difference:
    replay: int  # the program's replay of this graph, from 1
    tensor: str
    detail: str
    max_diff: float | None = None
    node: str | None = None  # the node that writes it, where its addresses tell it

    def to_dict(self) -> dict[str, Any]:
        return {
            "replay": self.replay,
            "tensor": self.tensor,
            "detail": self.detail,
            "max_diff": self.max_diff,
            "node": self.node,
        }


@dataclass(kw_only=True)
class GraphVerdict:
    status: VerdictStatus = "unchecked"
    source: str | None = None  # where the eager form came from (forms.py)
    reason: str | None = None  # not checked / not verified: why
    compared: list[int] = field(default_factory=list)  # the first SHOWN replays compared
    compared_count: int = 0
    differences: list[Difference] = field(default_factory=list)  # at the first failing replay
    nondeterministic: list[str] = field(default_factory=list)  # measured, judged by spread
    assertion: str | None = None
    seconds: float = 0.0  # time spent checking (snapshots, eager runs, comparisons)

    @property
    def first(self) -> Difference | None:
        return self.differences[0] if self.differences else None

    def compared_at(self, n: int) -> None:
        self.compared_count += 1
        if len(self.compared) < SHOWN:
            self.compared.append(n)
        if self.status == "unchecked":
            self.status = "agrees"

    def line(self) -> str:
        """The verdict in one line, as the record table shows it."""
        n = self.compared_count
        if self.status == "agrees":
            return f"agrees over {n} compared replay{'s' * (n != 1)}"
        if self.status == "differs" and self.first is not None:
            d = self.first
            more = f" and {len(self.differences) - 1} more" if len(self.differences) > 1 else ""
            return f"differs first at replay {d.replay}: {d.tensor}{more}: {d.detail}"
        if self.status == "assert":
            return f"device-side assertion: {self.assertion}"
        if self.status == "unchecked":
            return "not checked: never replayed" if not n else "unchecked"
        return f"{self.status}: {self.reason}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "source": self.source,
            "reason": self.reason,
            "compared": list(self.compared),
            "compared_count": self.compared_count,
            "differences": [d.to_dict() for d in self.differences],
            "nondeterministic": list(self.nondeterministic),
            "assertion": self.assertion,
            "seconds": self.seconds,
        }

    @classmethod
    def from_dict(cls, doc: Any, f: Fields, path: str) -> GraphVerdict:
        keys = tuple(cls().to_dict())
        f.obj(path, doc)
        f.keys(path, doc, keys)
        p = path + "."
        diffs = []
        for j, d in enumerate(f.array(p + "differences", doc["differences"])):
            q = f"{p}differences[{j}]"
            f.obj(q, d)
            f.keys(q, d, ("replay", "tensor", "detail", "max_diff"), ("node",))
            big = d["max_diff"]
            diffs.append(
                Difference(
                    replay=f.integer(q + ".replay", d["replay"], lo=1),
                    tensor=f.string(q + ".tensor", d["tensor"]),
                    detail=f.string(q + ".detail", d["detail"]),
                    max_diff=None if big is None else f.number(q + ".max_diff", big),
                    node=f.string(q + ".node", d.get("node"), none=True),
                )
            )
        return cls(
            status=f.string(p + "status", doc["status"], choices=STATUSES),
            source=f.string(p + "source", doc["source"], none=True),
            reason=f.string(p + "reason", doc["reason"], none=True),
            compared=[
                f.integer(f"{p}compared[{j}]", x, lo=1)
                for j, x in enumerate(f.array(p + "compared", doc["compared"]))
            ],
            compared_count=f.integer(p + "compared_count", doc["compared_count"], lo=0),
            differences=diffs,
            nondeterministic=[
                f.string(f"{p}nondeterministic[{j}]", x)
                for j, x in enumerate(f.array(p + "nondeterministic", doc["nondeterministic"]))
            ],
            assertion=f.string(p + "assertion", doc["assertion"], none=True),
            seconds=f.number(p + "seconds", doc["seconds"], finite=True),
        )
