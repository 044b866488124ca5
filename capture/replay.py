"""Dispatch-cost replays: what one graph node costs, and whether node counts price a round.

Chains of N nodes of one kind are captured into one graph each and replayed; replay time
against N is fitted by least squares: the slope is the per-node dispatch cost (us/node),
the intercept the graph's fixed launch cost, each with a 95% bootstrap interval over
trials and the fit's R^2. Round variants are then replayed interleaved, and the measured
saving between two variants is set against `delta nodes x per-node cost`.

Results are plain DataFrames plus a versioned JSON document; `reports` renders them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from capture.count import count_round
from capture.cudagraph import read_graph
from capture.documents import ExportError, Fields, load_json, show
from capture.export import NodeExport, environment, now, write_atomic
from capture.params import RoundParams
from capture.timing import capture_unrolled, time_replays_us
from kernels import pack_scores_ids, pack_scores_ids_shipped, selected_local_records
from kernels.launch import HAS_TRITON, triton_kernel

if HAS_TRITON:
    import triton.language as tl

    @triton_kernel
    def _empty_kernel(x_ptr, USE_PDL: tl.constexpr):
        # Does nothing: its node costs only dispatch. Under PDL it still takes part in
        # the handshake, as a real kernel would.
        if USE_PDL:
            tl.extra.cuda.gdc_wait()
            tl.extra.cuda.gdc_launch_dependents()


REPLAY_SCHEMA = "graph-harness/replay"
# Version 2: rounds timed over builds (round_trials carry `build`) and savings carry their
# interval (`measured_lo`/`measured_hi`). Version-1 files written after those landed have
# exactly this content and are read; earlier ones are refused (see ReplayResult.from_dict).
REPLAY_SCHEMA_VERSION = 2
CHAIN_KINDS = (
    "triton-empty",
    "torch-add",
    "memcpy",
    "memset",
    "pack-shipped",
    "pack-compiled",
    "pack-fused",
    "compaction-copies",
)
PDL_KINDS = ("triton-empty-pdl", "pack-fused-pdl")
# Chains that price a round's removed nodes by type (kernel, memcpy) in savings().
PRICE_KINDS = ("torch-add", "memcpy")
DEFAULT_LENGTHS = (1, 16, 64, 256, 1024)
SAVING_PAIRS = (
    ("shipped", "fused"),
    ("shipped-compiled", "fused"),
    ("shipped", "direct-compaction"),
    ("shipped", "fused-pack"),
)


# --- statistics (no GPU needed) -------------------------------------------------------


@dataclass(frozen=True)
class Fit:
    slope: float  # us per node
    intercept: float  # us per replay at zero nodes
    slope_lo: float  # 95% bootstrap interval
    slope_hi: float
    intercept_lo: float
    intercept_hi: float
    r2: float
    points: int


def _ols(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    xm, ym = x.mean(), y.mean()
    sxx = ((x - xm) ** 2).sum()
    if sxx == 0:
        raise ValueError("a fit needs at least two distinct chain lengths")
    slope = ((x - xm) * (y - ym)).sum() / sxx
    return float(slope), float(ym - slope * xm)


def fit_chain(
    nodes: Sequence[float],
    trials: Sequence[Sequence[float]],
    *,
    boot: int = 2000,
    seed: int = 0,
) -> Fit:
    """Least-squares fit of replay time against node count.

    `nodes[i]` is chain i's node count; `trials[i][t]` its time (us) in trial t. The
    bootstrap resamples whole trials (a trial measured every chain length at one moment,
    so its points move together with drift) and refits; the interval is the 2.5 and 97.5
    percentiles."""
    x = np.asarray(nodes, dtype=float)
    y = np.asarray(trials, dtype=float)  # [lengths, trials]
    if y.ndim != 2 or y.shape[0] != len(x):
        raise ValueError(f"trials must be [len(nodes)={len(x)}, trials], got {y.shape}")
    n_trials = y.shape[1]
    if n_trials < 2:
        raise ValueError("a bootstrap needs at least two trials")
    xs = np.repeat(x, n_trials)
    slope, intercept = _ols(xs, y.reshape(-1))
    pred = intercept + slope * xs
    ss_res = ((y.reshape(-1) - pred) ** 2).sum()
    ss_tot = ((y.reshape(-1) - y.mean()) ** 2).sum()
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else 1.0
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, n_trials, size=(boot, n_trials))
    xb = np.repeat(x, n_trials)
    slopes, intercepts = np.empty(boot), np.empty(boot)
    for b in range(boot):
        slopes[b], intercepts[b] = _ols(xb, y[:, picks[b]].reshape(-1))
    lo, hi = np.percentile(slopes, [2.5, 97.5])
    ilo, ihi = np.percentile(intercepts, [2.5, 97.5])
    return Fit(slope, intercept, float(lo), float(hi), float(ilo), float(ihi), float(r2), xs.size)


def saving_interval(
    a_us: Sequence[float] | Sequence[Sequence[float]],
    b_us: Sequence[float] | Sequence[Sequence[float]],
    *,
    boot: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
    """95% bootstrap interval of the saving median(a) - median(b).

    One series per side, or one per build (`[builds][trials]`); the saving is then the
    median over builds of each build's difference of medians. Trial t of `a` and of `b`
    ran back to back (time_replays_us interleaves them), so trials are resampled jointly
    and drift shared by a pair stays shared; builds are resampled too, so the interval
    carries the spread between builds (where the buffers landed), which one build's
    trials cannot show."""
    a = np.asarray(a_us, dtype=float)
    b = np.asarray(b_us, dtype=float)
    a = a[None, :] if a.ndim == 1 else a
    b = b[None, :] if b.ndim == 1 else b
    if a.shape != b.shape or a.ndim != 2:
        raise ValueError(
            f"a and b must be paired series ([trials] or [builds][trials]), got shapes "
            f"{np.shape(a_us)}, {np.shape(b_us)}"
        )
    n_builds, n_trials = a.shape
    if n_trials < 2:
        raise ValueError("a bootstrap needs at least two trials")
    rng = np.random.default_rng(seed)
    pick_b = rng.integers(0, n_builds, size=(boot, n_builds))
    pick_t = rng.integers(0, n_trials, size=(boot, n_builds, n_trials))
    ra = np.take_along_axis(a[pick_b], pick_t, axis=2)  # [boot, builds, trials]
    rb = np.take_along_axis(b[pick_b], pick_t, axis=2)
    diffs = np.median(np.median(ra, axis=2) - np.median(rb, axis=2), axis=1)
    lo, hi = np.percentile(diffs, [2.5, 97.5])
    return float(lo), float(hi)


def round_series(round_trials: pd.DataFrame) -> dict[str, np.ndarray]:
    """Each variant's round times as `[builds][trials]`, the shape saving_interval and
    saving_point take."""
    missing = [c for c in ROUND_TRIAL_COLUMNS if c not in round_trials]
    if missing:
        raise ValueError(
            f"round trials lack columns {missing}; measure_rounds gives {ROUND_TRIAL_COLUMNS}"
        )
    return {
        v: g.pivot(index="build", columns="trial", values="us").to_numpy()
        for v, g in round_trials.groupby("variant")
    }


def saving_point(a_us, b_us) -> float:
    """The saving: median over builds of each build's difference of medians."""
    a = np.atleast_2d(np.asarray(a_us, dtype=float))
    b = np.atleast_2d(np.asarray(b_us, dtype=float))
    return float(np.median(np.median(a, axis=1) - np.median(b, axis=1)))


