"""`check` over a trajectory, on the GPU: verdicts and what a trajectory costs against one step.

    python3 benchmarks/bench_check.py --out DIR            # the H200 figures
    python3 benchmarks/bench_check.py --out DIR --smoke    # CPU: tiny presets, eager runs only

Each step is captured once (`check_step`'s own capture: warm-ups, capture), then its graph
checked by `check_captured` with --steps 1 and with the default (4), REPEATS times each,
interleaved (1, 4, 1, 4, ...); the wall time of each check (it syncs) and its verdict.

The steps: the HF example (examples/hf_decode.py, fed a new token at every call) and the
llama example (examples/llama_decode.py, fed a token and a position), each eager and
compiled; and three steps broken on purpose (tests/targets.py), the first two in ways a
one-step check misses:
- host_position_rewound: a position written from a Python int that the reset rewinds:
  the graph replays the int its capture saw (0), right at call 0 only;
- rebinding_feed: a feed that rebinds the token to a new tensor instead of copying into
  the captured one: the graph keeps reading call 0's token;
- host_position: the false pass of issue 30 (the int the reset does not rewind).

Writes DIR/check.csv (one row per check) and DIR/check.json (every verdict and finding),
and prints a table.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from graph_harness.capture.check.step import STEPS, check_captured  # noqa: E402
from graph_harness.capture.count import capture_and_keep  # noqa: E402
from graph_harness.capture.state.steps import StateWatch  # noqa: E402
from tests import targets as T  # noqa: E402


def load(name: str):
    path = ROOT / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"{name}_bench", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def steps(smoke: bool):
    preset = "tiny" if smoke else "small"
    dev = "cpu" if smoke else None
    hf, ll = load("hf_decode"), load("llama_decode")
    yield "hf eager", lambda: hf.make_step(preset=preset, device=dev)
    yield "llama eager", lambda: ll.make_step(preset=preset, device=dev)
    if not smoke:  # compiled steps are counted on CUDA only
        yield "hf compiled", lambda: hf.make_step(compiled=True, preset=preset)
        yield "llama compiled", lambda: ll.make_step(compiled=True, preset=preset)
    yield "broken: host position, rewound", T.host_position_rewound
    yield "broken: feed rebinds the token", T.rebinding_feed
    yield "broken: host position (issue 30's false pass)", T.host_position


def first_failure(r) -> str:
    bad = [f for f in r.findings if f.severity in ("fail", "unverified")]
    if not bad:
        return "-"
    f = min(bad, key=lambda f: (f.step is None, f.step or 0))
    return f"{f.kind} at step {f.step}: {f.tensor}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    device = "cpu" if args.smoke else "cuda"
    rows, docs = [], {}
    for name, make in steps(args.smoke):
        step = make()
        watch = StateWatch(step)
        t0 = time.perf_counter()
        kept = capture_and_keep(step, device=device, watch=watch, module=step_module(step))
        export, captured = kept.export, kept.captured
        capture_s = time.perf_counter() - t0
        times = {1: [], STEPS: []}
        results = {}
        for _ in range(args.repeats):
            for n in (1, STEPS):
                t0 = time.perf_counter()
                results[n] = check_captured(
                    step, export, captured, watch.repeatability, name=name, steps=n
                )
                times[n].append(time.perf_counter() - t0)
        for n, r in results.items():
            rows.append(
                dict(
                    step=name,
                    steps=n,
                    nodes=export.total,
                    status=r.status,
                    first=first_failure(r),
                    fed=r.fed,
                    outputs=r.outputs,
                    state=r.state,
                    nondeterministic=r.nondeterministic,
                    capture_s=round(capture_s, 3),
                    check_s_median=round(statistics.median(times[n]), 4),
                    check_s_min=round(min(times[n]), 4),
                    check_s_max=round(max(times[n]), 4),
                )
            )
            docs[f"{name} / {n}"] = r.to_dict()
        del step, captured, export
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    import pandas as pd

    df = pd.DataFrame(rows)
    df.to_csv(args.out / "check.csv", index=False)
    (args.out / "check.json").write_text(json.dumps(docs, indent=1) + "\n")
    env = f"torch {torch.__version__}"
    if torch.cuda.is_available():
        env += f", {torch.cuda.get_device_name()}"
    print(env)
    with pd.option_context("display.width", 250, "display.max_colwidth", 60):
        print(df.drop(columns=["check_s_min", "check_s_max"]).to_string(index=False))


def step_module(step):
    m = getattr(step, "module", None)
    return m if isinstance(m, torch.nn.Module) else None


if __name__ == "__main__":
    main()
