"""A compiled step captured under module scopes, first and again: does the second capture
compile again? Times beside a plain compile of the same step, compiles counted by Dynamo.

    python3 benchmarks/bench_recompile.py --out DIR
    python3 benchmarks/bench_recompile.py --out DIR --target path/to/steps.py:make_compiled
    python3 benchmarks/bench_recompile.py --out DIR --smoke   # CPU: the eager tiny step

Every phase runs in a fresh process (Dynamo's in-memory caches start empty; the disk caches
are shared, so a first phase that is thrown away warms Triton's and Inductor's for all):
- `plain`: the step's first call outside module_scopes (a plain torch.compile: compile and
  one run), caches as torch ships them (the FX graph cache on: a warm disk cache hits);
- `plain-nofx`: the same with Inductor's FX graph cache and AOTAutograd's cache off, as a
  compile that records provenance must run (the code generation is what records it);
- `scoped`: capture + export under `module_scopes` three times, each in a `with` of its
  own (what the CLI, a report or three node_budget tests do): the first compiles (warm-up
  included), the second and third should not. Dynamo's unique-graph counter before and
  after each says how many compiles it did.

Runs against this checkout's graph-harness, or any other (`--repo`, e.g. main before the
change), using only APIs both have. Writes DIR/recompile.json and prints a table: each
phase's seconds (median over --repeats processes) and compiles.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = "examples/llama_decode.py:make_compiled_step"
PHASES = ("plain", "plain-nofx", "scoped")


def child(phase: str, target: str, repo: Path) -> dict:
    """One phase, in this (fresh) process."""
    sys.path.insert(0, str(repo))
    import torch
    from torch._dynamo.utils import counters

    from graph_harness.capture import capture_and_count, module_scopes
    from graph_harness.reports.cli.target import load_target

    def sync():
        if torch.cuda.is_available():
            torch.cuda.synchronize()

    def graphs() -> int:
        return int(counters["stats"]["unique_graphs"])

    import graph_harness.capture as gh

    t = load_target(target)
    out = {"phase": phase, "target": target, "torch": torch.__version__, "code": gh.__file__}
    if phase in ("plain", "plain-nofx", "warm"):
        from torch._inductor import config

        off = {"fx_graph_cache": False} if phase == "plain-nofx" else {}
        functorch = {"enable_autograd_cache": False} if phase == "plain-nofx" else {}
        import torch._functorch.config as fconfig

        with config.patch(off), fconfig.patch(functorch):
            t0 = time.perf_counter()
            t.step()
            sync()
            out["seconds"] = [time.perf_counter() - t0]
        out["compiles"] = [graphs()]
        return out
    seconds, compiles = [], []
    for _ in range(3):
        before = graphs()
        t0 = time.perf_counter()
        with module_scopes(t.model()):
            e = capture_and_count(t.step)
        sync()
        seconds.append(time.perf_counter() - t0)
        compiles.append(graphs() - before)
        out.setdefault("attribution", []).append(e.options.get("compiled_attribution"))
        out["nodes"] = e.total
    out["seconds"], out["compiles"] = seconds, compiles
    return out


def run_phase(phase: str, target: str, repo: Path) -> dict:
    cmd = [sys.executable, __file__, "--child", phase, "--target", target, "--repo", str(repo)]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=1800)
    if r.returncode != 0:
        raise SystemExit(f"phase {phase} failed:\n{r.stderr[-4000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path)
    ap.add_argument("--target", default=DEFAULT)
    ap.add_argument("--repo", type=Path, default=ROOT, help="the graph-harness checkout to time")
    ap.add_argument("--repeats", type=int, default=3, help="fresh processes per phase")
    ap.add_argument("--smoke", action="store_true", help="CPU: the eager tiny step, 1 repeat")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.target, args.repo)))
        return
    if args.out is None:
        ap.error("--out is required")
    args.out.mkdir(parents=True, exist_ok=True)
    target, repeats = args.target, args.repeats
    if args.smoke:
        target, repeats = "examples/llama_decode.py:make_tiny_step", 1
    run_phase("warm", target, args.repo)  # Triton's and Inductor's disk caches, for all
    rows = {p: [run_phase(p, target, args.repo) for _ in range(repeats)] for p in PHASES}
    doc = {"target": target, "repo": str(args.repo), "repeats": repeats, "phases": rows}
    (args.out / "recompile.json").write_text(json.dumps(doc, indent=1) + "\n")
    code = rows["plain"][0]["code"]
    print(f"{target} (graph-harness from {code}), median of {repeats} fresh processes:")
    print(f"{'phase':<22} {'seconds':>9} {'compiles':>9}")
    for p, runs in rows.items():
        for i, label in enumerate(("", " second", " third") if p == "scoped" else ("",)):
            s = statistics.median(r["seconds"][i] for r in runs)
            c = statistics.median(r["compiles"][i] for r in runs)
            name = f"{p} capture{label or ' first'}" if p == "scoped" else p
            print(f"{name:<22} {s:>9.3f} {c:>9.0f}")
    attribution = rows["scoped"][0].get("attribution") or []
    for i, a in enumerate(attribution):
        print(f"capture {i + 1}: {a}")


if __name__ == "__main__":
    main()