def predicted_saving_us(delta_by_type: dict[str, int], cost_by_type: dict[str, float]) -> float:
    """Sum over node types of (nodes removed) x (per-node cost of that type). A type with
    no measured cost of its own is priced as a kernel node."""
    return float(
        sum(n * cost_by_type.get(t, cost_by_type["kernel"]) for t, n in delta_by_type.items())
    )


def node_type_delta(a: NodeExport, b: NodeExport) -> dict[str, int]:
    """Nodes of each type in `a` minus those in `b`."""
    ca = a.frame().groupby("type").size()
    cb = b.frame().groupby("type").size()
    types = sorted(set(ca.index) | set(cb.index))
    return {t: int(ca.get(t, 0) - cb.get(t, 0)) for t in types}


def waterfall_us(delta, replay: ReplayResult) -> list[tuple[str, float]]:
    """A change (`delta`, B - A) in microseconds per round, step by step: each step's
    nodes at the per-node cost of their kind (copies at the memcpy chain's, the rest at
    torch-add's), then what remains of the measured difference of medians (kernel work
    that moved: the residual). The bars sum to median(B) - median(A)."""
    cost = replay.fits.set_index("kind").slope
    kernel_us = float(cost["torch-add"])
    copy_us = float(cost.get("memcpy", kernel_us))
    bars = [
        (f"{r.step} x dispatch", float(r.delta) * (copy_us if r.step == "copy" else kernel_us))
        for r in delta.by_step.itertuples()
        if r.delta
    ]
    med = replay.round_trials.groupby("variant").us.median()
    a, b = delta.label(delta.a), delta.label(delta.b)
    bars.append(("kernel work (residual)", float(med[b] - med[a]) - sum(us for _, us in bars)))
    return bars


