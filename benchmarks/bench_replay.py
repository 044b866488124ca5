"""Per-node dispatch cost and before/after round timing on the GPU.

    python3 benchmarks/bench_replay.py --out DIR [--trials 30]

Two separate chain sweeps (to check they agree), fits with 95% bootstrap intervals, the
round variants replayed interleaved with measured vs predicted savings, and the fused
round with and without programmatic dependent launch. Writes DIR/replay.json and
DIR/replay-pdl.json and prints the tables.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from graph_harness.capture import VARIANTS, RoundParams
from graph_harness.capture.replay.chains import measure_chains
from graph_harness.capture.replay.kinds import chain_kinds
from graph_harness.capture.replay.settings import ReplaySettings
from graph_harness.capture.round import chains as round_chains
from graph_harness.capture.round.replays import run_replays
from graph_harness.capture.round.timing import measure_round_configs
from graph_harness.capture.stats import median_by_variant, round_series, saving_interval

pd.set_option("display.width", 200)
pd.set_option("display.max_columns", 20)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    d = ReplaySettings()
    ap.add_argument("--trials", type=int, default=d.trials)
    ap.add_argument("--builds", type=int, default=d.builds, help="fresh builds of each round")
    args = ap.parse_args()
    settings = ReplaySettings(trials=args.trials, builds=args.builds)
    args.out.mkdir(parents=True, exist_ok=True)
    params = RoundParams()
    round_chains.register()  # the round's kinds among those listed
    kinds = chain_kinds() + chain_kinds(pdl=True)
    result = run_replays(params, list(VARIANTS), kinds=kinds, settings=settings, progress=print)
    result.write_json(args.out / "replay.json")
    _, second = measure_chains(kinds, settings)
    fits = result.fits.set_index("kind")
    fits["ci_pct"] = 100 * (fits.slope_hi - fits.slope_lo) / 2 / fits.slope
    fits["second_run"] = second.set_index("kind").slope
    fits["runs_differ_pct"] = 100 * (fits.second_run / fits.slope - 1)
    print("\nper-node cost (us/node), 95% bootstrap interval, intercept (us), R^2:")
    print(
        fits[
            [
                "slope",
                "slope_lo",
                "slope_hi",
                "ci_pct",
                "intercept",
                "intercept_lo",
                "intercept_hi",
                "r2",
                "second_run",
                "runs_differ_pct",
            ]
        ].to_string()
    )
    per_build = result.round_trials.pivot_table(
        index="variant", columns="build", values="us", aggfunc="median"
    )
    print("\nround replay, median us per round, per build (each build: fresh buffers):")
    print(per_build.to_string())
    print(
        "\nsavings (measured = median over builds of the difference of medians, 95% interval "
        "over builds and paired trials; predicted = delta nodes x cost):"
    )
    # every saving column but the round medians, printed per build above
    print(result.savings.drop(columns=["round_a_us", "round_b_us"]).to_string())

    # The fused round with and without PDL, interleaved in one timing.
    t, exports = measure_round_configs(
        params,
        {"fused": ("fused", False), "fused+pdl": ("fused", True)},
        settings,
    )
    med = median_by_variant(t)
    series = round_series(t)
    lo, hi = saving_interval(series["fused"], series["fused+pdl"])
    nodes = exports["fused"].total
    prog = sum(1 for n in exports["fused+pdl"].nodes if n.get("programmatic_deps"))
    print(
        f"\nfused round: {med['fused']:.3f} us without PDL, {med['fused+pdl']:.3f} us with PDL "
        f"({nodes} nodes; {prog} with programmatic edges); PDL saves "
        f"{med['fused'] - med['fused+pdl']:.1f} us, 95% interval [{lo:.1f}, {hi:.1f}]"
    )


if __name__ == "__main__":
    main()
