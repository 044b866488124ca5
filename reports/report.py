"""The report folder: report.md (readable alone), CSV of every table, the JSON exports and
PNG plots, written into the folder reports/output/folder.py stages and swaps into place.

One function per section; each writes its files and returns its markdown lines. Every
figure in the report comes from the exports and the replay document: nothing is typed in.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from graph_harness.capture import NodeExport
from graph_harness.capture.export.delta import node_delta
from graph_harness.capture.files import write_csv, write_output
from graph_harness.capture.replay.document import ReplayResult
from graph_harness.capture.round.params import param_help
from graph_harness.capture.round.pricing import waterfall_us
from graph_harness.capture.stats import median_by_variant
from graph_harness.reports import plots
from graph_harness.reports.kernel_names import short_names
from graph_harness.reports.text import counted, markdown_table

if TYPE_CHECKING:
    from collections.abc import Sequence

    from graph_harness.capture.profile.document import ProfileResult
    from graph_harness.capture.round.exactness import Cell


def write_report(
    folder: Path,
    exports: dict[str, NodeExport],
    replay: ReplayResult | None,
    *,
    command: str,
    skipped: str | None = None,
    profile: ProfileResult | None = None,
    exact: Sequence[Cell] | None = None,
) -> Path:
    """Write everything into `folder` (which must exist and be empty). `profile`: an
    in-round profile of the variants (capture/profile/document.py), where one was taken;
    `exact`: the variants' bit-exactness cells (capture/round/exactness.py)."""
    lines = header(exports, command)
    lines += nodes_section(folder, exports)
    lines += delta_section(folder, exports)
    if replay is None:
        lines += ["## Dispatch cost", "", f"Not measured: {skipped or 'no replay run'}.", ""]
    else:
        lines += cost_section(folder, replay)
        lines += savings_section(folder, exports, replay)
    if profile is not None:
        lines += dispatch_section(folder, profile)
    lines += seed_section(exports, replay, exact)
    write_output(folder / "report.md", "\n".join(lines) + "\n")
    return folder / "report.md"


def header(exports: dict[str, NodeExport], command: str) -> list[str]:
    first = next(iter(exports.values()))
    env = first.env
    driver = (
        f" | CUDA driver {env['driver_cuda_version']}" if env.get("driver_cuda_version") else ""
    )
    source = f"- counts: **{first.source}**"
    if first.source != "cuda-graph":
        source += " (no GPU: dispatched ATen ops and Triton launches, not graph nodes)"
    device = (
        f"- device: {env.get('device')} | torch {env.get('torch')} | triton {env.get('triton')}"
        + driver
        if env
        else "- device: not recorded (read from files: a graph dump names no device or versions)"
    )
    return [
        "# graph-harness report",
        "",
        f"- created: {first.created}",
        device,
        source,
        *params_lines(first.params),
        f"- reproduce: `{command}`",
        "",
    ]


def params_lines(params: dict | None) -> list[str]:
    """The round's parameters as a list, `name = value` and what it means (RoundParams'
    field help); none for a user's step."""
    if not params:
        return []
    meaning = param_help()
    lines = ["- round parameters:"]
    for name, value in params.items():
        what = meaning.get(name)
        lines.append(f"  - `{name} = {value}`" + (f": {what}" if what else ""))
    return lines


def nodes_section(folder: Path, exports: dict[str, NodeExport]) -> list[str]:
    totals = pd.DataFrame(
        [dict(variant=v, nodes=e.total, **e.counts("step").to_dict()) for v, e in exports.items()]
    ).fillna(0)
    steps = [c for c in next(iter(exports.values())).step_order if c in totals.columns]
    totals = totals[["variant", "nodes", *steps]].astype({c: int for c in steps})
    write_csv(folder / "totals.csv", totals)
    for v, e in exports.items():
        e.write_json(folder / f"nodes-{v}.json")
        write_csv(folder / f"nodes-{v}.csv", e.frame())
    per_stage = pd.concat(
        e.counts("stage", "step").reset_index().assign(variant=v) for v, e in exports.items()
    )
    write_csv(folder / "nodes_per_stage_step.csv", per_stage)
    plots.nodes_per_stage(list(exports.values()), folder / "nodes_per_stage.png")
    return [
        "## Nodes per round",
        "",
        markdown_table(totals),
        "",
        "![nodes per stage](nodes_per_stage.png)",
        "",
    ]


