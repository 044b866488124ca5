"""The in-round profile as one document (`ProfileResult`): every profiled graph
(capture/profile/nodes.py), its roll-ups (capture/profile/rollup.py) and the priced pairs
(capture/profile/pairs.py) as tables, written as profile.json and a CSV per table, and
its first replays as a timeline, trace.json (capture/profile/trace.py).
Assembles the tables and writes them; the arithmetic is in those modules, and
capture/profile/run.py fills the document on a GPU.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from graph_harness.capture.export.documents import frame_records
from graph_harness.capture.files import write_atomic, write_csv
from graph_harness.capture.profile.breakdown import BREAKDOWN_COLUMNS, pair_breakdown
from graph_harness.capture.profile.calibration import EXCESS_COLUMNS, Excess
from graph_harness.capture.profile.nodes import TIMING, VariantProfile
from graph_harness.capture.profile.pairs import PricedPair, price_pair
from graph_harness.capture.profile.rollup import group_costs, scope_costs
from graph_harness.capture.profile.settings import ProfileSettings
from graph_harness.capture.profile.trace import Names, profile_trace, trace_text
from graph_harness.capture.rows import columns, frame
from graph_harness.capture.stats import median_by_variant

if TYPE_CHECKING:
    from graph_harness.capture.check.findings import CheckResult

PROFILE_SCHEMA = "graph-harness/profile"
# 2: net of the profiler, verdicts; 3: excess bases; 4: launches (replays' lead gaps and
# launch exposure, each graph's host launch: the summary's columns, host_trials)
PROFILE_SCHEMA_VERSION = 4
TRACE_FILE = "trace.json"


@dataclass(frozen=True)
class HostLaunch:
    """A graph's host launch in one trial (capture/profile/run.py host_launches)."""

    variant: str
    trial: int
    us: float  # the trial's median single launch, CPU us


HOST_LAUNCH_COLUMNS = columns(HostLaunch)


