"""What CUPTI itself adds to a replayed graph, per node, measured on calibration chains in
the same run, so that a profile's gaps, periods, dispatch shares and priced savings can be
given net of it beside the raw figures (capture/profile/nodes.py subtracts it). A graph
that was also event-timed takes the excess fitted to its own timing instead
(capture/profile/fit.py); the chains' stay the basis of an untimed one and a cross-check
of every timed one. Per node type, two chain lengths, the median over rounds with a 95%
interval. Only `measure_excess` needs a GPU; `excess_per_node` is arithmetic on its rows.
The model, why, and its limits: docs/profile.md, "The calibration chains"."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from graph_harness.capture.rows import columns, frame
from graph_harness.capture.stats import median_interval

# The node types that have activities (and so gaps), each with the chain that prices its
# excess. A node of another type has no activity and no gap.
CALIBRATED_TYPES = ("kernel", "memcpy", "memset")
CHAIN_NODES = (32, 128)  # the two chain lengths, in nodes
REPLAYS = 10  # replays per timed trial and per profiled window
GEMM_SHAPE = (64, 512, 1536)  # rows x in x out: a decode projection's GEMM, bf16
# How near the event-timed period a graph's period net of the profiler should come: the
# report says by how much where it does not.
PERIOD_TOLERANCE = 0.02


@dataclass(frozen=True)
class CalibrationRow:
    """One chain in one calibration round: its event-timed replay and its profiled period."""

    type: str  # the node type the chain is made of
    round: int
    nodes: int  # the chain's length
    timed_us: float
    period_us: float


@dataclass(frozen=True, kw_only=True)
class ExcessRow:
    """One node type's excess per node, the median over rounds with its 95% interval."""

    type: str
    chain: str  # the chain that measured it (CHAINS)
    rounds: int
    us_per_node: float
    us_per_node_lo: float
    us_per_node_hi: float


ROW_COLUMNS = columns(CalibrationRow)
EXCESS_COLUMNS = columns(ExcessRow)


@dataclass(frozen=True)
class Excess:
    """CUPTI's excess per node by node type (us), with the rows it came from (ROW_COLUMNS:
    per type, round and chain length the event-timed replay and the profiled period).
    `note`: why a measurement that was asked for gave nothing (then `per_node` is empty)."""

    per_node: dict[str, float]
    table: pd.DataFrame  # EXCESS_COLUMNS: one row per type
    rows: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=ROW_COLUMNS))
    note: str | None = None

    def of(self, node_type: str) -> float:
        """The excess of one node of `node_type`: 0 for a type with no activity (no gap),
        NaN for one with activities that was not measured."""
        if node_type not in CALIBRATED_TYPES:
            return 0.0
        return self.per_node.get(node_type, math.nan)

    def total(self, types: Iterable[str]) -> float:
        """The excess of a set of nodes, by their types."""
        return float(sum(self.of(t) for t in types))

    def bounds(self) -> list[dict[str, float]]:
        """Every corner of the types' 95% intervals (each type at its low or its high end):
        what a figure net of the excess is judged at besides the point. NaN ends where a
        type's interval is unknown (fewer than two rounds)."""
        t = self.table.set_index("type")
        ends = [[(k, t.us_per_node_lo[k]), (k, t.us_per_node_hi[k])] for k in self.per_node]
        return [dict(c) for c in itertools.product(*ends)] if ends else []


CHAINS = {"kernel": "gemm", "memcpy": "memcpy", "memset": "memset"}  # type -> chain name