def delta_section(folder: Path, exports: dict[str, NodeExport]) -> list[str]:
    lines = ["## Node deltas", ""]
    base = "shipped" if "shipped" in exports else next(iter(exports))
    rows, fams = [], []
    for v, e in exports.items():
        if v == base:
            continue
        d = node_delta(exports[base], e)
        lines.append(f"- `{d.headline()}`")
        rows.append(d.by_kernel.assign(a_variant=base, b_variant=v))
        if d.by_family is not None:  # graph nodes (docs/families.md)
            fams.append(d.by_family.assign(a_variant=base, b_variant=v))
    if fams:
        families = pd.concat(fams)[["a_variant", "b_variant", "family", "a", "b", "delta"]]
        write_csv(folder / "delta_by_family.csv", families)
        changed = families[families.delta != 0]
        lines += ["", "By kernel family (B - A), per round, the families that differ:", ""]
        lines += [markdown_table(changed, none="None differs."), ""]
    if rows:
        kernels = pd.concat(rows)
        write_csv(folder / "delta_by_kernel.csv", kernels)  # full kernel names
        names = short_names(kernels.kernel)
        shown = kernels[["a_variant", "b_variant", "type", "kernel", "a", "b", "delta"]]
        shown = shown.assign(kernel=shown.kernel.map(lambda k: names.get(k, k)))
        lines += ["", "Removed and added nodes by kernel (B - A), per round:", ""]
        lines += [markdown_table(shown, none="None differs."), ""]
    if {"shipped", "fused"} <= set(exports):
        d = node_delta(exports["shipped"], exports["fused"])
        word = counted(exports["shipped"].source)
        plots.waterfall(
            [(r.step, float(r.delta)) for r in d.by_step.itertuples() if r.delta],
            ("shipped", exports["shipped"].total),
            ("fused", exports["fused"].total),
            f"{word} per round",
            f"shipped -> fused, {word}",
            folder / "waterfall_nodes.png",
            whole=True,
        )
        lines += ["![waterfall in nodes](waterfall_nodes.png)", ""]
    return lines


def cost_section(folder: Path, replay: ReplayResult) -> list[str]:
    replay.write_json(folder / "replay.json")
    write_csv(folder / "fits.csv", replay.fits)
    write_csv(folder / "chain_trials.csv", replay.chain_trials)
    plots.chain_fits(replay.chain_trials, replay.fits, folder / "chain_fits.png")
    f = replay.fits
    return [
        "## Per-node dispatch cost",
        "",
        "Slope of replay time against nodes in the graph (least squares; 95% "
        "bootstrap interval over trials):",
        "",
        markdown_table(f[["kind", "slope", "slope_lo", "slope_hi", "intercept", "r2"]]),
        "",
        "![chain fits](chain_fits.png)",
        "",
    ]


def savings_section(
    folder: Path, exports: dict[str, NodeExport], replay: ReplayResult
) -> list[str]:
    if replay.savings is None or not len(replay.savings):
        return []
    s = replay.savings
    write_csv(folder / "round_trials.csv", replay.round_trials)
    write_csv(folder / "savings.csv", s)
    med = median_by_variant(replay.round_trials)
    builds = replay.options.get("builds")
    lines = [
        "## Round time, measured vs predicted",
        "",
        markdown_table(med.rename("median us per round").reset_index()),
        "",
        "Measured = per build, the difference of medians of interleaved replays; then the "
        f"median over {builds or 'the'} builds (each build puts the round's buffers "
        "elsewhere); `measured_lo`/`hi` is its 95% bootstrap interval over builds and "
        "paired trials. Predicted = removed nodes x per-node cost by node type; 'shapes' "
        "prices the real pack and copy calls from their own chains (work, not just dispatch).",
        "",
        markdown_table(s.drop(columns=["removed_by_type"])),
        "",
    ]
    if {"shipped", "fused"} <= set(med.index):
        steps = waterfall_us(node_delta(exports["shipped"], exports["fused"]), replay)
        plots.waterfall(
            steps,
            ("shipped", float(med["shipped"])),
            ("fused", float(med["fused"])),
            "us per round (median)",
            "shipped -> fused, microseconds",
            folder / "waterfall_us.png",
        )
        lines += ["![waterfall in microseconds](waterfall_us.png)", ""]
    return lines


