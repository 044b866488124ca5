"""The host side of a graph launch against the device side, on the GPU (issue 43, item 1).

    python3 benchmarks/bench_host.py --out DIR [--trials 30] [--lengths 64 256 1024 2048 4096]

Host: capture/replay/host.py measure_host_launch: graphs of empty Triton kernels and of
torch adds, as a chain, a fork-join over 8 streams and one over 16, at each length; each
trial the median CPU time of 5 single `replay()` calls from an idle device (no
synchronize inside the timed span), trials interleaved across graphs; a least-squares fit
per kind and shape with its 95% bootstrap interval (whole trials resampled).
Device: the same kinds' chains timed between CUDA events (capture/replay/chains.py
measure_chains), the per-node dispatch cost `replay` prices nodes with.

Prediction, written before the first run: a launch's host cost grows with its nodes far
more slowly than its device dispatch (about 0.05-0.3 us per node against about 0.7 on the
H200: the driver hands an uploaded graph to the GPU whole), with a fixed cost of 5-20 us
(torch's replay() and cudaGraphLaunch); a graph spread over more streams costs the host a
little more per node.

Then (issue 43, items 3 and 4) the llama example's decode step (examples/llama_decode.py,
its default preset) from capture to destroy (capture/graph/lifecycle.py): capture,
instantiate, upload, cudaGraphExecUpdate from an equal-topology re-capture against that
re-capture plus instantiate, and the device memory its executable holds outside the
caching allocator. Prediction: instantiate costs tens of microseconds per hundred nodes,
an update well under a re-capture plus instantiate, and the executable holds no more
than a page or two (2-4 MiB).

Writes DIR/host_trials.csv, DIR/host_fits.csv, DIR/device_fits.csv, DIR/lifecycle.json
and DIR/host.json (env and settings), and prints the tables.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from graph_harness.capture.environment import environment, now  # noqa: E402
from graph_harness.capture.replay.chains import measure_chains  # noqa: E402
from graph_harness.capture.replay.host import HOST_KINDS, HOST_LENGTHS, measure_host_launch  # noqa: E402
from graph_harness.capture.replay.settings import ReplaySettings  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--trials", type=int, default=30)
    ap.add_argument("--launches", type=int, default=5)
    ap.add_argument("--lengths", type=int, nargs="+", default=list(HOST_LENGTHS))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    say = lambda m: print(m, file=sys.stderr, flush=True)
    host_trials, host_fits = measure_host_launch(
        HOST_KINDS, lengths=args.lengths, trials=args.trials, launches=args.launches, progress=say
    )
    settings = ReplaySettings(lengths=tuple(args.lengths), trials=args.trials)
    _, device_fits = measure_chains(list(HOST_KINDS), settings, progress=say)
    host_trials.to_csv(args.out / "host_trials.csv", index=False)
    host_fits.to_csv(args.out / "host_fits.csv", index=False)
    device_fits.to_csv(args.out / "device_fits.csv", index=False)
    env = environment(torch.device("cuda"))
    doc = {"env": env, "created": now(), "trials": args.trials, "launches": args.launches,
           "lengths": args.lengths}  # fmt: skip
    (args.out / "host.json").write_text(json.dumps(doc, indent=1) + "\n")
    device = dict(zip(device_fits.kind, device_fits.slope))
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    print(f"{'kind':<14}{'shape':<11}{'host us/node':>13}{'95% interval':>22}"
          f"{'fixed us':>10}{'device us/node':>16}{'host/device':>12}")  # fmt: skip
    for f in host_fits.itertuples():
        d = device.get(f.kind, float("nan"))
        print(
            f"{f.kind:<14}{f.shape:<11}{f.slope:>13.4f}"
            f"{f'[{f.slope_lo:.4f}, {f.slope_hi:.4f}]':>22}{f.intercept:>10.2f}"
            f"{d:>16.4f}{f.slope / d:>12.3f}"
        )
    life = _lifecycle(args.out, say)
    print(
        f"llama example: {life.nodes} nodes; capture {life.capture_us:.0f} us, instantiate "
        f"{life.instantiate_us:.0f} us, upload {life.upload_us:.0f} us; update "
        f"{life.update_us:.0f} us ({life.update_result}) against re-capture + instantiate "
        f"{life.recapture_us:.0f} us; executable {life.exec_bytes / 2**20:.1f} MiB"
        f"{' (under a 2 MiB page: not resolved)' if life.below_a_page else ''}, "
        f"{life.returned_bytes / 2**20:.1f} MiB back when destroyed"
    )
    return 0


def _lifecycle(out: Path, say):
    import importlib.util
    from dataclasses import asdict

    from graph_harness.capture.graph.lifecycle import measure_lifecycle

    spec = importlib.util.spec_from_file_location(
        "llama_decode", ROOT / "examples" / "llama_decode.py"
    )
    ex = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = ex
    spec.loader.exec_module(ex)
    say("the llama example's graph from capture to destroy")
    step = ex.make_step()
    reset = getattr(step, "reset", None)
    life = measure_lifecycle(step, repeats=7)
    if reset is not None:
        reset()  # its warm-ups advanced it: back to its start
    (out / "lifecycle.json").write_text(json.dumps(asdict(life), indent=1) + "\n")
    return life


if __name__ == "__main__":
    sys.exit(main())
