"""The excess fitted to A's own event timing (capture/profile/fit.py), worked out from the
tables of a `bench_cupti.py` run made before that basis existed, to test the basis on
data it was not built on (BENCHMARKS.md, "The profiler's own cost").

    python benchmarks/experiments/timing_fit_tables.py DIR

DIR holds <workload>/profile-summary.csv and profile-pairs.csv. Per pair: A's excess per
node e = (A's profiled period - A's timed period) / A's nodes; the saving priced at it on
both sides is the raw prediction less e x the removed nodes (exact where every replay
matched every node, as in these runs: each replay's cost moves by e x its nodes); B's
period net of it against B's timed one. CPU only: arithmetic on the tables.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd


def fit_rows(folder: Path) -> pd.DataFrame:
    rows = []
    for w in sorted(p for p in folder.iterdir() if (p / "profile-pairs.csv").exists()):
        s = pd.read_csv(w / "profile-summary.csv").set_index("name")
        for r in pd.read_csv(w / "profile-pairs.csv").itertuples():
            a, b = s.loc[r.a], s.loc[r.b]
            e = (a.period_us - a.timed_us) / a.nodes
            predicted = r.predicted_us - e * r.removed_nodes
            rows.append(
                dict(
                    workload=w.name,
                    a=r.a,
                    b=r.b,
                    removed_nodes=r.removed_nodes,
                    excess_a_per_node_us=e,
                    predicted_fit_us=predicted,
                    measured_us=r.measured_us,
                    measured_lo=r.measured_lo,
                    measured_hi=r.measured_hi,
                    error_raw=r.error,
                    error_chains=r.error_net,
                    error_fit=predicted / r.measured_us - 1,
                    b_net_vs_timed=(b.period_us - e * b.nodes) / b.timed_us - 1,
                )
            )
    return pd.DataFrame(rows)


if __name__ == "__main__":
    if len(sys.argv) != 2 or not Path(sys.argv[1]).is_dir():
        sys.exit("usage: timing_fit_tables.py DIR (a bench_cupti.py --out folder)")
    from graph_harness.reports.text import markdown_table

    print(markdown_table(fit_rows(Path(sys.argv[1]))))
