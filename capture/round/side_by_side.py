"""The seed's figures (capture/round/seed.py) beside the ones a run measured: every figure
of ours is computed here from the run's own exports and replay document, never typed in;
the reasons where they differ are what this project found (BENCHMARKS.md tells how).

`side_by_side(exports, replay)` returns one `Row` per seed figure; reports render them.
A figure the run did not measure (times without a replay, graph nodes of compiled code
on the CPU, a variant not counted) says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from graph_harness.capture.round import seed

if TYPE_CHECKING:  # pandas and torch, which this module never needs at run time
    import pandas as pd

    from graph_harness.capture.export.nodes import NodeExport
    from graph_harness.capture.replay.document import ReplayResult
    from graph_harness.capture.round.exactness import Cell

NOT_MEASURED = "not measured in this run"
CPU_COMPILED = (
    "on the CPU a compiled call counts as one dispatch, not the graph nodes its generated "
    "code launches"
)


@dataclass(frozen=True)
class Row:
    figure: str
    seed: str
    ours: str
    why: str = ""  # where ours differs from the seed's: the reason; "" where they agree


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:.3f}"


def _range(lo: float, hi: float, digits: int = 3) -> str:
    return f"{lo:.{digits}f}-{hi:.{digits}f}"


def _pack_nodes(export: NodeExport) -> list[dict[str, object]]:
    """The launching nodes of the round's pack step (every stage's `stageN/pack`), as rows
    of the export's frame."""
    f = export.frame()
    return f[f.step == "pack"].to_dict(orient="records")


def _is_fill(kernel: str | None) -> bool:
    """A kernel (or, on the CPU, an op) that fills a tensor with a scalar: what `where`
    against a Python scalar launches first (`fill` kernels; `aten.scalar_tensor`)."""
    k = (kernel or "").lower()
    return "fill" in k or "scalar_tensor" in k


def side_by_side(
    exports: dict[str, NodeExport],
    replay: ReplayResult | None = None,
    exact: Sequence[Cell] | None = None,
) -> list[Row]:
    """The seed's figures beside this run's. `exports`: variant -> NodeExport of one round
    (all of one source and parameters); `replay`: its ReplayResult, or None; `exact`: the
    run's bit-exactness cells (capture/round/exactness.py), or None."""
    first = next(iter(exports.values()))
    stages = int((first.params or {}).get("stages", 0))
    gpu = first.source == "cuda-graph"
    unit = "kernel nodes" if gpu else "CPU dispatches (not graph nodes)"
    rows = [Row("stages per round", str(seed.STAGES), str(stages), _stages_why(stages))]
    rows.append(_shipped_pack(exports, stages, unit))
    rows.append(_compiled_pack(exports, stages, gpu, first.env.get("torch")))
    rows += _removed(exports, stages, unit, gpu)
    rows += _times(exports, replay)
    rows.append(_exactness(exact, stages))
    return rows


def _exactness(cells: Sequence[Cell] | None, stages: int) -> Row:
    figure = "bit-exactness against the shipped round"
    if not cells:
        return Row(figure, seed.EXACTNESS, f"{NOT_MEASURED} (no shipped round to compare with)")
    variants = list(dict.fromkeys(c.variant for c in cells))
    bad = [c for c in cells if not c.exact]
    if not bad:
        words = sum(c.words for c in cells if c.variant == variants[0])
        ours = (
            f"every variant ({', '.join(variants)}) equal to shipped, bit for bit: {words} "
            f"words each, of slots, records and counts over {stages} stages"
        )
        return Row(figure, seed.EXACTNESS, ours)
    ours = "; ".join(f"{c.variant} {c.kind}: {c.differing} of {c.words} words differ" for c in bad)
    return Row(figure, seed.EXACTNESS, ours, "a variant computes something else: a defect")


def _stages_why(stages: int) -> str:
    if stages == seed.STAGES:
        return ""
    return "this run's --stages; the per-round figures below scale with it"


def _shipped_pack(exports: dict[str, NodeExport], stages: int, unit: str) -> Row:
    figure = "shipped pack, kernels per call"
    if "shipped" not in exports or not stages:
        return Row(figure, str(seed.SHIPPED_PACK_KERNELS_PER_CALL), f"{NOT_MEASURED} (no shipped)")
    nodes = _pack_nodes(exports["shipped"])
    per_call = len(nodes) / stages
    fills = sum(_is_fill(n["kernel"]) for n in nodes) / stages
    ours = f"{_num(per_call)} {unit}, {_num(fills)} of them fills"
    why = ""
    if per_call != seed.SHIPPED_PACK_KERNELS_PER_CALL:
        if per_call - fills == seed.SHIPPED_PACK_KERNELS_PER_CALL:
            why = (
                "each `torch.where` against a Python scalar (-inf, -1) first fills a tensor "
                "with the scalar: one more kernel per `where` beside the eight ops"
            )
        else:
            why = f"{_num(per_call - fills)} kernels per call beside the fills: not explained"
    return Row(figure, str(seed.SHIPPED_PACK_KERNELS_PER_CALL), ours, why)


