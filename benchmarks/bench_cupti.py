"""The profile's figures raw and net of the profiler's own cost (issue 34), on the GPU:
`graph-harness profile` on the built-in round (its five variants) and on three decode
steps eager against compiled (examples/llama_decode.py, examples/hf_decode.py, gpt-fast's
model through benchmarks/targets/gpt_fast_step.py), each with --out.

    python3 benchmarks/bench_cupti.py --out DIR [--only round,llama,hf,gptfast]

Writes DIR/<workload>/ (what `profile --out` writes, its stdout in profile.txt) and
DIR/cupti.md: per graph the period under CUPTI, raw and net (on its basis, and at the
chains' excess), against the event-timed one, the dispatch share raw and net; per pair
the saving predicted raw and net (at A's excess) against the measured one, with the
verdict; and the excess per node each run measured on the chains. Without a GPU it exits 2.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
WORKLOADS = {
    "round": [],
    "llama": ["examples/llama_decode.py:make_step", "examples/llama_decode.py:make_compiled_step"],
    "hf": ["examples/hf_decode.py:make_step", "examples/hf_decode.py:make_compiled_step"],
    "gptfast": [
        "benchmarks/targets/gpt_fast_step.py:make_step",
        "benchmarks/targets/gpt_fast_step.py:make_compiled_step",
    ],
}


def run(name: str, out: Path) -> float:
    folder = out / name
    cmd = ["graph-harness", "profile", "--out", str(folder)]
    for t in WORKLOADS[name]:
        cmd += ["--target", t]
    if WORKLOADS[name]:
        cmd += ["--module-scopes", "2"]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "profile.txt").write_text(done.stdout + done.stderr)
    print(f"{name}: rc={done.returncode} in {time.perf_counter() - t0:.0f} s", flush=True)
    return done.returncode


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--only", default=",".join(WORKLOADS))
    args = ap.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("bench_cupti: no GPU here: CUPTI records what a CUDA GPU ran", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    names = [n for n in args.only.split(",") if n]
    rcs = {n: run(n, args.out) for n in names}
    graphs, pairs, excess = [], [], []
    for n in names:
        f = args.out / n
        if rcs[n] != 0 or not (f / "profile-summary.csv").exists():
            continue
        s = pd.read_csv(f / "profile-summary.csv").assign(workload=n)
        graphs.append(s)
        if (f / "profile-pairs.csv").exists():
            pairs.append(pd.read_csv(f / "profile-pairs.csv").assign(workload=n))
        if (f / "profile-excess.csv").exists():
            excess.append(pd.read_csv(f / "profile-excess.csv").assign(workload=n))
    lines = [f"# Raw and net of the profiler ({time.strftime('%Y-%m-%d')})", ""]
    if graphs:
        g = pd.concat(graphs, ignore_index=True)
        cols = ["workload", "name", "nodes", "period_us", "timed_us", "period_vs_timed"]
        cols += ["excess_basis", "excess_per_node_us", "excess_us", "period_net_us"]
        cols += ["period_net_vs_timed", "period_chains_vs_timed", "dispatch_share"]
        cols += ["dispatch_share_net"]
        cols = [c for c in cols if c in g]
        lines += ["## Graphs", "", g[cols].to_markdown(index=False, floatfmt=".4g"), ""]
    if pairs:
        p = pd.concat(pairs, ignore_index=True)
        if graphs and "period_chains_us" in g:
            # what the chains' excess alone would have priced (from the median periods, so
            # approximate): the raw prediction less the chains' excess of A over B's
            chains = (g.period_us - g.period_chains_us).groupby([g.workload, g.name]).first()
            xa = [chains.get((w, n), float("nan")) for w, n in zip(p.workload, p.a)]
            xb = [chains.get((w, n), float("nan")) for w, n in zip(p.workload, p.b)]
            p["error_chains"] = (p.predicted_us - pd.Series(xa) + pd.Series(xb)) / p.measured_us - 1
        cols = ["workload", "a", "b", "removed_nodes", "predicted_us", "predicted_net_us"]
        cols += ["measured_us", "measured_lo", "measured_hi", "error", "error_net"]
        cols += ["error_chains", "b_net_vs_timed", "basis", "verdict", "why"]
        cols = [c for c in cols if c in p]
        lines += ["## Pairs", "", p[cols].to_markdown(index=False, floatfmt=".4g"), ""]
    if excess:
        e = pd.concat(excess, ignore_index=True)
        lines += ["## Excess per node", "", e.to_markdown(index=False, floatfmt=".4g"), ""]
    (args.out / "cupti.md").write_text("\n".join(lines))
    print("\n".join(lines))
    return 0 if all(rc == 0 for rc in rcs.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