# --- chains on the GPU ------------------------------------------------------------------


def _chain_call(kind: str, device: torch.device) -> Callable[[], object]:
    """One call of the chain's unit of work; its node count is read from the graph."""
    if kind in ("triton-empty", "triton-empty-pdl"):
        x = torch.empty(1, device=device)
        pdl = kind.endswith("-pdl")
        return lambda: _empty_kernel.launch(device, (1,), x, num_warps=1, pdl=pdl)
    if kind == "torch-add":
        x = torch.zeros(1, device=device)
        return lambda: x.add_(1)
    if kind == "memcpy":
        src, dst = torch.randn(64, device=device), torch.empty(64, device=device)
        return lambda: dst.copy_(src)  # 256 B device-to-device: a memcpy node
    if kind == "memset":
        from cuda.bindings import runtime as rt

        buf = torch.empty(64, device=device)

        def memset():
            stream = torch.cuda.current_stream().cuda_stream
            (err,) = rt.cudaMemsetAsync(buf.data_ptr(), 0, buf.nbytes, stream)
            if int(err) != 0:
                raise RuntimeError(f"cudaMemsetAsync failed: {err!r}")

        return memset
    rows, k, width = 8, 2048, 8192
    idx = torch.randint(0, width, (rows, k), device=device)
    scores = torch.randn(rows, k, device=device)
    rank = torch.tensor(3, dtype=torch.int32, device=device)
    out = torch.empty(rows, k, 2, device=device)
    if kind == "pack-shipped":
        return lambda: pack_scores_ids_shipped(idx, scores, rank, width, out)
    if kind == "pack-compiled":
        from capture.round import compiled_shipped_pack

        compiled = compiled_shipped_pack()
        return lambda: compiled(idx, scores, rank, width, out)
    if kind in ("pack-fused", "pack-fused-pdl"):
        pdl = kind.endswith("-pdl")
        return lambda: pack_scores_ids(idx, scores, rank, width, out, pdl=pdl)
    if kind == "compaction-copies":
        ids = torch.randint(0, 8 * width, (rows, k), dtype=torch.int32, device=device)
        physical, counts = selected_local_records(ids, rank, width)
        kept_p, kept_c = torch.empty_like(physical), torch.empty_like(counts)

        def copies():
            kept_p.copy_(physical)
            kept_c.copy_(counts)

        return copies
    raise ValueError(f"unknown chain kind {kind!r}; choose from {CHAIN_KINDS + PDL_KINDS}")


