"""Ladders from a sweep's own rows, with what they hold: each distribution's ladder chosen
from the measured sizes (at most K, and within the memory vLLM's default ladder would
hold), every size swept, and vLLM's default ladder, each with its graphs, own-pool bytes
and time per step (capture/sweep/padding.py; no GPU: arithmetic on sweep-sizes.csv).

    python benchmarks/experiments/ladder_memory.py DIR [DIR ...] [--most 4]

DIR: a sweep's folder (`sweep --out DIR`), or any folder holding sweep-sizes.csv. Prints
one CSV of rows (dir, requests, ladder, sizes, graphs, memory, expected_us, lost_us,
padding_share, interpolated).
"""

import argparse
import csv
import sys
from pathlib import Path

from graph_harness.capture.sweep.padding import builtin_requests, choose, ladder_cost, vllm_ladder

REQUESTS = ("uniform:1-{largest}", "zipf:1.2")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="+", type=Path)
    ap.add_argument("--most", type=int, default=4)
    args = ap.parse_args()
    w = csv.writer(sys.stdout)
    w.writerow(["dir", "requests", "ladder", "sizes", "graphs", "memory", "expected_us",
                "lost_us", "padding_share", "interpolated"])  # fmt: skip
    for d in args.dirs:
        rows = list(csv.DictReader((d / "sweep-sizes.csv").open()))
        times = {int(r["batch"]): float(r["replay_us"]) for r in rows}
        memory = {int(r["batch"]): int(r["reserved"]) for r in rows}
        largest = max(times)
        for spec in REQUESTS:
            spec = spec.format(largest=largest)
            req = builtin_requests(spec, largest)
            vllm = ladder_cost("vLLM default", vllm_ladder(largest), req, times, memory)
            ladders = [
                ladder_cost(f"chosen, at most {args.most}",
                            choose(req, times, most=args.most), req, times, memory),
                ladder_cost("chosen, within vLLM's memory",
                            choose(req, times, memory=memory, budget=vllm.memory), req,
                            times, memory),
                ladder_cost("every size swept", sorted(times), req, times, memory),
                vllm,
            ]  # fmt: skip
            for c in ladders:
                w.writerow([d.name, spec, c.name, " ".join(map(str, c.sizes)), c.graphs,
                            c.memory, f"{c.expected_us:.1f}", f"{c.lost_us:.1f}",
                            f"{c.padding_share:.4f}", c.interpolated])  # fmt: skip


if __name__ == "__main__":
    main()
