"""The sweep as one document (`SweepResult`, schema `graph-harness/sweep`): a row per size,
the shared pool's growth, the checks of the shared pool's graphs, memory by scope, each
size's node export in full (`sweep.json#batch8` for `delta` and `advise`) and, with a
request distribution, the padding section (what each holds: docs/sweep.md, "What
sweep.json holds").

Assembles the tables and writes them; the arithmetic is in padding.py, the measuring in
run.py.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from graph_harness.capture.export.documents import frame_records
from graph_harness.capture.export.kinds import SWEEP_SCHEMA_VERSION
from graph_harness.capture.files import write_atomic, write_csv
from graph_harness.capture.rows import columns, frame
from graph_harness.capture.sweep.estimate import estimate_frame, startup_frame, with_forecast
from graph_harness.capture.sweep.ladders import Padding, padding_of
from graph_harness.capture.sweep.padding import LadderCost
from graph_harness.capture.sweep.tables import (
    SIZE_COLUMNS,
    ModuleMemory,
    ScopeMemory,
    SizeRow,
    SizeTrial,
)
from graph_harness.capture.sweep.truth import SharedRow

if TYPE_CHECKING:
    from graph_harness.capture.check.findings import CheckResult
    from graph_harness.capture.check.interleaved_verdict import InterleavedResult
    from graph_harness.capture.check.updated_verdict import UpdatedResult
    from graph_harness.capture.export.nodes import NodeExport
    from graph_harness.capture.graph.memory import ScopeBytes
    from graph_harness.capture.sweep.alloc_trace import Trace
    from graph_harness.capture.sweep.forecast import Forecast
    from graph_harness.capture.sweep.padding import Distribution

SWEEP_SCHEMA = "graph-harness/sweep"  # capture/export/kinds.py lists it (a test compares)


def size_name(batch: int) -> str:
    """A size's name in the document and its files: `batch8`."""
    return f"batch{batch}"


def batch_of(name: str) -> int:
    """The batch size a size's name names (size_name's inverse)."""
    return int(name.removeprefix("batch"))


SHARED_COLUMNS = columns(SharedRow)
SCOPE_COLUMNS = columns(ScopeMemory)
# The ladders table: a LadderCost's fields after the padding's requests, its name as `ladder`
LADDER_COLUMNS = ["requests", "ladder", *(c for c in columns(LadderCost) if c != "name")]