def measure_chains(
    kinds: Sequence[str] = CHAIN_KINDS,
    lengths: Sequence[int] = DEFAULT_LENGTHS,
    *,
    trials: int = 30,
    replays: int = 20,
    device: torch.device | str = "cuda",
    progress: Callable[[str], None] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(trial rows, fits) for chains of about `lengths` nodes of each kind (syncs).

    Trial rows: kind, calls, nodes, trial, us (one replay). Fits: one row per kind."""
    device = torch.device(device)
    if device.type != "cuda":
        raise RuntimeError("chain replays time CUDA graphs: they need a CUDA device")
    graphs, meta = {}, {}
    mempool = torch.cuda.graph_pool_handle()
    for kind in kinds:
        call = _chain_call(kind, device)
        per_call = _nodes_per_call(call, mempool)
        for n in lengths:
            calls = max(1, round(n / per_call))
            g = capture_unrolled(call, calls, pool=mempool)
            nodes = len(read_graph(g.raw_cuda_graph()))
            graphs[(kind, calls)] = g
            meta[(kind, calls)] = nodes
        if progress:
            progress(f"captured {kind}")
    names = {f"{k}|{c}": g for (k, c), g in graphs.items()}
    times = time_replays_us(names, replays=replays, trials=trials)
    rows = []
    for key, ts in times.items():
        kind, calls = key.split("|")
        nodes = meta[(kind, int(calls))]
        rows += [
            dict(kind=kind, calls=int(calls), nodes=nodes, trial=t, us=v) for t, v in enumerate(ts)
        ]
    trials_df = pd.DataFrame(rows)
    return trials_df, fits_of(trials_df)


def fits_of(trials_df: pd.DataFrame) -> pd.DataFrame:
    out = []
    for kind, g in trials_df.groupby("kind", sort=False):
        wide = g.pivot_table(index="nodes", columns="trial", values="us")
        f = fit_chain(wide.index.to_numpy(), wide.to_numpy())
        out.append(dict(kind=kind, **f.__dict__))
    return pd.DataFrame(out)


def _nodes_per_call(call: Callable[[], object], mempool) -> int:
    g = capture_unrolled(call, 1, pool=mempool)
    n = len(read_graph(g.raw_cuda_graph()))
    if n < 1:
        raise RuntimeError("a chain call captured no node")
    return n


# --- rounds ------------------------------------------------------------------------------


def measure_rounds(
    params: RoundParams,
    variants: Sequence[str],
    *,
    trials: int = 30,
    replays: int = 10,
    builds: int = 3,
    pdl: bool = False,
) -> tuple[pd.DataFrame, dict[str, NodeExport]]:
    """Trial rows (variant, build, trial, us per round) of interleaved replays, and the
    exports (of the first build; every build captures the same structure)."""
    return measure_round_configs(
        params, {v: (v, pdl) for v in variants}, trials=trials, replays=replays, builds=builds
    )


def measure_round_configs(
    params: RoundParams,
    configs: dict[str, tuple[str, bool]],
    *,
    trials: int = 30,
    replays: int = 10,
    builds: int = 3,
) -> tuple[pd.DataFrame, dict[str, NodeExport]]:
    """Like measure_rounds, for labelled (variant, pdl) configurations timed together.

    Each build constructs and captures every configuration afresh, after returning the
    last build's memory to the driver and behind a spacer of a different size, so its
    buffers land elsewhere: on the H200 where a round's data lives moves its time by ~0.5%
    (about 20 us of 4.7 ms; BENCHMARKS.md), more than most single changes save. Trials
    within a build are interleaved; savings() pools the builds."""
    if builds < 1:
        raise ValueError(f"builds must be >= 1, got {builds}")
    rows, exports = [], {}
    for build in range(builds):
        torch.cuda.empty_cache()  # the last build's blocks must not simply be reused
        spacer = torch.empty(
            (2 * build + 1) << 20 | 4096 * 37 * build, dtype=torch.uint8, device="cuda"
        )
        graphs = {}
        mempool = torch.cuda.graph_pool_handle()
        keep = []
        for v, (variant, pdl) in configs.items():
            counted = count_round(params, variant, "cuda", graph_pool=mempool, pdl=pdl)
            counted.captured.graph.instantiate()
            graphs[v] = counted.captured.graph
            exports.setdefault(v, counted.export)
            keep.append(counted)  # the round's buffers must outlive its graph
        times = time_replays_us(graphs, replays=replays, trials=trials)
        rows += [
            dict(variant=v, build=build, trial=t, us=x)
            for v, ts in times.items()
            for t, x in enumerate(ts)
        ]
        del graphs, keep, spacer
    return pd.DataFrame(rows), exports


def per_call_us(fits: pd.DataFrame, chain_trials: pd.DataFrame) -> dict[str, float]:
    """Cost of one call of each chain kind: its slope times its nodes per call."""
    per_call_nodes = (chain_trials.nodes / chain_trials.calls).groupby(chain_trials.kind).median()
    return {k: float(s * per_call_nodes[k]) for k, s in zip(fits["kind"], fits["slope"])}


_PACK_CHAIN = {"shipped": "pack-shipped", "compiled": "pack-compiled", "fused": "pack-fused"}


def shapes_prediction_us(a: str, b: str, stages: int, call_us: dict[str, float]) -> float:
    """Saving predicted from the real-shape chains: per stage, the pack call each variant
    makes, plus the two copies of the allocating compaction. This prices the kernels'
    work as well as their dispatch; NaN when a needed chain was not measured."""
    from capture.params import VARIANTS

    def stage(v):
        pack, compaction = VARIANTS[v]
        cost = call_us.get(_PACK_CHAIN[pack], math.nan)
        if compaction == "alloc-copy":
            cost += call_us.get("compaction-copies", math.nan)
        return cost

    return stages * (stage(a) - stage(b))


def savings(
    round_trials: pd.DataFrame,
    exports: dict[str, NodeExport],
    fits: pd.DataFrame,
    pairs: Sequence[tuple[str, str]] | None = None,
    chain_trials: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Measured saving (per build the difference of medians, then the median over builds;
    with its 95% bootstrap interval over builds and paired trials) against delta nodes x
    per-node cost.

    Per-node costs by node type: kernel nodes at the torch-add chain's slope (the removed
    kernels are small torch elementwise ones), memcpy and memset at their own chains'.
    With `chain_trials`, a second prediction prices the real-shape chains per call.
    `pairs` defaults to saving_pairs(the variants timed)."""
    slope = dict(zip(fits["kind"], fits["slope"]))
    if "torch-add" not in slope:
        raise ValueError(
            "savings price kernel nodes at the torch-add chain's slope: measure the "
            f"'torch-add' chain too (fits have {sorted(slope)})"
        )
    call_us = per_call_us(fits, chain_trials) if chain_trials is not None else {}
    cost = {"kernel": slope["torch-add"]}
    if "memcpy" in slope:
        cost["memcpy"] = slope["memcpy"]
    if "memset" in slope:
        cost["memset"] = slope["memset"]
    med = round_trials.groupby("variant")["us"].median()
    series = round_series(round_trials)
    rows = []
    if pairs is None:
        pairs = saving_pairs([v for v in exports if v in series])
    for a, b in pairs:
        if a not in exports or b not in exports:
            continue
        delta = node_type_delta(exports[a], exports[b])
        predicted = predicted_saving_us(delta, cost)
        measured = saving_point(series[a], series[b])
        lo, hi = saving_interval(series[a], series[b])
        rows.append(
            dict(
                a=a,
                b=b,
                delta_nodes=exports[a].total - exports[b].total,
                delta_by_type=json.dumps(delta),
                round_a_us=float(med[a]),
                round_b_us=float(med[b]),
                measured_us=measured,
                measured_lo=lo,
                measured_hi=hi,
                predicted_us=predicted,
                ratio=measured / predicted if predicted else math.nan,
                predicted_shapes_us=shapes_prediction_us(
                    a, b, int(exports[a].params["stages"]), call_us
                )
                if exports[a].params
                else math.nan,
            )
        )
    return pd.DataFrame(rows, columns=SAVING_COLUMNS)


SAVING_COLUMNS = [
    "a",
    "b",
    "delta_nodes",
    "delta_by_type",
    "round_a_us",
    "round_b_us",
    "measured_us",
    "measured_lo",
    "measured_hi",
    "predicted_us",
    "ratio",
    "predicted_shapes_us",
]


def saving_pairs(variants: Sequence[str]) -> list[tuple[str, str]]:
    """The A -> B pairs to report for these variants: the standard ones (SAVING_PAIRS)
    among them, else the first variant against each of the others."""
    standard = [(a, b) for a, b in SAVING_PAIRS if a in variants and b in variants]
    if standard:
        return standard
    return [(variants[0], v) for v in variants[1:]]


# --- the document ------------------------------------------------------------------------

CHAIN_TRIAL_COLUMNS = ["kind", "calls", "nodes", "trial", "us"]
FIT_COLUMNS = ["kind", *Fit.__dataclass_fields__]
ROUND_TRIAL_COLUMNS = ["variant", "build", "trial", "us"]
# run_replays adds the ratio of measured to the real-shape prediction.
SAVING_OPTIONAL = ["ratio_shapes"]
REPLAY_KEYS = ("schema", "schema_version", "env", "created", "params", "options")
REPLAY_KEYS += ("chain_trials", "fits", "round_trials", "savings")


class ReplayDocumentError(ExportError):
    """A replay document that cannot be read; the message names the file and the field."""


@dataclass
class ReplayResult:
    chain_trials: pd.DataFrame
    fits: pd.DataFrame
    round_trials: pd.DataFrame | None = None
    savings: pd.DataFrame | None = None
    params: dict[str, Any] | None = None
    env: dict[str, Any] = field(default_factory=dict)
    created: str = ""
    options: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        def rec(df):
            # to_dict keeps every float's full repr (to_json would round to 15 digits)
            if df is None:
                return None
            return [
                {k: (v.item() if hasattr(v, "item") else v) for k, v in r.items()}
                for r in df.to_dict(orient="records")
            ]

        return {
            "schema": REPLAY_SCHEMA,
            "schema_version": REPLAY_SCHEMA_VERSION,
            "env": self.env,
            "created": self.created,
            "params": self.params,
            "options": self.options,
            "chain_trials": rec(self.chain_trials),
            "fits": rec(self.fits),
            "round_trials": rec(self.round_trials),
            "savings": rec(self.savings),
        }

    def write_json(self, path: str | Path) -> Path:
        return write_atomic(Path(path), json.dumps(self.to_dict(), indent=1) + "\n")

    @classmethod
    def from_dict(cls, doc: Any, *, where: str = "replay document") -> ReplayResult:
        """Check every field (type and range) of a replay document; ReplayDocumentError
        naming `where` (the file) and the field otherwise.

        Version 2 is read. Version 1 is read where it already holds version 2's content
        (every file written since rounds were timed over builds); an older version-1
        file is refused, saying so."""
        f = Fields(where, ReplayDocumentError)
        if not isinstance(doc, dict):
            f.fail("", f"not a graph-harness replay document: expected an object, got {show(doc)}")
        if doc.get("schema") != REPLAY_SCHEMA:
            got = show(doc.get("schema"))
            f.fail(
                "",
                f"not a graph-harness replay document (schema {got}, expected {REPLAY_SCHEMA!r})",
            )
        version = doc.get("schema_version")
        if type(version) is not int or version not in (1, REPLAY_SCHEMA_VERSION):
            f.fail(
                "",
                f"replay schema version {show(version)} is not the supported "
                f"{REPLAY_SCHEMA_VERSION} (or 1); re-run `graph-harness replay`",
            )
        try:
            return cls._from_checked(f, doc)
        except ReplayDocumentError as e:
            if version == 1:
                raise ReplayDocumentError(
                    f"{e} (a version-1 replay document from before rounds were timed over "
                    "builds: re-run `graph-harness replay` for a version-2 one)"
                ) from None
            raise

    @classmethod
    def _from_checked(cls, f: Fields, doc: dict) -> ReplayResult:
        f.keys("", doc, REPLAY_KEYS)
        f.scalars("env", doc["env"])
        f.string("created", doc["created"])
        f.ints("params", doc["params"], none=True)
        f.scalars("options", doc["options"])
        chain_trials = _records(f, "chain_trials", doc["chain_trials"], CHAIN_TRIAL_COLUMNS)
        fits = _records(f, "fits", doc["fits"], FIT_COLUMNS)
        round_trials = savings = None
        if doc["round_trials"] is not None:
            round_trials = _records(f, "round_trials", doc["round_trials"], ROUND_TRIAL_COLUMNS)
        if doc["savings"] is not None:
            savings = _records(f, "savings", doc["savings"], SAVING_COLUMNS, SAVING_OPTIONAL)
        return cls(
            chain_trials,
            fits,
            round_trials,
            savings,
            doc["params"],
            doc["env"],
            doc["created"],
            doc["options"],
        )

    @classmethod
    def read_json(cls, path: str | Path) -> ReplayResult:
        """Read and check a replay file; ReplayDocumentError naming the file and field."""
        return cls.from_dict(
            load_json(path, "replay document", ReplayDocumentError), where=str(path)
        )


_TEXT_COLUMNS = {"kind", "variant", "a", "b", "delta_by_type"}
_COUNT_COLUMNS = {"calls": 1, "nodes": 0, "trial": 0, "build": 0, "points": 0}


def _records(
    f: Fields, name: str, rows: object, columns: list[str], optional: list[str] = ()
) -> pd.DataFrame:
    """A list of records with exactly `columns` (and any of `optional`), each value of its
    column's type, as a DataFrame with those columns (also when the list is empty)."""
    for i, r in enumerate(f.array(name, rows)):
        p = f"{name}[{i}]"
        f.keys(p, f.obj(p, r), tuple(columns), tuple(optional))
        for c, v in r.items():
            if c in _TEXT_COLUMNS:
                f.string(f"{p}.{c}", v)
            elif c in _COUNT_COLUMNS:
                f.integer(f"{p}.{c}", v, lo=_COUNT_COLUMNS[c])
            elif c == "delta_nodes":
                f.integer(f"{p}.{c}", v)
            else:
                f.number(f"{p}.{c}", v)
        if "delta_by_type" in r:
            _check_delta_by_type(f, f"{p}.delta_by_type", r["delta_by_type"])
    present = list(columns) + [c for c in optional if any(c in r for r in rows)]
    return pd.DataFrame(rows, columns=present)


def _check_delta_by_type(f: Fields, path: str, text: str) -> None:
    """A JSON object of node type -> nodes removed, as savings() writes it."""
    try:
        d = json.loads(text)
    except (ValueError, RecursionError):
        d = None
    if not isinstance(d, dict) or not all(
        isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) for k, v in d.items()
    ):
        f.expected(path, 'a JSON object of node type -> int (e.g. {"kernel": 216})', text)


