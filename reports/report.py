"""The report folder: report.md (readable alone), CSV of every table, the JSON exports and
PNG plots, written into the folder reports/output.py stages and swaps into place."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from capture import STEPS, NodeExport
from capture.delta import node_delta
from capture.replay import ReplayResult
from reports import plots


def _md(df: pd.DataFrame, floatfmt: str = ".4g") -> str:
    cols = list(df.columns)
    lines = ["| " + " | ".join(map(str, cols)) + " |", "|" + "---|" * len(cols)]
    for row in df.itertuples(index=False):
        cells = [format(v, floatfmt) if isinstance(v, float) else str(v) for v in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_report(
    folder: Path,
    exports: dict[str, NodeExport],
    replay: ReplayResult | None,
    *,
    command: str,
    skipped: str | None = None,
) -> Path:
    """Write everything into `folder` (which must exist and be empty)."""
    first = next(iter(exports.values()))
    env = first.env
    lines = [
        "# graph-harness report",
        "",
        f"- created: {first.created}",
        f"- device: {env.get('device')} | torch {env.get('torch')} | triton {env.get('triton')}"
        + (
            f" | CUDA driver {env['driver_cuda_version']}" if env.get("driver_cuda_version") else ""
        ),
        f"- counts: **{first.source}**"
        + (
            ""
            if first.source == "cuda-graph"
            else " (no GPU: dispatched ATen ops and Triton launches, not graph nodes)"
        ),
        f"- round parameters: {first.params}",
        f"- reproduce: `{command}`",
        "",
        "## Nodes per round",
        "",
    ]
    totals = pd.DataFrame(
        [
            dict(variant=v, nodes=e.total, **e.frame().groupby("step").size().to_dict())
            for v, e in exports.items()
        ]
    ).fillna(0)
    steps = [c for c in STEPS if c in totals.columns]
    totals = totals[["variant", "nodes", *steps]].astype({c: int for c in steps})
    totals.to_csv(folder / "totals.csv", index=False)
    lines += [_md(totals), ""]
    for v, e in exports.items():
        e.write_json(folder / f"nodes-{v}.json")
        e.frame().to_csv(folder / f"nodes-{v}.csv", index=False)
    per_stage = pd.concat(
        e.frame()
        .groupby(["stage", "step"], dropna=False)
        .size()
        .rename("nodes")
        .reset_index()
        .assign(variant=v)
        for v, e in exports.items()
    )
    per_stage.to_csv(folder / "nodes_per_stage_step.csv", index=False)
    plots.nodes_per_stage(list(exports.values()), folder / "nodes_per_stage.png")
    lines += ["![nodes per stage](nodes_per_stage.png)", "", "## Node deltas", ""]
    base = "shipped" if "shipped" in exports else next(iter(exports))
    delta_rows = []
    for v, e in exports.items():
        if v == base:
            continue
        d = node_delta(exports[base], e)
        lines.append(f"- `{d.headline()}`")
        delta_rows.append(d.by_kernel.assign(a_variant=base, b_variant=v))
    if delta_rows:
        kernels = pd.concat(delta_rows)
        kernels.to_csv(folder / "delta_by_kernel.csv", index=False)
        lines += [
            "",
            "Removed and added nodes by kernel (B - A), per round:",
            "",
            _md(
                kernels[["a_variant", "b_variant", "type", "kernel", "a", "b", "delta"]].assign(
                    kernel=lambda d: d.kernel.str.slice(0, 60)
                )
            ),
            "",
        ]
    if {"shipped", "fused"} <= set(exports):
        d = node_delta(exports["shipped"], exports["fused"])
        plots.waterfall(
            [(r.step, float(r.delta)) for r in d.by_step.itertuples() if r.delta],
            ("shipped", exports["shipped"].total),
            ("fused", exports["fused"].total),
            "nodes per round",
            "shipped -> fused, nodes",
            folder / "waterfall_nodes.png",
        )
        lines += ["![waterfall in nodes](waterfall_nodes.png)", ""]
    if replay is None:
        lines += ["## Dispatch cost", "", f"Not measured: {skipped or 'no replay run'}.", ""]
    else:
        replay.write_json(folder / "replay.json")
        replay.fits.to_csv(folder / "fits.csv", index=False)
        replay.chain_trials.to_csv(folder / "chain_trials.csv", index=False)
        plots.chain_fits(replay.chain_trials, replay.fits, folder / "chain_fits.png")
        f = replay.fits
        lines += [
            "## Per-node dispatch cost",
            "",
            "Slope of replay time against nodes in the graph (least squares; 95% "
            "bootstrap interval over trials):",
            "",
            _md(f[["kind", "slope", "slope_lo", "slope_hi", "intercept", "r2"]]),
            "",
            "![chain fits](chain_fits.png)",
            "",
        ]
        if replay.savings is not None and len(replay.savings):
            s = replay.savings
            replay.round_trials.to_csv(folder / "round_trials.csv", index=False)
            s.to_csv(folder / "savings.csv", index=False)
            med = replay.round_trials.groupby("variant").us.median()
            lines += [
                "## Round time, measured vs predicted",
                "",
                _md(med.rename("median us per round").reset_index()),
                "",
                "Measured = per build, the difference of medians of interleaved replays; "
                "then the median over builds (each build puts the round's buffers "
                "elsewhere, which alone moves a round by ~0.5%); `measured_lo`/`hi` is its "
                "95% bootstrap interval over builds and paired trials. Predicted = removed "
                "nodes x per-node cost by node type; 'shapes' prices the real pack and copy "
                "calls from their own chains (work, not just dispatch).",
                "",
                _md(s.drop(columns=["delta_by_type"])),
                "",
            ]
            if {"shipped", "fused"} <= set(med.index):
                _waterfall_us(folder, exports, replay, med)
                lines += ["![waterfall in microseconds](waterfall_us.png)", ""]
    (folder / "report.md").write_text("\n".join(lines) + "\n")
    return folder / "report.md"


def _waterfall_us(folder, exports, replay, med) -> None:
    """shipped -> fused in microseconds: each step's removed nodes at their dispatch cost,
    then what remains of the measured difference (kernel work that moved)."""
    d = node_delta(exports["shipped"], exports["fused"])
    changes = [(r.step, float(r.delta)) for r in d.by_step.itertuples() if r.delta]
    cost = float(replay.fits.set_index("kind").slope.get("torch-add"))
    copy_cost = float(replay.fits.set_index("kind").slope.get("memcpy", cost))
    us = [
        (f"{step} x dispatch", n * (copy_cost if step == "copy" else cost)) for step, n in changes
    ]
    residual = float(med["fused"] - med["shipped"]) - sum(c for _, c in us)
    us.append(("kernel work (residual)", residual))
    plots.waterfall(
        us,
        ("shipped", float(med["shipped"])),
        ("fused", float(med["fused"])),
        "us per round (median)",
        "shipped -> fused, microseconds",
        folder / "waterfall_us.png",
    )
