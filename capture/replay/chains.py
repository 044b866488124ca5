"""Chains: N nodes of one kind captured into one graph and replayed, to price one node.

Replay time against N is fitted by least squares (capture/stats.py): the slope is the
per-node dispatch cost (us/node), the intercept the graph's fixed launch cost. The kinds
come from the registry (capture/replay/kinds.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import pandas as pd
import torch

from graph_harness.capture.graph.reader import read_graph
from graph_harness.capture.replay.document import ChainTrial
from graph_harness.capture.replay.kinds import chain_kinds, get_kind
from graph_harness.capture.replay.settings import ReplaySettings
from graph_harness.capture.replay.timing import capture_unrolled, time_replays_us
from graph_harness.capture.rows import frame
from graph_harness.capture.stats import fit_chain
from graph_harness.capture.text import plural


def _chain_call(kind: str, device: torch.device) -> Callable[[], object]:
    """One call of the chain's unit of work; its node count is read from the graph."""
    return get_kind(kind).make(device)


def measure_chains(
    kinds: Sequence[str] | None = None,
    settings: ReplaySettings | None = None,
    *,
    device: torch.device | str = "cuda",
    progress: Callable[[str], None] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(trial rows, fits) for chains of about `settings.lengths` nodes of each kind
    (syncs). Trial rows: kind, calls, nodes, trial, us (one replay). Fits: one per kind.
    `kinds` defaults to every registered kind without PDL."""
    settings = settings or ReplaySettings()
    kinds = chain_kinds() if kinds is None else kinds
    device = torch.device(device)
    if device.type != "cuda":
        raise RuntimeError("chain replays time CUDA graphs: they need a CUDA device")
    graphs, meta = {}, {}
    graph_pool = torch.cuda.graph_pool_handle()
    for kind in kinds:
        if progress:  # each phase named as it starts (reports/progress.py renders them)
            progress(f"capturing {kind} chains")
        call = _chain_call(kind, device)
        per_call = _nodes_per_call(call, graph_pool)
        for calls in chain_calls(settings.lengths, per_call):
            g = capture_unrolled(call, calls, graph_pool=graph_pool)
            nodes = len(read_graph(g.raw_cuda_graph()))
            graphs[(kind, calls)] = g
            meta[(kind, calls)] = nodes
    if progress:
        progress(f"timing {plural(len(graphs), 'chain graph')}")
    names = {f"{k}|{c}": g for (k, c), g in graphs.items()}
    times = time_replays_us(
        names, replays=settings.chain_replays, trials=settings.trials, warmup=settings.warmup
    )
    rows = []
    for key, ts in times.items():
        kind, calls = key.split("|")
        nodes = meta[(kind, int(calls))]
        rows += [ChainTrial(kind, int(calls), nodes, t, v) for t, v in enumerate(ts)]
    trials_df = frame(rows, ChainTrial)
    return trials_df, fits_of(trials_df)


def chain_calls(lengths: Iterable[int], per_call: int) -> list[int]:
    """Calls per chain for chains of about `lengths` nodes of a call that is `per_call`
    nodes: the nearest whole number of calls, at least one more than the shorter length's,
    so that every kind's chains keep as many distinct lengths as were asked for (a fit
    needs two; `--lengths 2 8` of a 10-node call would otherwise be one call twice)."""
    calls: list[int] = []
    for n in sorted(set(lengths)):
        calls.append(max(round(n / per_call), calls[-1] + 1 if calls else 1))
    return calls


def fits_of(trials_df: pd.DataFrame) -> pd.DataFrame:
    out = []
    for kind, g in trials_df.groupby("kind", sort=False):
        wide = g.pivot_table(index="nodes", columns="trial", values="us")
        f = fit_chain(wide.index.to_numpy(), wide.to_numpy())
        out.append(dict(kind=kind, **f.__dict__))
    return pd.DataFrame(out)


def _nodes_per_call(call: Callable[[], object], graph_pool: tuple[int, int]) -> int:
    g = capture_unrolled(call, 1, graph_pool=graph_pool)
    n = len(read_graph(g.raw_cuda_graph()))
    if n < 1:
        raise RuntimeError("a chain call captured no node")
    return n
