"""In-round profiles on the GPU (issue 16): the built-in round's variants and the example
decoder, every node's duration and the gap before it under CUPTI.

    python3 benchmarks/bench_profile.py --out DIR            # the H200 figures
    python3 benchmarks/bench_profile.py --out DIR --smoke    # small shapes, few samples

Writes into DIR:
- round/: the default round's five variants, each built, timed (interleaved trials) and
  profiled in 3 builds: dispatch share, execution against dispatch per step, the largest
  gaps, and the four standard savings (shipped -> fused, shipped-compiled -> fused,
  shipped -> direct-compaction, shipped -> fused-pack) priced from the profiles against
  the measured ones; the files `graph-harness profile --out` writes;
- model/: examples/llama_decode.py (small preset: 8 layers, dim 512, bf16) eager and
  compiled, module scopes two levels deep, eager -> compiled priced the same way;
- summary.md: every table as `graph-harness profile` prints it, for both.
Without a GPU it exits 2: CUPTI records what a GPU ran.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
from rich.console import Console

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_model import load_example  # noqa: E402  (this folder: scripts run from it)

from graph_harness.capture import VARIANTS, RoundParams, module_scopes  # noqa: E402
from graph_harness.capture.count import capture_and_keep  # noqa: E402
from graph_harness.capture.profile.run import profile_steps  # noqa: E402
from graph_harness.capture.profile.settings import ProfileSettings  # noqa: E402
from graph_harness.capture.round.profile import profile_rounds  # noqa: E402
from graph_harness.reports.cli.commands.profile import show, write_plot  # noqa: E402
from graph_harness.reports.cli.console import IO  # noqa: E402
from graph_harness.reports.kernel_names import short_names  # noqa: E402

MODEL_DEPTH = 2  # layers.3: a module per layer


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--smoke", action="store_true", help="small round, tiny model, few samples")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("bench_profile: no GPU here: CUPTI records what a CUDA GPU ran", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    console = Console(record=True, width=200)
    io = IO(out=console, err=Console(stderr=True, width=200))
    if args.smoke:
        params = RoundParams(stages=2, rows=2, k=32, world=2, shard=64)
        settings = ProfileSettings(trials=4, builds=2, windows=1, replays=3)
        preset = "tiny"
    else:
        params, settings, preset = RoundParams(), ProfileSettings(), "small"
    say = lambda m: print(f"[{time.strftime('%H:%M:%S')}] {m}", flush=True)

    console.print(f"# Round {params.as_dict()}, {settings}\n")
    t0 = time.perf_counter()
    rounds = profile_rounds(params, list(VARIANTS), settings, progress=say)
    (args.out / "round").mkdir(exist_ok=True)
    rounds.write(args.out / "round", names=short_names)
    write_plot(args.out / "round", rounds, None)
    show(io, rounds, depth=None, top=10)
    say(f"round: {time.perf_counter() - t0:.1f} s")

    ex = load_example()
    steps, keep = {}, []
    for name, compiled in (("eager", False), ("compiled", True)):
        say(f"capturing the {preset} decoder, {name}")
        step = ex.make_step(compiled=compiled, preset=preset)
        with module_scopes(step.module, depth=MODEL_DEPTH):
            kept = capture_and_keep(step)
            export, captured = kept.export, kept.captured
        steps[name] = (export, captured.graph)
        keep.append(step)  # its buffers outlive the graph
    console.print(f"\n# examples/llama_decode.py, preset {preset}, module scopes {MODEL_DEPTH}\n")
    t0 = time.perf_counter()
    model = profile_steps(steps, settings, progress=say)
    (args.out / "model").mkdir(exist_ok=True)
    model.write(args.out / "model", MODEL_DEPTH, names=short_names)
    write_plot(args.out / "model", model, MODEL_DEPTH)
    show(io, model, depth=MODEL_DEPTH, top=10)
    say(f"model: {time.perf_counter() - t0:.1f} s")
    (args.out / "summary.md").write_text("```\n" + console.export_text() + "```\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