@dataclass(frozen=True, kw_only=True)
class ProfileResult:
    """One profile run: every graph's profile, the round's event-timed trials where the
    round was timed too, the pairs to price, and the run's parameters and environment.

    Complete when made, and frozen. Each table is computed on first use and kept (cached
    properties): write, show and plot read one frame instead of pricing the pairs (two
    bootstraps each) and rolling up the scopes again; each caller gets its own copy."""

    profiles: dict[str, VariantProfile]
    # CUPTI's own cost per node on the calibration chains (capture/profile/calibration.py);
    # None where not measured. Each profile carries the excess its net figures use.
    excess: Excess | None = None
    round_trials: pd.DataFrame | None = None  # variant, build, trial, us: event-timed
    # HostLaunch rows: each graph's launch timed on the CPU from an idle device
    # (capture/replay/host.py); None where not measured.
    host_trials: pd.DataFrame | None = None
    pairs: list[tuple[str, str]] = field(default_factory=list)
    params: dict[str, Any] | None = None
    env: dict[str, Any] = field(default_factory=dict)
    created: str = ""
    options: dict[str, Any] = field(default_factory=dict)
    # The checks run before the profile (name -> capture/check CheckResult: profile_step's
    # `check`); not in the profile's files (check.json is their document).
    checks: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> pd.DataFrame:
        return self._summary.copy()

    @cached_property
    def _summary(self) -> pd.DataFrame:
        host = {}
        if self.host_trials is not None and len(self.host_trials):
            host = median_by_variant(self.host_trials).to_dict()
        rows = []
        for n, p in self.profiles.items():
            exposure, why = p.exposure(host.get(n))
            rows.append(
                {
                    **p.summary(),
                    "host_launch_us": host.get(n, math.nan),
                    "launch": exposure,
                    "launch_why": why,
                }
            )
        df = pd.DataFrame(rows)
        if self.round_trials is not None and len(self.round_trials):
            timed = median_by_variant(self.round_trials)
            df["timed_us"] = df.name.map(timed).astype(float)
            df["period_vs_timed"] = df.period_us / df.timed_us - 1
            # no test where the excess was fitted to that very timing (0 by construction)
            own = (df.excess_basis == TIMING).to_numpy()
            df["period_net_vs_timed"] = (df.period_net_us / df.timed_us - 1).mask(own)
            if self.excess is not None and self.excess.per_node:
                # the chains' excess on every graph, whatever its basis: how far it alone
                # would leave each period from the timed one
                x = self.excess.per_node
                chains = {n: p.period_net_at(x) for n, p in self.profiles.items()}
                df["period_chains_us"] = df.name.map(chains).astype(float)
                df["period_chains_vs_timed"] = df.period_chains_us / df.timed_us - 1
        return df

    def excess_table(self) -> pd.DataFrame:
        """CUPTI's excess per node by type, as measured (EXCESS_COLUMNS; empty if not)."""
        if self.excess is None:
            return pd.DataFrame(columns=EXCESS_COLUMNS)
        return self.excess.table.copy()

    def node_table(self) -> pd.DataFrame:
        return self._node_table.copy()

    @cached_property
    def _node_table(self) -> pd.DataFrame:
        return pd.concat(
            [p.nodes.assign(variant=n) for n, p in self.profiles.items()], ignore_index=True
        )

    def scope_table(self, depth: int | None = None) -> pd.DataFrame:
        """Per variant: the round by step (groups), a step by its scope tree."""
        if depth not in self._scope_tables:
            self._scope_tables[depth] = self._scope_table(depth)
        return self._scope_tables[depth].copy()

    @cached_property
    def _scope_tables(self) -> dict[int | None, pd.DataFrame]:
        return {}  # by depth: scope_table(None) and scope_table() are one table

    def _scope_table(self, depth: int | None) -> pd.DataFrame:
        frames = []
        for n, p in self.profiles.items():
            by = group_costs(p.nodes, p.export.step_order) if p.export.is_round else None
            if by is None:
                by = scope_costs(p.nodes, depth)
            frames.append(by.assign(variant=n))
        return pd.concat(frames, ignore_index=True)

    def pair_table(self) -> pd.DataFrame:
        return self._pair_table.copy()

    @cached_property
    def _pair_table(self) -> pd.DataFrame:
        rows = [
            price_pair(
                self.profiles[a],
                self.profiles[b],
                self.round_trials,
                self.host_trials,
                host_after_profiler=bool(self.options.get("host_launch_after_profiler")),
            )
            for a, b in self.pairs
        ]
        return frame(rows, PricedPair)

    def breakdown(self) -> pd.DataFrame:
        return self._breakdown.copy()

    @cached_property
    def _breakdown(self) -> pd.DataFrame:
        frames = [pair_breakdown(self.profiles[a], self.profiles[b]) for a, b in self.pairs]
        return (
            pd.concat(frames, ignore_index=True)
            if frames
            else pd.DataFrame(columns=BREAKDOWN_COLUMNS)
        )

    def replay_table(self) -> pd.DataFrame:
        return self._replay_table.copy()

    @cached_property
    def _replay_table(self) -> pd.DataFrame:
        return pd.concat(
            [
                pd.concat([p.replays, p.net.set_index(p.replays.index)], axis=1).assign(variant=n)
                for n, p in self.profiles.items()
            ],
            ignore_index=True,
        )

    def to_dict(self, depth: int | None = None) -> dict[str, Any]:
        return {
            "schema": PROFILE_SCHEMA,
            "schema_version": PROFILE_SCHEMA_VERSION,
            "env": self.env,
            "created": self.created,
            "params": self.params,
            "options": self.options,
            "summary": frame_records(self.summary()),
            "excess": frame_records(self.excess_table()),
            "calibration": None
            if self.excess is None
            else {"rows": frame_records(self.excess.rows), "note": self.excess.note},
            "matching": {n: p.matching for n, p in self.profiles.items()},
            "scopes": frame_records(self.scope_table(depth)),
            "nodes": frame_records(self.node_table()),
            "replays": frame_records(self.replay_table()),
            "round_trials": None if self.round_trials is None else frame_records(self.round_trials),
            "host_trials": None if self.host_trials is None else frame_records(self.host_trials),
            "pairs": frame_records(self.pair_table()),
            "breakdown": frame_records(self.breakdown()),
        }

    def trace(self, depth: int | None = None, names: Names | None = None) -> dict[str, Any]:
        """The timeline of each graph's first replays (capture/profile/trace.py), as many
        as the profile's settings say (`trace_replays`). `names`: kernel names as shown."""
        replays = self.options.get("trace_replays", ProfileSettings().trace_replays)
        other = {"created": self.created, "device": self.env.get("device")}
        return profile_trace(self.profiles, replays=replays, depth=depth, names=names, other=other)

    def write_trace(
        self, folder: Path, depth: int | None = None, names: Names | None = None
    ) -> str:
        """trace.json into `folder`; its name."""
        write_atomic(folder / TRACE_FILE, trace_text(self.trace(depth, names)))
        return TRACE_FILE

    def write(
        self, folder: Path, depth: int | None = None, names: Names | None = None
    ) -> list[str]:
        """profile.json (everything), a CSV per table and trace.json into `folder`; the
        names written. `names`: kernel names as the timeline shows them."""
        doc = self.to_dict(depth)
        write_atomic(folder / "profile.json", json.dumps(doc, indent=1, allow_nan=False) + "\n")
        written = ["profile.json"]
        tables = {
            "summary": self.summary(),
            "excess": self.excess_table(),
            "scopes": self.scope_table(depth),
            "nodes": self.node_table(),
            "replays": self.replay_table(),
            "pairs": self.pair_table(),
            "breakdown": self.breakdown(),
        }
        for name, df in tables.items():
            if (name in ("pairs", "breakdown") and not self.pairs) or (
                name == "excess" and not len(df)
            ):
                continue
            write_csv(folder / f"profile-{name}.csv", df)
            written.append(f"profile-{name}.csv")
        return [*written, self.write_trace(folder, depth, names)]


def profile_document(
    result: ProfileResult,
    depth: int | None = None,
    checks: dict[str, CheckResult] | None = None,
) -> dict[str, Any]:
    """`profile --json`'s document: the result's (`to_dict`), with the checks made before
    it (`checks`, by name) where there were any."""
    doc = result.to_dict(depth)
    if checks:
        doc["checks"] = {k: r.to_dict() for k, r in checks.items()}
    return doc
