"""Per-node costs to price candidate changes with: from a replay document, or the built-in
table measured on an H200.

A cost table holds each chain kind's slope (us per node in a graph replayed back to back,
capture/replay/chains.py) and, where the document timed rounds, the measured saving of each
variant pair with its 95% interval, so a prediction can be set beside a measurement.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graph_harness.capture.export.documents import ExportError, Fields
from graph_harness.capture.text import printable

if TYPE_CHECKING:
    from graph_harness.capture.replay.document import ReplayResult

# A per-node cost or a round's saving, in microseconds, past this is a broken document, not
# a measurement (a thousand seconds); it would price candidates at infinities.
MAX_US = 1e9

# --- the built-in table ------------------------------------------------------------------
# Copied from docs/data/replay-2026-11-30-builds.json (BENCHMARKS.md, "Dispatch cost per
# node (issue 4)" and "Round replay: measured vs predicted saving"): one NVIDIA H200,
# driver 580.159.04, torch 2.11.0+cu130, triton 3.6.0, 2026-11-30; 30 trials per chain,
# rounds over 5 builds. The package does not read docs/;
# tests/capture/advise/test_advise.py checks these literals against that file so they
# cannot drift from it.

BUILTIN_LABEL = (
    "built-in H200 costs (NVIDIA H200, torch 2.11.0+cu130, measured 2026-11-30; "
    "docs/data/replay-2026-11-30-builds.json)"
)
BUILTIN_ENV = {
    "torch": "2.11.0+cu130",
    "python": "3.12.3",
    "device": "NVIDIA H200",
    "triton": "3.6.0",
    "cuda_runtime": "13.0",
    "driver_cuda_version": "13.0",
    "cuda_bindings": "13.3.1",
}
BUILTIN_CREATED = "2026-11-30T05:49:42+00:00"
BUILTIN_PARAMS = {
    "stages": 24,
    "rows": 8,
    "k": 2048,
    "world": 8,
    "rank": 0,
    "shard": 8192,
    "seed": 0,
}
# chain kind: (slope, 95% interval low, high), us per node
BUILTIN_SLOPES = {
    "triton-empty": (0.6761152581001089, 0.6759478556612104, 0.6762610459799195),
    "torch-add": (1.011343944775696, 1.0111766536997586, 1.011503172327812),
    "memcpy": (0.9053776007259036, 0.9051702699838379, 0.9055639517267421),
    "memset": (0.9160030564609095, 0.9135897078275309, 0.9181749915569422),
    "pack-shipped": (1.4396969775652793, 1.4395233269886658, 1.4399024324210536),
    "pack-compiled": (1.281958065684874, 1.2817636711269036, 1.282136195005472),
    "pack-fused": (1.1677525387708554, 1.1675417063770899, 1.167975801855239),
    "compaction-copies": (1.041315616530973, 1.041166098995198, 1.041464031020152),
    "triton-empty-pdl": (0.574600825717425, 0.5744356084758337, 0.5747511583693676),
    "pack-fused-pdl": (0.7554712227793616, 0.7552488097909894, 0.7557256338617577),
}
# (a, b, nodes removed by type, measured saving us/round, 95% interval low, high)
BUILTIN_SAVINGS = (
    (
        "shipped",
        "fused",
        {"kernel": 216, "memcpy": 48},
        400.5088806152344,
        381.9742155075073,
        415.1676321029663,
    ),
    (
        "shipped-compiled",
        "fused",
        {"kernel": 0, "memcpy": 48},
        57.465553283691406,
        32.804622650146484,
        65.40409564971924,
    ),
    (
        "shipped",
        "direct-compaction",
        {"kernel": 0, "memcpy": 48},
        53.68003845214844,
        43.41254234313965,
        75.87432384490967,
    ),
    (
        "shipped",
        "fused-pack",
        {"kernel": 216, "memcpy": 0},
        355.8401107788086,
        325.15002727508545,
        373.9917755126953,
    ),
)


class CostsError(ExportError):
    """A cost document that cannot price nodes; the message names the file and why."""


@dataclass(frozen=True)
class MeasuredSaving:
    """A round change timed in replay: A -> B saves `measured_us` [lo, hi] per round."""

    a: str
    b: str
    removed_by_type: dict[str, int]  # A - B, by node type
    measured_us: float
    lo: float
    hi: float

    @property
    def removed_nodes(self) -> int:
        return sum(self.removed_by_type.values())


@dataclass(frozen=True)
class Costs:
    label: str  # what a reader is told the prices came from
    slopes: dict[str, tuple[float, float, float]]  # chain kind -> (us/node, lo, hi)
    params: dict[str, int] | None = None  # the round the savings were measured on
    env: dict[str, Any] = field(default_factory=dict)
    created: str = ""
    savings: tuple[MeasuredSaving, ...] = ()
    builtin: bool = False

    def slope(self, kind: str) -> float | None:
        s = self.slopes.get(kind)
        return None if s is None else s[0]

    @classmethod
    def from_replay(cls, result: ReplayResult, label: str) -> Costs:
        """From a ReplayResult (capture/replay/document.py); its fits must hold torch-add, the
        price of a kernel node."""
        f = Fields(label, CostsError)
        slopes = {}
        for i, r in enumerate(result.fits.itertuples()):
            v = float(r.slope)
            if not (math.isfinite(v) and 0 < v <= MAX_US):  # it prices every node it covers
                f.expected(f"fits[{i}].slope", f"a number of us per node in (0, {MAX_US:g}]", v)
            if r.kind in slopes:  # two prices for one kind: which is meant cannot be told
                raise CostsError(
                    f"{label}: fits[{i}].kind: expected each chain kind once, got a second "
                    f"{r.kind!r} fit ({v:g} us/node; the first said {slopes[r.kind][0]:g}); "
                    "give a replay document as `graph-harness replay --out` writes it"
                )
            slopes[r.kind] = (v, float(r.slope_lo), float(r.slope_hi))
        if "torch-add" not in slopes:
            raise CostsError(
                f"{label}: no torch-add fit, the price of a kernel node (fits: "
                f"{', '.join(sorted(slopes)) or 'none'}); run `graph-harness replay` with "
                "--kind torch-add"
            )
        savings = ()
        if result.savings is not None:
            for i, r in enumerate(result.savings.itertuples()):
                for c in ("measured_us", "measured_lo", "measured_hi"):
                    v = float(getattr(r, c))
                    if math.isfinite(v) and abs(v) > MAX_US:
                        f.expected(f"savings[{i}].{c}", f"us per round within +-{MAX_US:g}", v)
            savings = tuple(
                MeasuredSaving(
                    s.a,
                    s.b,
                    {k: int(v) for k, v in json.loads(s.removed_by_type).items()},
                    float(s.measured_us),
                    float(s.measured_lo),
                    float(s.measured_hi),
                )
                for s in result.savings.itertuples()
                # null in the document: not measured, nothing to compare with
                if all(map(math.isfinite, (s.measured_us, s.measured_lo, s.measured_hi)))
            )
        return cls(label, slopes, result.params, dict(result.env), result.created, savings)

    @classmethod
    def read(cls, path: str | Path) -> Costs:
        """A replay document's costs (`graph-harness replay --out DIR`'s replay.json)."""
        from graph_harness.capture.replay.document import ReplayResult

        result = ReplayResult.read_json(path)
        env = result.env
        where = [str(env["device"])] if env.get("device") else []
        where += [f"torch {env['torch']}"] if env.get("torch") else []
        where += [f"measured {result.created}"] if result.created else []
        # the file's name, shown and recorded as text (capture/text.py): it is opened as given
        label = f"costs from {printable(str(path))}" + (f" ({', '.join(where)})" if where else "")
        return cls.from_replay(result, label)


def builtin_costs() -> Costs:
    """The built-in table: the H200 measurements above, labelled as such."""
    return Costs(
        BUILTIN_LABEL,
        dict(BUILTIN_SLOPES),
        dict(BUILTIN_PARAMS),
        dict(BUILTIN_ENV),
        BUILTIN_CREATED,
        tuple(MeasuredSaving(a, b, dict(t), m, lo, hi) for a, b, t, m, lo, hi in BUILTIN_SAVINGS),
        builtin=True,
    )