@dataclass(frozen=True, kw_only=True)
class SweepResult:
    rows: list[SizeRow]
    exports: dict[str, NodeExport]  # by size name, ascending
    name: str
    env: dict[str, Any] = field(default_factory=dict)
    created: str = ""
    options: dict[str, Any] = field(default_factory=dict)
    shared: list[SharedRow] | None = None  # in capture order, largest first
    memory_by_scope: dict[str, list[ScopeBytes] | None] | None = None
    checks: dict[str, CheckResult] = field(default_factory=dict)
    # every size replayed in turns from one shared pool (--check interleaved)
    interleaved: InterleavedResult | None = None
    # one executable switched between every size by update (--check updated)
    updated: UpdatedResult | None = None
    padding: list[Padding] = field(default_factory=list)  # one per request distribution
    why_not: str | None = None  # why time and memory are not here (the CPU)
    # free device memory given back by freeing the shared pool's graphs (pool and
    # executables) and emptying the cache; None where not read
    returned: int | None = None
    forecast: Forecast | None = None  # --predict-from: ladders predicted (with_forecast)
    # each size's own-pool capture's allocator requests (None: not read), and the largest
    # size's model's weights (bytes): what with_forecast predicts from; not written
    traces: dict[int, Trace | None] = field(default_factory=dict, repr=False)
    weights: int | None = None

    @property
    def measured(self) -> bool:
        return self.why_not is None

    def times(self) -> dict[int, float]:
        return {r.batch: r.replay_us for r in self.rows if r.replay_us is not None}

    def sizes_table(self) -> pd.DataFrame:
        rows = [
            {**{k: getattr(r, k) for k in SIZE_COLUMNS if k != "by_type"},
             "by_type": json.dumps(r.by_type, sort_keys=True)}
            for r in self.rows
        ]  # fmt: skip
        return pd.DataFrame(rows, columns=SIZE_COLUMNS)

    def trials_table(self) -> pd.DataFrame:
        rows = [SizeTrial(r.batch, t, us) for r in self.rows for t, us in enumerate(r.trials)]
        return frame(rows, SizeTrial)

    def estimate_table(self) -> pd.DataFrame:
        """The graphs' true memory against the common estimators (capture/sweep/estimate.py
        estimate_frame); empty where the sweep did not read both."""
        return with_forecast(estimate_frame(self.rows, self.shared), self.forecast)

    def startup_table(self) -> pd.DataFrame:
        """Where the sweep's start-up went (capture/sweep/estimate.py startup_frame); empty
        where not measured."""
        return startup_frame(self.rows)

    def shared_table(self) -> pd.DataFrame:
        return frame(self.shared or [], SharedRow)

    def scope_table(self) -> pd.DataFrame:
        rows = [
            ScopeMemory(batch=batch_of(n), scope_path=json.dumps(list(s.scope_path)),
                        reserved=s.reserved, requested=s.requested, held=s.held)
            for n, scopes in (self.memory_by_scope or {}).items()
            for s in scopes or []
        ]  # fmt: skip
        return frame(rows, ScopeMemory)

    def memory_by_module(self, depth: int | None = None) -> pd.DataFrame:
        """Memory by scope cut to `depth` parts of the scope tree (None: every level), per
        size: batch, scope, reserved, requested, held (bytes; capture/graph/memory.py
        ScopeBytes). At every depth a size's reserved bytes sum to what its capture made
        its pool take."""
        from graph_harness.capture.attribution.rollup import tree_label, tree_parts

        rows = [
            ModuleMemory(batch=batch_of(n), scope=tree_label(tree_parts(s.scope_path)[:depth]),
                         reserved=s.reserved, requested=s.requested, held=s.held)
            for n, scopes in (self.memory_by_scope or {}).items()
            for s in scopes or []
        ]  # fmt: skip
        per = frame(rows, ModuleMemory).groupby(["batch", "scope"], as_index=False, sort=False)
        return per.sum()[columns(ModuleMemory)]

    def ladder_table(self) -> pd.DataFrame:
        rows = [
            {**asdict(c), "requests": p.requests, "ladder": c.name,
             "sizes": " ".join(map(str, c.sizes))}
            for p in self.padding
            for c in p.ladders
        ]  # fmt: skip
        return pd.DataFrame(rows, columns=LADDER_COLUMNS)

    def with_padding(
        self,
        requests: Distribution,
        source: str,
        *,
        most: int | None = None,
        budget: int | None = None,
    ) -> SweepResult:
        """This sweep with a padding section added for `requests` (from `source`):
        capture/sweep/ladders.py `padding_of` says which ladders, and how each is costed."""
        added = padding_of(self, requests, source, most=most, budget=budget)
        return _replace(self, padding=[*self.padding, added])

    def with_forecast(self, sampled: Sequence[int], *, budget: int | None = None) -> SweepResult:
        """This sweep with the graph memory of the sizes swept and of vLLM's default
        ladder predicted from the `sampled` sizes (two or three of them), the KV cache
        left under `budget` (bytes): capture/sweep/forecast.py `forecast_of`."""
        from graph_harness.capture.sweep.forecast import forecast_of

        return _replace(self, forecast=forecast_of(self, sampled, budget))

    def to_dict(self) -> dict[str, Any]:
        pad = [
            {
                "requests": p.requests,
                "distribution": [[s, w] for s, w in p.distribution.items()],
                "chosen": list(p.chosen),
                "how": p.how,
                "ladders": [
                    {**asdict(c), "sizes": list(c.sizes), "name": c.name} for c in p.ladders
                ],
            }
            for p in self.padding
        ]
        return {
            "schema": SWEEP_SCHEMA,
            "schema_version": SWEEP_SCHEMA_VERSION,
            "name": self.name,
            "env": self.env,
            "created": self.created,
            "options": self.options,
            "why_not": self.why_not,
            "sizes": [
                {**r, "by_type": json.loads(r["by_type"])}
                for r in frame_records(self.sizes_table())
            ],
            "trials": frame_records(self.trials_table()),
            "shared_pool": frame_records(self.shared_table()) if self.shared is not None else None,
            "returned": self.returned,
            "memory_estimates": frame_records(self.estimate_table()),
            "memory_forecast": None if self.forecast is None else self.forecast.to_dict(),
            "startup": frame_records(self.startup_table()),
            "memory_by_scope": frame_records(self.scope_table()),
            "checks": {k: r.to_dict() for k, r in self.checks.items()},
            "interleaved": None if self.interleaved is None else self.interleaved.to_dict(),
            "updated": None if self.updated is None else self.updated.to_dict(),
            "padding": pad,
            "exports": {k: e.to_dict() for k, e in self.exports.items()},
        }

    def write(self, folder: Path) -> list[str]:
        """sweep.json (everything) and a CSV per table into `folder`; the names written."""
        text = json.dumps(self.to_dict(), indent=1, allow_nan=False) + "\n"
        write_atomic(folder / "sweep.json", text)
        written = ["sweep.json"]
        tables = {"sizes": self.sizes_table(), "trials": self.trials_table()}
        if self.shared is not None:
            tables["shared-pool"] = self.shared_table()
        if self.memory_by_scope:
            tables["memory-by-scope"] = self.scope_table()
        for key, df in (
            ("memory-estimates", self.estimate_table()),
            ("startup", self.startup_table()),
        ):
            if len(df):
                tables[key] = df
        if self.padding:
            tables["ladders"] = self.ladder_table()
        if self.forecast is not None and self.forecast.ladders:
            tables["memory-forecast"] = pd.DataFrame(self.forecast.rows_table())
        for name, df in tables.items():
            if name == "trials" and df.empty:
                continue
            write_csv(folder / f"sweep-{name}.csv", df)
            written.append(f"sweep-{name}.csv")
        return written


def _replace(result: SweepResult, **changes: Any) -> SweepResult:
    from dataclasses import replace

    return replace(result, **changes)