def _compiled_pack(
    exports: dict[str, NodeExport], stages: int, gpu: bool, torch_version: str | None
) -> Row:
    figure = "Inductor-fused shipped pack, graph nodes per call"
    want = str(seed.COMPILED_PACK_NODES_PER_CALL)
    if "shipped-compiled" not in exports or not stages:
        return Row(figure, want, f"{NOT_MEASURED} (no shipped-compiled)")
    if not gpu:
        return Row(figure, want, f"{NOT_MEASURED}: {CPU_COMPILED}")
    per_call = len(_pack_nodes(exports["shipped-compiled"])) / stages
    why = ""
    if per_call != seed.COMPILED_PACK_NODES_PER_CALL:
        why = (
            f"Inductor on torch {torch_version} fuses the eight ops into {_num(per_call)} "
            "kernel(s) per call (a contiguous `out`, a slot of the cursor buffer, or the pack "
            "inside a larger compiled region alike: benchmarks/experiments/seed_inductor.py)"
        )
    return Row(figure, want, _num(per_call), why)


# (figure, A, B, the seed's figure, why ours differs where it does)
REMOVALS = (
    (
        "direct-write compaction, nodes removed per round",
        "shipped",
        "direct-compaction",
        seed.REMOVED_BY_DIRECT_COMPACTION,
        "",
    ),
    (
        "fused pack against the Inductor-fused pack, nodes removed per round",
        "shipped-compiled",
        "fused-pack",
        seed.REMOVED_BY_FUSED_PACK,
        "the fused pack replaces what Inductor makes of the shipped pack: 3 nodes per call "
        "in the seed, here the Inductor row's figure",
    ),
    (
        "both changes (shipped-compiled -> fused), nodes removed per round",
        "shipped-compiled",
        "fused",
        seed.REMOVED_BY_BOTH,
        "the fused pack's share differs (the row before)",
    ),
    ("for reference: fused pack against the eager pack", "shipped", "fused-pack", None, ""),
    ("for reference: both changes against the eager round", "shipped", "fused", None, ""),
)


def _removed(exports: dict[str, NodeExport], stages: int, unit: str, gpu: bool) -> list[Row]:
    rows = []
    for figure, a, b, want, why in REMOVALS:
        shown = "-" if want is None else str(want)
        if a not in exports or b not in exports:
            rows.append(Row(figure, shown, f"{NOT_MEASURED} (no {a} or {b})"))
            continue
        if not gpu and "shipped-compiled" in (a, b):
            rows.append(Row(figure, shown, f"{NOT_MEASURED}: {CPU_COMPILED}"))
            continue
        removed = exports[a].total - exports[b].total
        ours = f"{removed} {unit}"
        differs = want is not None and removed != want
        if differs and stages != seed.STAGES:
            at = f"at {stages} stage{'s' * (stages != 1)}, not {seed.STAGES}"
            why = at + (f"; {why}" if why else "")
        rows.append(Row(figure, shown, ours, why if differs else ""))
    return rows


def _saving(replay: ReplayResult | None, a: str, b: str) -> pd.Series | None:
    """The replay's measured saving of A -> B (a row of its savings), or None."""
    if replay is None or replay.savings is None:
        return None
    s = replay.savings
    hit = s[(s.a == a) & (s.b == b)]
    return None if not len(hit) else hit.iloc[0]


def _times(exports: dict[str, NodeExport], replay: ReplayResult | None) -> list[Row]:
    seed_ms, seed_us = _range(*seed.SAVED_MS_PER_ROUND), _range(*seed.US_PER_REMOVED_NODE)
    figure_ms = "both changes, time saved per round (ms)"
    figure_us = "price per removed node (us)"
    s = _saving(replay, "shipped-compiled", "fused")
    if s is None or s.measured_us != s.measured_us:  # NaN: measured nothing
        why = "no replay in this run (a GPU measures it: `graph-harness replay`)"
        return [Row(figure_ms, seed_ms, NOT_MEASURED, why), Row(figure_us, seed_us, NOT_MEASURED)]
    ms = f"{s.measured_us / 1000:.3f} ({_range(s.measured_lo / 1000, s.measured_hi / 1000)})"
    rows = [Row(figure_ms, seed_ms, ms, _outside(s.measured_us / 1000, seed.SAVED_MS_PER_ROUND))]
    n = int(s.removed_nodes)
    if n <= 0:
        rows.append(
            Row(
                figure_us,
                seed_us,
                f"no price: shipped-compiled -> fused removes {n} nodes here",
                "a saving without removed nodes is work, not dispatch",
            )
        )
        return rows
    us = s.measured_us / n
    ours = f"{us:.3f} ({_range(s.measured_lo / n, s.measured_hi / n)}) over {n} nodes"
    rows.append(Row(figure_us, seed_us, ours, _outside(us, seed.US_PER_REMOVED_NODE)))
    return rows


def _outside(x: float, bounds: tuple[float, float]) -> str:
    lo, hi = bounds
    if lo <= x <= hi:
        return ""
    return "outside the seed's range: its device and torch are not recorded (BENCHMARKS.md)"