def run_replays(
    params: RoundParams,
    variants: Sequence[str],
    *,
    kinds: Sequence[str] = CHAIN_KINDS,
    lengths: Sequence[int] = DEFAULT_LENGTHS,
    trials: int = 30,
    builds: int = 3,
    pdl: bool = False,
    progress: Callable[[str], None] | None = None,
) -> ReplayResult:
    """Chains, fits, round timing and savings in one document (syncs; needs CUDA).

    When rounds are timed, the chains their predictions price nodes with (PRICE_KINDS)
    are measured too, whether or not `kinds` names them."""
    kinds = list(kinds)
    if variants:
        kinds += [k for k in PRICE_KINDS if k not in kinds]
    chain_trials, fits = measure_chains(kinds, lengths, trials=trials, progress=progress)
    round_trials = sav = None
    if variants:
        round_trials, exports = measure_rounds(
            params, variants, trials=trials, builds=builds, pdl=pdl
        )
        if progress:
            progress("timed rounds")
        sav = savings(round_trials, exports, fits, chain_trials=chain_trials)
        sav["ratio_shapes"] = sav.measured_us / sav.predicted_shapes_us
    return ReplayResult(
        chain_trials,
        fits,
        round_trials,
        sav,
        params.as_dict(),
        environment(torch.device("cuda")),
        now(),
        {"pdl": pdl, "builds": builds},
    )
