# Where does shipped-compiled -> fused's unexplained ~35 us per round come from?
# A 2x3 factorial: pack {shipped, compiled, fused} x compaction {alloc-copy, direct},
# interleaved round replays, paired bootstrap intervals on each single change, twice.
import os
import sys

sys.path.insert(0, ".")
import pandas as pd
import torch

from graph_harness.capture.replay.chains import measure_chains
from graph_harness.capture.replay.pricing import per_call_us
from graph_harness.capture.replay.settings import ReplaySettings
from graph_harness.capture.round import chains as round_chains
from graph_harness.capture.round import params as P
from graph_harness.capture.round.timing import measure_round_configs
from graph_harness.capture.stats import median_by_variant, saving_interval

OUT = os.environ.get("OUT", "/tmp/out")
P.VARIANTS["compiled-direct"] = ("compiled", "direct")
VAR = ["shipped", "direct-compaction", "shipped-compiled", "compiled-direct", "fused-pack", "fused"]
CHANGES = [
    ("copies|shipped pack", "shipped", "direct-compaction"),
    ("copies|compiled pack", "shipped-compiled", "compiled-direct"),
    ("copies|fused pack", "fused-pack", "fused"),
    ("compiled->fused pack|alloc-copy", "shipped-compiled", "fused-pack"),
    ("compiled->fused pack|direct", "compiled-direct", "fused"),
    ("shipped->fused pack|alloc-copy", "shipped", "fused-pack"),
    ("shipped->fused pack|direct", "direct-compaction", "fused"),
    ("shipped-compiled->fused", "shipped-compiled", "fused"),
]


def main():
    params = P.RoundParams()
    round_chains.register()  # the round's pack and copy kinds, measured below
    print(torch.cuda.get_device_name(), torch.__version__, flush=True)
    ct, fits = measure_chains(
        ("torch-add", "memcpy", "pack-shipped", "pack-compiled", "pack-fused", "compaction-copies"),
        ReplaySettings(trials=20, lengths=(1, 16, 64, 256), chain_replays=20),
    )
    call = per_call_us(fits, ct)
    print(fits[["kind", "slope", "slope_lo", "slope_hi", "intercept"]].to_string(), flush=True)
    print("per call", {k: round(v, 3) for k, v in call.items()}, flush=True)
    rows = []
    all_trials = []
    for rep in range(2):
        trials, exports = measure_round_configs(
            params, {v: (v, False) for v in VAR}, ReplaySettings(trials=60, builds=1)
        )
        trials["rep"] = rep
        all_trials.append(trials)
        med = median_by_variant(trials)
        ser = {v: g.sort_values("trial").us.to_numpy() for v, g in trials.groupby("variant")}
        print(f"rep {rep} medians", {v: round(med[v], 1) for v in VAR}, flush=True)
        print(f"rep {rep} nodes", {v: exports[v].total for v in VAR}, flush=True)
        for name, a, b in CHANGES:
            lo, hi = saving_interval(ser[a], ser[b])
            d = float(med[a] - med[b])
            pd_ = ser[a] - ser[b]
            rows.append(
                dict(
                    rep=rep,
                    change=name,
                    a=a,
                    b=b,
                    saving=d,
                    lo=lo,
                    hi=hi,
                    median_paired=float(pd.Series(pd_).median()),
                    nodes=exports[a].total - exports[b].total,
                )
            )
            print(
                f"  {name:34s} {d:8.1f} [{lo:7.1f}, {hi:7.1f}] paired-median "
                f"{rows[-1]['median_paired']:7.1f} nodes {rows[-1]['nodes']}",
                flush=True,
            )
    pd.DataFrame(rows).to_csv(f"{OUT}/factorial_changes.csv", index=False)
    pd.concat(all_trials).to_csv(f"{OUT}/factorial_trials.csv", index=False)
    fits.to_csv(f"{OUT}/factorial_fits.csv", index=False)


if __name__ == "__main__":
    main()
