"""The fusion advisor on what we already know: the shipped round and the example decoder.

    python3 benchmarks/bench_advise.py --out DIR                      # GPU: the H200 figures
    python3 benchmarks/bench_advise.py --out DIR --costs replay.json  # priced by a replay too
    python3 benchmarks/bench_advise.py --out DIR --smoke              # CPU: small, tiny model

Counts the shipped round (the default RoundParams: the built-in costs' own round) and the
example decoder of examples/llama_decode.py, eager and compiled (module scopes, every
level), and advises on each with the built-in H200 costs, and with `--costs` as well.
Writes into DIR:
- nodes-shipped.json, nodes-eager.json, nodes-compiled.json: the exports;
- advice-{name}-{costs}.json: the whole advice (`graph-harness advise --json`);
- top5-{name}-{costs}.csv: the five best groups, full precision;
- comparisons.csv: predicted against measured, for the variant pairs the costs timed;
- variants.csv: each of the round's first two groups against the variant that makes its
  change, counted (nodes the group removes, and nodes B - A removes by type);
- advise.md: the top-five tables and the comparisons, as BENCHMARKS.md shows them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_model import load_example  # noqa: E402  (this folder: scripts run from it)

from graph_harness.capture import (  # noqa: E402
    RoundParams,
    capture_and_count,
    count_round,
    module_scopes,
)
from graph_harness.capture.advise.advice import advise  # noqa: E402
from graph_harness.capture.advise.costs import Costs, builtin_costs  # noqa: E402
from graph_harness.capture.export.delta import node_delta  # noqa: E402
from graph_harness.reports.kernel_names import short_names  # noqa: E402

TOP = 5
# The round's two changes and the variants that make them.
CHANGES = (("stage*/pack", "fused-pack"), ("stage*/copy", "direct-compaction"))


def top_rows(advice, name: str, costs_name: str) -> pd.DataFrame:
    rows = []
    for g in advice.groups[:TOP]:
        measured = next((c for c in advice.comparisons if c.ranks == (g.rank,)), None)
        rows.append(
            dict(
                export=name,
                costs=costs_name,
                rank=g.rank,
                kind=g.kind,
                scope=g.scope,
                anchor_kernel=g.anchor_kernel,
                anchor_scope=g.anchor_scope,
                kernels=json.dumps(list(g.kernels)),
                occurrences=g.occurrences,
                nodes_now=g.nodes_now,
                nodes_after=g.nodes_after,
                removed_nodes=g.removed_nodes,
                saving_us=g.saving_us,
                saving_by_type_us=g.saving_by_type_us,
                priced_by=g.priced_by,
                measured_b=measured.b if measured else None,
                measured_us=measured.measured_us if measured else None,
                measured_lo=measured.measured_lo if measured else None,
                measured_hi=measured.measured_hi if measured else None,
            )
        )
    return pd.DataFrame(rows)


def _kernels(g, short: dict[str, str]) -> str:
    names = [short.get(k, k) for k in g.kernels]
    out: list[list] = []
    for n in names:
        if out and out[-1][0] == n:
            out[-1][1] += 1
        else:
            out.append([n, 1])
    text = ", ".join(n if c == 1 else f"{n} x{c}" for n, c in out)
    if g.anchor_kernel:
        text = f"after {short.get(g.anchor_kernel, g.anchor_kernel)} ({g.anchor_scope}): {text}"
    return text.replace("|", "\\|")


def markdown(advice, title: str) -> str:
    groups = advice.groups[:TOP]
    short = short_names([k for g in groups for k in (*g.kernels, g.anchor_kernel) if k], 60)
    unit = advice.unit
    lines = [
        f"**{title}** ({advice.total_nodes} nodes; {advice.costs.label})",
        "",
        f"| # | scope | kernels (in order) | x | nodes | predicted us/{unit} | priced by "
        f"(us/node) | measured us/{unit} [95%] |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for g in groups:
        c = next((c for c in advice.comparisons if c.ranks == (g.rank,)), None)
        measured = (
            f"{c.measured_us:.1f} [{c.measured_lo:.1f}, {c.measured_hi:.1f}] ({c.a} -> {c.b})"
            if c
            else "-"
        )
        lines.append(
            f"| {g.rank} | `{g.scope}` | {_kernels(g, short)} | {g.occurrences} | "
            f"{g.nodes_now} -> {g.nodes_after} | {g.saving_us:.1f} | {g.priced_by} | {measured} |"
        )
    if advice.comparisons:
        lines += [
            "",
            "| A -> B | groups | nodes | predicted | by type | with B's node | measured "
            "[95%] | verdict |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for c in advice.comparisons:
            verdict = {True: "within", False: "outside", None: "not the same change"}[c.within]
            lines.append(
                f"| {c.a} -> {c.b} | {', '.join(f'#{r}' for r in c.ranks)} | "
                f"{c.removed_nodes} | {c.predicted_us:.1f} | {c.predicted_by_type_us:.1f} | "
                f"{c.predicted_with_b_us:.1f} | {c.measured_us:.1f} [{c.measured_lo:.1f}, "
                f"{c.measured_hi:.1f}] | {verdict} |"
            )
    lines.append("")
    lines += [f"- {c.a} -> {c.b}: {c.note}" for c in advice.comparisons]
    lines += [f"- note: {n}" for n in advice.notes]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--costs", type=Path, help="a replay document to price with as well")
    ap.add_argument("--smoke", action="store_true", help="CPU: a 2-stage round, tiny model")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    gpu = torch.cuda.is_available() and not args.smoke
    device = None if gpu else "cpu"
    params = RoundParams() if gpu else RoundParams(stages=2)
    ex = load_example()

    exports = {"shipped": count_round(params, "shipped", device).export}
    for compiled in (False, True) if gpu else (False,):  # compiled is refused on the CPU
        name = "compiled" if compiled else "eager"
        step = ex.make_step(compiled=compiled, preset="small" if gpu else "tiny", device=device)
        with module_scopes(step.module):
            exports[name] = capture_and_count(step)
    for name, e in exports.items():
        e.write_json(args.out / f"nodes-{name}.json")

    variants = []
    for scope, variant in CHANGES:  # the round's two changes, by another route
        group = next(g for g in advise(exports["shipped"]).groups if g.scope == scope)
        d = node_delta(exports["shipped"], count_round(params, variant, device).export)
        variants.append(
            dict(
                scope=scope,
                rank=group.rank,
                group_removed=json.dumps(group.removed_by_type),
                variant=variant,
                variant_removed=json.dumps({t: n for t, n in d.removed_by_type().items() if n}),
                same=group.removed_nodes == -d.total_delta,
            )
        )
    pd.DataFrame(variants).to_csv(args.out / "variants.csv", index=False)

    priced = {"builtin": builtin_costs()}
    if args.costs:
        priced["replay"] = Costs.read(args.costs)
    tops, comparisons, md = [], [], ["# The fusion advisor: top five\n"]
    for costs_name, costs in priced.items():
        for name, e in exports.items():
            a = advise(e, costs)
            text = json.dumps(a.to_dict(), indent=1, allow_nan=False) + "\n"
            (args.out / f"advice-{name}-{costs_name}.json").write_text(text)
            top = top_rows(a, name, costs_name)
            top.to_csv(args.out / f"top5-{name}-{costs_name}.csv", index=False)
            tops.append(top)
            for c in a.comparisons:
                comparisons.append(
                    dict(export=name, costs=costs_name, **{**c.__dict__, "ranks": list(c.ranks)})
                )
            md.append(markdown(a, f"{a.name} ({name}), {costs_name} costs"))
    pd.DataFrame(comparisons).to_csv(args.out / "comparisons.csv", index=False)
    (args.out / "advise.md").write_text("\n".join(md))
    print("\n".join(md))
    print(pd.DataFrame(variants).to_string(index=False))


if __name__ == "__main__":
    main()
