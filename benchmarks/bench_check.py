"""`check` over a trajectory, on the GPU: verdicts, what a trajectory costs, to the end of
the cache, and a soak.

    python3 benchmarks/bench_check.py --out DIR            # the H200 figures
    python3 benchmarks/bench_check.py --out DIR --smoke    # CPU: tiny presets, eager runs only

Each step is captured once (`check_step`'s own capture: warm-ups, capture), then its graph
checked by `check_captured` with --steps 1, with the default (4) and, for a step that
gives its length (`step.max_steps`), `to-end`, REPEATS times each, interleaved (1, 4,
to-end, 1, ...); the wall time of each check (it syncs), each run's own time, and its
verdict. The step's own eager time per call is measured apart (CUDA events around
`max_steps` fed calls from its reset, median of REPEATS), so a check's cost reads as
eager-call equivalents per trajectory call: a check runs 2 eager calls and 2 replays per
call, so about 4 (less, a replay being cheaper than an eager call) is the floor.

The steps: the HF example (examples/hf_decode.py, fed a new token at every call) and the
llama example (examples/llama_decode.py, fed a token and a position), each eager and
compiled; and four steps broken on purpose (tests/targets.py, tests/capture/check/
planted.py), the first two in ways a one-step check misses, the last in a way
four steps miss:
- host_position_rewound: a position written from a Python int that the reset rewinds:
  the graph replays the int its capture saw (0), right at call 0 only;
- rebinding_feed: a feed that rebinds the token to a new tensor instead of copying into
  the captured one: the graph keeps reading call 0's token;
- host_position: the false pass of issue 30 (the int the reset does not rewind);
- split_on_the_host: a path chosen on the host once a counter passes 20 (a split count,
  a sliding window): right for 20 calls.

Then a soak (`--soak`, 10,000 replays by default) of the llama example after its check to
the end: its time, laps, comparisons and the watchdog's deadline.

Writes DIR/check.csv (one row per check), DIR/check.json (every verdict and finding) and
DIR/soak.json, and prints the tables.
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

from graph_harness.capture.check.settings import TO_END  # noqa: E402
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
    if not smoke:
        from tests.capture.check.planted import split_on_the_host

        yield "broken: a path switched on the host at call 20", split_on_the_host


def first_failure(r) -> str:
    bad = [f for f in r.findings if f.severity in ("fail", "unverified")]
    if not bad:
        return "-"
    f = min(bad, key=lambda f: (f.step is None, f.step or 0))
    return f"{f.kind} at step {f.step}: {f.tensor}"


def eager_ms(step, calls: int, repeats: int) -> float | None:
    """The step's own time per call: `calls` fed calls from its reset, CUDA events around
    them, the median of `repeats` (None on the CPU)."""
    if not torch.cuda.is_available():
        return None
    reset, feed = getattr(step, "reset", None), getattr(step, "feed", None)
    per = []
    for _ in range(repeats + 1):  # the first a warm-up
        if reset is not None:
            reset()
        if feed is not None:
            feed(0)
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for i in range(calls):
            if feed is not None and i:
                feed(i)
            step()
        b.record()
        torch.cuda.synchronize()
        per.append(a.elapsed_time(b) / calls)
    if reset is not None:
        reset()
        if feed is not None:
            feed(0)
    torch.cuda.synchronize()
    return statistics.median(per[1:])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--soak", type=int, default=10_000)
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    device = "cpu" if args.smoke else "cuda"
    rows, docs = [], {}
    soak_step = None
    for name, make in steps(args.smoke):
        step = make()
        watch = StateWatch(step)
        t0 = time.perf_counter()
        kept = capture_and_keep(step, device=device, watch=watch, module=step_module(step))
        export, captured = kept.export, kept.captured
        capture_s = time.perf_counter() - t0
        lengths = [1, STEPS] + ([TO_END] if getattr(step, "max_steps", None) else [])
        times = {n: [] for n in lengths}
        results = {}
        for _ in range(args.repeats):
            for n in lengths:
                t0 = time.perf_counter()
                results[n] = check_captured(
                    step, export, captured, watch.repeatability, name=name, steps=n
                )
                times[n].append(time.perf_counter() - t0)
        longest = results[lengths[-1]].steps
        per_call = eager_ms(step, longest, args.repeats) if not name.startswith("broken") else None
        for n, r in results.items():
            check_s = statistics.median(times[n])
            rows.append(
                dict(
                    step=name,
                    steps=n,
                    calls=r.steps,
                    compared=len(r.compared_calls),
                    nodes=export.total,
                    status=r.status,
                    first=first_failure(r),
                    fed=r.fed,
                    outputs=r.outputs,
                    state=r.state,
                    nondeterministic=r.nondeterministic,
                    capture_s=round(capture_s, 3),
                    check_s_median=round(check_s, 4),
                    check_s_min=round(min(times[n]), 4),
                    check_s_max=round(max(times[n]), 4),
                    runs_s=" ".join(f"{k}={v:.3f}" for k, v in r.seconds.items()),
                    eager_ms_per_call=None if per_call is None else round(per_call, 4),
                    # eager-call equivalents per trajectory call: 4 calls (2 eager, 2
                    # replayed) run per trajectory call, so about 4 is the floor
                    cost_x=None
                    if per_call is None
                    else round(check_s * 1e3 / (per_call * r.steps), 2),
                )
            )
            docs[f"{name} / {n}"] = r.to_dict()
        if name == "llama eager" and not args.smoke:
            soak_step = (step, export, captured, watch.repeatability, per_call)
        else:
            del step, captured, export
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
    soak_doc = None
    if soak_step is not None and args.soak:
        step, export, captured, rep, per_call = soak_step
        t0 = time.perf_counter()
        r = check_captured(
            step, export, captured, rep, name="llama eager", steps=TO_END, soak=args.soak
        )
        total = time.perf_counter() - t0
        soak_doc = {
            "step": "llama eager (small), after its check to the end",
            "status": r.status,
            "verdict": r.verdict(),
            "check_and_soak_s": total,
            "eager_ms_per_call": per_call,
            **r.soak,
            "us_per_soak_replay": r.soak["seconds"] / max(1, r.soak["replays"]) * 1e6,
        }
        (args.out / "soak.json").write_text(json.dumps(soak_doc, indent=1) + "\n")
    import pandas as pd

    df = pd.DataFrame(rows)
    df.to_csv(args.out / "check.csv", index=False)
    (args.out / "check.json").write_text(json.dumps(docs, indent=1) + "\n")
    env = f"torch {torch.__version__}"
    if torch.cuda.is_available():
        env += f", {torch.cuda.get_device_name()}"
    print(env)
    with pd.option_context("display.width", 300, "display.max_colwidth", 60):
        print(df.drop(columns=["check_s_min", "check_s_max", "runs_s"]).to_string(index=False))
    if soak_doc is not None:
        print(json.dumps(soak_doc, indent=1))


def step_module(step):
    m = getattr(step, "module", None)
    return m if isinstance(m, torch.nn.Module) else None


if __name__ == "__main__":
    main()