def excess_per_node(rows: pd.DataFrame) -> Excess:
    """The per-node excess of each type from calibration rows (ROW_COLUMNS): per round, the
    longer chain's excess (period - timed) less the shorter's, over their node counts'
    difference; the median over rounds, with a 95% bootstrap interval over rounds."""
    missing = [c for c in ROW_COLUMNS if c not in rows]
    if missing:
        raise ValueError(f"calibration rows lack columns {missing}; want {ROW_COLUMNS}")
    per_node, table = {}, []
    for t, g in rows.groupby("type", sort=False):
        lengths = sorted(g.nodes.unique())
        if len(lengths) != 2:
            raise ValueError(f"{t}: calibration needs two chain lengths, got {lengths}")
        short, long_ = lengths
        ex = g.assign(excess=g.period_us - g.timed_us).pivot_table(
            index="round", columns="nodes", values="excess"
        )
        slopes = ((ex[long_] - ex[short]) / (long_ - short)).dropna().to_numpy()
        if not len(slopes):
            raise ValueError(f"{t}: no round measured both chain lengths")
        point = float(np.median(slopes))
        lo, hi = median_interval(slopes) if len(slopes) >= 2 else (math.nan, math.nan)
        per_node[t] = point
        table.append(
            ExcessRow(
                type=t,
                chain=CHAINS.get(t, t),
                rounds=len(slopes),
                us_per_node=point,
                us_per_node_lo=float(lo),
                us_per_node_hi=float(hi),
            )
        )
    return Excess(per_node, frame(table, ExcessRow), rows[ROW_COLUMNS])


def _units(device: object) -> dict[str, Callable[[], object]]:
    """One call of each type's chain unit (its tensors live in the closure)."""
    import torch

    from graph_harness.capture.replay.kinds import get_kind

    m, k, n = GEMM_SHAPE
    a = torch.randn(m, k, device=device, dtype=torch.bfloat16)
    w = torch.randn(k, n, device=device, dtype=torch.bfloat16)
    out = torch.empty(m, n, device=device, dtype=torch.bfloat16)
    return {
        "kernel": lambda: torch.mm(a, w, out=out),
        "memcpy": get_kind("memcpy").make(device),
        "memset": get_kind("memset").make(device),
    }


def measure_excess(
    types: Sequence[str],
    rounds: int,
    *,
    device: object = "cuda",
    progress: Callable[[str], None] | None = None,
) -> Excess:
    """CUPTI's excess per node for each of `types` that has activities (CALIBRATED_TYPES),
    from `rounds` rounds over the chains (each chain timed, then profiled; the chains in
    turn, the order reversed every other round). Captures its own chains and syncs."""
    import torch

    from graph_harness.capture.graph.reader import read_graph
    from graph_harness.capture.profile.activities import ProfileError, record_replays
    from graph_harness.capture.replay.timing import capture_unrolled, time_replays_us

    wanted = [t for t in CALIBRATED_TYPES if t in set(types)]
    if not wanted or rounds < 1:
        return Excess({}, pd.DataFrame(columns=EXCESS_COLUMNS))
    if progress:
        progress(f"measuring the profiler's own cost per node ({', '.join(wanted)} chains)")
    units = _units(torch.device(device))
    pool = torch.cuda.graph_pool_handle()
    graphs = {}
    for t in wanted:
        for n in CHAIN_NODES:
            g = capture_unrolled(units[t], n, graph_pool=pool)
            kinds = [r.kind for r in read_graph(g.raw_cuda_graph())]
            if kinds.count(t) != len(kinds):
                raise RuntimeError(f"the {t} calibration chain captured {sorted(set(kinds))}")
            graphs[(t, len(kinds))] = g
    for g in graphs.values():
        g.replay()  # the first replay instantiates
    torch.cuda.synchronize()
    rows = []
    keys = list(graphs)
    for r in range(rounds):
        for key in keys if r % 2 == 0 else keys[::-1]:
            g = graphs[key]
            (timed,) = time_replays_us({"chain": g}, replays=REPLAYS, trials=1, warmup=0)["chain"]
            what = f"the {key[0]} calibration chain"
            reps = record_replays(g, REPLAYS + 1, warmup=0, what=what)
            if any(len(rep) != key[1] for rep in reps):
                raise ProfileError(
                    f"CUPTI recorded {sorted({len(rep) for rep in reps})} activities per replay "
                    f"of a {key[1]}-node {key[0]} calibration chain"
                )
            ends = [max(a.end_us for a in rep) for rep in reps]
            period = float(np.median(np.diff(ends)))
            rows.append(CalibrationRow(key[0], r, key[1], timed, period))
    del graphs, units
    return excess_per_node(frame(rows, CalibrationRow))