def dispatch_section(
    folder: Path, profile: ProfileResult, *, depth: int | None = None
) -> list[str]:
    """Per step of the round (or per module of a step, down to `depth`), how much of each
    graph's in-round time is gaps before nodes (CUPTI)."""
    round_ = all(p.export.is_round for p in profile.profiles.values())
    part, where = ("step", "the round") if round_ else ("scope", "the step")
    scopes = profile.scope_table(depth)
    write_csv(folder / f"dispatch_by_{part}.csv", scopes)
    summary = profile.summary()
    write_csv(folder / "dispatch.csv", summary)
    plots.dispatch_share(scopes, folder / "dispatch_share.png")
    trace = profile.write_trace(folder, depth, names=short_names)
    net = any(p.calibrated for p in profile.profiles.values())
    shares = ["dispatch_share", "dispatch_share_net"] if net else ["dispatch_share"]
    wide = scopes.pivot_table(index="scope", columns="variant", values=shares)
    # each graph's raw column beside its net one, in the profile's order (not alphabetical)
    wide = wide[[(c, v) for v in profile.profiles for c in shares if (c, v) in wide.columns]]
    wide.columns = [f"{v} {'net' if c.endswith('net') else 'raw'}" for c, v in wide.columns]
    wide = (100 * wide.reindex(list(dict.fromkeys(scopes.scope)))).round(2).reset_index()
    cols = ["name", "nodes", "period_us", "exec_us", "gap_us", "dispatch_share"]
    cols += ["timed_us"] if "timed_us" in summary else []
    if net:
        cols += ["excess_basis", "excess_per_node_us", "excess_us", "period_net_us"]
        cols += ["gap_net_us", "dispatch_share_net"]
        cols += [c for c in ("period_net_vs_timed", "period_chains_vs_timed") if c in summary]
    excess = profile.excess_table()
    own_cost = "The profiler's own cost per node on the calibration chains:"
    return [
        f"## Dispatch share in {where} (CUPTI)",
        "",
        "Each node's duration and the gap before it (its start less the end of what it "
        "waits for), from replays under CUPTI (`graph-harness profile`); the dispatch "
        f"share is the gaps over {where} (per {part}: over its nodes' durations and gaps)."
        + (
            " Net: less the profiler's own cost per node, fitted to each graph's own "
            "event-timed period where it was timed (basis `timing`: its net period then "
            "matches by construction), else measured on calibration chains in the same run "
            "(`chains`; docs/profile.md)."
            if net
            else ""
        ),
        "",
        markdown_table(summary[cols]),
        "",
        *([own_cost, "", markdown_table(excess), ""] if len(excess) else []),
        f"Dispatch share per {part}, %:",
        "",
        markdown_table(wide),
        "",
        "![dispatch share](dispatch_share.png)",
        "",
        f"The first replays of each graph, node by node, as a timeline: [{trace}]({trace}) "
        "(open it in https://ui.perfetto.dev).",
        "",
    ]


def seed_section(
    exports: dict[str, NodeExport], replay: ReplayResult | None, exact: Sequence[Cell] | None = None
) -> list[str]:
    """The seed's figures beside this run's (capture/round/side_by_side.py computes ours),
    and the run's bit-exactness matrix (capture/round/exactness.py)."""
    from graph_harness.capture.round.side_by_side import side_by_side

    rows = side_by_side(exports, replay, exact)
    table = pd.DataFrame(
        [(r.figure, r.seed, r.ours, r.why or "-") for r in rows],
        columns=["figure", "the seed", "this run", "why they differ"],
    )
    return [
        "## The seed, side by side",
        "",
        "Each figure of the description this project started from (capture/round/seed.py "
        "says where each comes from) beside this run's, computed from its exports and "
        "replay document.",
        "",
        markdown_table(table),
        "",
        *_exactness_matrix(exact),
    ]


def _exactness_matrix(cells: Sequence[Cell] | None) -> list[str]:
    if not cells:
        return []
    frame = pd.DataFrame([(c.variant, c.kind, c.differing, c.words) for c in cells])
    frame.columns = ["variant", "kind", "differing", "words"]
    frame["cell"] = [
        "equal" if d == 0 else f"{d} of {w} differ" for d, w in zip(frame.differing, frame.words)
    ]
    wide = frame.pivot(index="variant", columns="kind", values="cell")
    wide = wide.reindex(
        index=list(dict.fromkeys(frame.variant)), columns=list(dict.fromkeys(frame.kind))
    )
    words = frame.groupby("kind", sort=False).words.first()
    wide.columns = [f"{k} ({w} words)" for k, w in words.items()]
    return [
        "Bit-exactness, measured: each variant's round run once more from outputs filled with "
        "random bits, its outputs against the shipped round's through 32-bit integer views "
        "(words that differ):",
        "",
        markdown_table(wide.reset_index()),
        "",
    ]
