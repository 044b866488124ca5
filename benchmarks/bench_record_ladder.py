"""What `graph-harness record` adds to each graph of a capture ladder (issue 59's "at most
2 ms a graph"), measured by the program itself: examples/tiny_engine.py times its own
capture loop (`capture_s` in its --stats), alone and under each recorded variant, fresh
processes, the variants interleaved round by round.

    python benchmarks/bench_record_ladder.py [--sizes 64] [--piecewise] [--repeats 5]
        [--variants record "record --module-scopes" ...] [--repo DIR] [--json FILE]

Per graph = (the loop's seconds under the variant - alone) / graphs, the median over
rounds of each round's difference. Everything the recorder does inside a capture is in
it: the region's watch, the node and pool reads, the record, its line written, and the
garbage collector's passes that its objects bring on, which `record_s` (the recorder's
own clock, read in its recording) leaves to whoever allocates next; so is what its first
capture pays once (imports, the environment read), spread over the ladder: an upper
bound. Needs CUDA (without it the engine captures nothing).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_record_startup import REPO, VARIANTS, _command, _keep, _machine, _run


def _loop_s(stats: Path) -> tuple[float, int]:
    doc = json.loads(stats.read_text())
    return doc["capture_s"], doc["graphs"]


def ladder(
    engine: list[str],
    env: dict,
    repeats: int,
    work: Path,
    names: list[str],
    keep: Callable[[dict], None],
) -> dict:
    """Each variant's capture loop, `repeats` rounds after a warm-up round, interleaved;
    what ran so far given to `keep` after each run (a deadline keeps it)."""
    loops: dict[str, list[float]] = {n: [] for n in names}
    graphs = 0
    for r in range(-1, repeats):  # round -1: the warm-up, not counted
        order = names[r % len(names) :] + names[: r % len(names)] if r >= 0 else names
        for name in order:
            stats, out = work / "stats.json", work / f"out-{r}"
            _run(_command(name, [*engine, "--stats", str(stats)], out), env, work)
            s, graphs = _loop_s(stats)
            stats.unlink()
            shutil.rmtree(out, ignore_errors=True)
            if not graphs:
                raise SystemExit("the engine captured no graph (no CUDA?): nothing to divide by")
            if r >= 0:
                loops[name].append(s)
                keep(_summary(loops, graphs))
    return _summary(loops, graphs)


def _summary(loops: dict[str, list[float]], graphs: int) -> dict:
    """The loops' medians, and each variant's milliseconds a graph over the program alone
    (the median over complete rounds of each round's difference)."""
    alone = loops["alone"]
    per_graph = {
        n: [(a - b) / graphs * 1e3 for a, b in zip(t, alone)]
        for n, t in loops.items()
        if n != "alone"
    }
    return {
        "graphs": graphs,
        "loop_s": {n: {"median": statistics.median(t), "runs": t} for n, t in loops.items() if t},
        "per_graph_ms": {
            n: {"median": statistics.median(d), "min": min(d), "max": max(d), "runs": d}
            for n, d in per_graph.items()
            if d
        },
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, default=64, help="batch sizes 1..N, one graph each")
    ap.add_argument("--piecewise", action="store_true", help="a graph per piece of each size")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--repo", type=Path, default=REPO, help="the checkout to measure")
    ap.add_argument("--variants", nargs="+", choices=list(VARIANTS)[1:], default=["record"])
    ap.add_argument("--json", type=Path, help="also write the document here")
    args = ap.parse_args()
    if args.json is not None and not args.json.parent.is_dir():
        raise SystemExit(f"--json {args.json}: its folder does not exist")
    names = ["alone", *dict.fromkeys(args.variants)]
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env["PYTHONPATH"] = str(args.repo.resolve())
    engine = [str(REPO / "examples" / "tiny_engine.py"), "--steps", "8"]
    engine += ["--sizes", *(str(s) for s in range(1, args.sizes + 1))]
    engine += ["--piecewise"] if args.piecewise else []
    work = Path(tempfile.mkdtemp(prefix="bench-record-ladder-"))
    try:
        doc = {"checkout": str(args.repo.resolve()), "machine": _machine(env)}
        doc.update(repeats=args.repeats, engine=engine[1:])
        doc["ladder"] = ladder(
            engine,
            env,
            args.repeats,
            work,
            names,
            lambda part: _keep({**doc, "ladder": part}, args.json),
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    _keep(doc, args.json)
    print(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
