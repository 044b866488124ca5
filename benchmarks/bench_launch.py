"""Launches in a decode loop, a graph's life and the graphs' memory, on the examples
(issue 43, items 2-5), on the GPU.

    python3 benchmarks/bench_launch.py --out DIR [--models llama hf] [--batches 1 64]
        [--sizes 1 2 4 8 16 32 64] [--parts life memory exposure pair profiler]
        [--children 4] [--pair-trials 30] [--loop-launches 20]

1. Exposure: each example's eager decode step at each batch, profiled as `profile` does
   (capture/profile/step.py profile_step): its host launch timed plain, and whether its
   launch hides behind the replay before it when replayed back to back
   (capture/profile/exposure.py).
2. A removal where the launch is exposed: graphs of empty Triton kernels too short to
   hide their launch, 16 over 16 streams against 8 over 8 (8 nodes and 8 branches fewer),
   profiled and timed as a pair: the profile's predicted saving, the measured one, and
   the plain host launches' difference beside them.
3. A graph's life for each example (capture/graph/lifecycle.py, as bench_host.py for
   the llama example alone).
4. Memory: each example swept (capture/sweep/run.py sweep_step) over `--sizes`: each
   size's pool and executable, the shared pool with its executables (the truth), the
   two estimators and their errors, what freeing the graphs gave back, and the
   start-up's shares.
5. A profiler session's after-effect (the "profiler" part): fresh processes, each
   timing host launches (a 100- and a 1000-node chain of empty Triton kernels, the llama
   example's step from its reset) and a fresh chain's instantiate, then running 20
   replays either under graph-harness's profiler session (capture/profile/activities.py
   cupti_trace: arm "profiler") or plainly (arm "control"), then timing all of it again
   in the same process. The arms alternate over `--children` processes each, so what the
   after/before ratio shows beyond the control's is the profiler's.

Predictions, written before the first run:
- Both examples' launches are hidden at batch 1 and at 64: a step's device work
  (hundreds of microseconds) is far longer than its host launch (about 4 us for a
  chain on the H200, BENCHMARKS.md), so each launch returns long before the GPU runs dry.
- The empty graphs' launches are exposed, and their measured saving follows the host
  launches' difference (about 16.3 - 8.8 = 7.5 us from the host fits) rather than 8
  nodes of device dispatch (8 x 0.68 = 5.4 us).
- Session 19, the pair priced with the host launch saving where a launch is exposed
  (capture/profile/pairs.py): within 10% of the measured saving but not within 3%
  (session 18's figures: 5.4 us net + 14.7 us host = 20.1 us against 18.3 measured), so
  "fail" or "cannot tell": a launch timed from an idle device is not the same launch
  queued behind the previous replay.
- Session 20, the pair with 120 trials (`--pair-trials 120`) against session 19's 30:
  the measured saving's interval about half as wide (about +-2.5% where it was +-5%),
  so the verdict can be "pass" if the host saving stays within 1% of it.
- Session 20, launches back to back with 200 a trial (`--loop-launches 200`) against 20:
  the per-trial differences' p5-p95 spread (about +-15% at 20) about 3x narrower, and the
  back-to-back saving within 3% of the measured one in most runs. (Not yet run: the
  session's device time ran out before it.)
- A profiler session leaves host launches slower in its process (session 18 saw the
  llama launch at 16 us before one and 2-15x that after): the profiler arm's after/before
  ratio above 1.5, the control's within 10% of 1; instantiate about unchanged.
- Every executable holds less than a 2 MiB page; both estimators over-estimate the
  shared pool, the sum of per-size deltas by about the number of sizes over what one
  pool reuses; freeing the graphs gives all of it back.

Each part is written as it finishes (DIR/exposure.csv, DIR/pair.csv, DIR/lifecycle.json,
DIR/sweep-NAME/ as `sweep --out`, DIR/memory.csv), a part that fails is logged and the
rest still run; DIR/launch.json holds the environment and settings.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import traceback
from dataclasses import asdict
from pathlib import Path

import pandas as pd
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from graph_harness.capture.environment import environment, now  # noqa: E402
from graph_harness.capture.profile.settings import ProfileSettings  # noqa: E402
from tests.llama_example import load_example as example  # noqa: E402

EXPOSURE = ["name", "nodes", "period_us", "timed_us", "host_launch_us", "launch_us"]
EXPOSURE += ["lead_gap_us", "launch_late_us", "exposed_us", "launch", "launch_why"]
SETTINGS = ProfileSettings(trials=10, windows=3, replays=10)


def part(name: str, fn, failed: list[str]) -> None:
    print(f"--- {name}", flush=True)
    try:
        fn()
    except Exception:  # a part that fails is logged; the others still run
        traceback.print_exc()
        failed.append(name)


def exposure(out: Path, models, batches) -> None:
    from graph_harness.capture.profile.step import profile_step

    rows = []
    for m in models:
        mod = example(m)
        steps = {f"{m} b{b}": mod.make_step(batch=b) for b in batches}
        modules = {n: s.module for n, s in steps.items()}
        result = profile_step(steps, SETTINGS, module=modules, progress=print)
        s = result.summary()
        rows += s[[c for c in EXPOSURE if c in s]].to_dict("records")
        pd.DataFrame(rows).to_csv(out / "exposure.csv", index=False)
        del steps, modules, result
    print(pd.DataFrame(rows)[EXPOSURE[:-1]].to_string(index=False))
    for r in rows:
        print(f"{r['name']}: launch {r['launch']}: {r['launch_why']}")


def loop_launches_us(graphs: dict, *, trials: int, launches: int = 20) -> dict:
    """Per trial, the mean CPU time (us) of `launches` replay() calls issued back to back
    as a decode loop issues them (no sync between; one before and after each trial),
    trials interleaved across graphs."""
    names = list(graphs)
    for g in graphs.values():
        g.replay()
    torch.cuda.synchronize()
    out: dict[str, list[float]] = {n: [] for n in names}
    for t in range(trials):
        for n in names if t % 2 == 0 else names[::-1]:
            g = graphs[n]
            torch.cuda.synchronize()
            t0 = time.perf_counter_ns()
            for _ in range(launches):
                g.replay()
            out[n].append((time.perf_counter_ns() - t0) / launches / 1e3)
            torch.cuda.synchronize()
    return out


def exposed_pair(out: Path, trials: int, loop_launches: int) -> None:
    from graph_harness.capture.count import capture_and_keep
    from graph_harness.capture.profile.run import profile_steps
    from graph_harness.capture.replay.host import shaped
    from graph_harness.capture.replay.kinds import get_kind

    empty = get_kind("triton-empty").make(torch.device("cuda"))
    a = capture_and_keep(shaped(empty, 16, 16))
    b = capture_and_keep(shaped(empty, 8, 8))
    # Session 20's question: is the launch priced from an idle device (time_launches_us)
    # the launch a decode loop issues? The same graphs' replay() calls timed back to back,
    # without a sync between them, interleaved; reported beside, not used by the verdict.
    # Timed before the profile: a profiler session slows every later launch (part 5).
    graphs = {"a": a.captured.graph, "b": b.captured.graph}
    loop = loop_launches_us(graphs, trials=trials, launches=loop_launches)
    med = {n: statistics.median(v) for n, v in loop.items()}
    diffs = [x - y for x, y in zip(loop["a"], loop["b"])]
    loops = dict(
        loop_a_us=med["a"],
        loop_b_us=med["b"],
        loop_saving_us=statistics.median(diffs),
        loop_saving_p5=statistics.quantiles(diffs, n=20)[0],
        loop_saving_p95=statistics.quantiles(diffs, n=20)[-1],
    )
    result = profile_steps(
        {"16 over 16": (a.export, a.captured.graph), "8 over 8": (b.export, b.captured.graph)},
        ProfileSettings(trials=trials, windows=3, replays=10),
    )
    s = result.summary().set_index("name")
    (pair,) = result.pair_table().to_dict("records")
    host = s.host_launch_us
    pair.update(host_a_us=host["16 over 16"], host_b_us=host["8 over 8"], **loops)
    pd.DataFrame([pair]).to_csv(out / "pair.csv", index=False)
    keys = ["removed_nodes", "predicted_us", "predicted_net_us", "measured_us", "measured_lo"]
    keys += ["measured_hi", "host_a_us", "host_b_us", "host_saving_us", "host_saving_lo"]
    keys += ["host_saving_hi", "launch_a", "launch_b", "predicted_launch_us", "error_net"]
    keys += ["verdict", "why", "loop_a_us", "loop_b_us", "loop_saving_us", "loop_saving_p5"]
    keys += ["loop_saving_p95"]
    print(json.dumps({k: pair[k] for k in keys}, indent=1, default=str))
    print(s[EXPOSURE[1:-1]].to_string())


def lifecycles(out: Path, models) -> None:
    from graph_harness.capture.graph.lifecycle import measure_lifecycle
    from graph_harness.capture.profile.activities import profiled

    got = {}
    for m in models:
        step = example(m).make_step()
        life = measure_lifecycle(step, repeats=7)
        got[m] = dict(asdict(life), after_profiler=profiled())
        (out / "lifecycle.json").write_text(json.dumps(got, indent=1) + "\n")
        print(
            f"{m}: {life.nodes} nodes; capture {life.capture_us:.0f} us, instantiate "
            f"{life.instantiate_us:.0f} us, upload {life.upload_us:.0f} us; update "
            f"{life.update_us:.0f} us ({life.update_result}) against re-capture + instantiate "
            f"{life.recapture_us:.0f} us; executable {life.exec_bytes / 2**20:.1f} MiB, "
            f"{life.returned_bytes / 2**20:.1f} MiB back"
        )
        del step


def memory(out: Path, models, sizes) -> None:
    from graph_harness.capture.sweep.run import sweep_step
    from graph_harness.capture.sweep.settings import SweepSettings

    rows = []
    for m in models:
        mod = example(m)
        result = sweep_step(
            lambda b, mod=mod: mod.make_step(batch=b),
            sizes,
            SweepSettings(trials=6),
            name=f"{m} eager",
            progress=print,
        )
        folder = out / f"sweep-{m}"
        folder.mkdir(parents=True, exist_ok=True)
        result.write(folder)
        sz = result.sizes_table()
        cols = ["batch", "nodes", "replay_us", "host_launch_us", "instantiate_s", "upload_s"]
        print(sz[[*cols, "reserved", "exec_bytes"]].to_string(index=False))
        print(result.shared_table().to_string(index=False))
        est = result.estimate_table()
        print(est.to_string(index=False))
        print(result.startup_table().to_string(index=False))
        true = int(est.true_bytes.iloc[0]) if len(est) else None
        print(f"{m}: freeing the shared pool's graphs gave back {result.returned} of {true} bytes")
        for e in est.itertuples():
            rows.append(dict(model=m, estimator=e.estimator, bytes=e.bytes,
                             true_bytes=e.true_bytes, error=e.error,
                             returned=result.returned))  # fmt: skip
        pd.DataFrame(rows).to_csv(out / "memory.csv", index=False)
        del result


AB_GRAPHS = ("chain 100", "chain 1000", "llama b1")


def ab_child(arm: str, path: Path) -> None:
    """One process of the profiler A/B (module docstring, part 5): JSON rows to `path`."""
    import statistics

    from graph_harness.capture.graph.capture import capture_graph
    from graph_harness.capture.graph.lifecycle import instantiate_and_upload
    from graph_harness.capture.profile.activities import cupti_trace
    from graph_harness.capture.replay.guard import Replayer
    from graph_harness.capture.replay.host import shaped, time_launches_us
    from graph_harness.capture.replay.kinds import get_kind
    from graph_harness.capture.state.steps import start_of

    empty = get_kind("triton-empty").make(torch.device("cuda"))
    step = example("llama").make_step(batch=1)
    graphs = {f"chain {n}": capture_graph(shaped(empty, n, 1)).graph for n in (100, 1000)}
    graphs["llama b1"] = Replayer(capture_graph(step).graph, "llama b1", reset=start_of(step))

    def measure(phase: str) -> list[dict]:
        times = time_launches_us(graphs, trials=15, launches=5, warmup=3)
        rows = [dict(arm=arm, phase=phase, what=f"launch {n}", us=statistics.median(t))
                for n, t in times.items()]  # fmt: skip
        inst = []
        for _ in range(5):  # a fresh 1000-node chain each time, instantiated and uploaded
            g = capture_graph(shaped(empty, 1000, 1)).graph
            inst.append(instantiate_and_upload(g).instantiate_s * 1e6)
            del g
        rows.append(dict(arm=arm, phase=phase, what="instantiate chain 1000",
                         us=statistics.median(inst)))  # fmt: skip
        return rows

    rows = measure("before")
    chain = graphs["chain 1000"]

    def session() -> None:
        for _ in range(20):
            chain.replay()

    cupti_trace(session) if arm == "profiler" else (session(), torch.cuda.synchronize())
    rows += measure("after")
    path.write_text(json.dumps(rows) + "\n")


def profiler_ab(out: Path, children: int) -> None:
    import subprocess
    import tempfile

    rows = []
    arms = [("profiler", "control")[(k + k // 2) % 2] for k in range(2 * children)]
    with tempfile.TemporaryDirectory(prefix="bench-launch-ab-") as tmp:  # ours alone
        for k, arm in enumerate(arms):  # P C C P P C ...: neither arm always first
            path = Path(tmp) / f"ab-{k}.json"
            cmd = [sys.executable, __file__, "--out", tmp, "--ab-child", arm, str(path)]
            got = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            if got.returncode != 0:
                raise RuntimeError(f"A/B child {k} ({arm}) failed:\n{got.stderr[-3000:]}")
            rows += [dict(r, process=k) for r in json.loads(path.read_text())]
            pd.DataFrame(rows).to_csv(out / "profiler-ab.csv", index=False)
    df = pd.DataFrame(rows)
    wide = df.pivot_table(index=["arm", "process", "what"], columns="phase", values="us")
    wide["ratio"] = wide["after"] / wide["before"]
    print(wide.round(2).to_string())
    print(wide.groupby(["arm", "what"]).ratio.median().round(3).unstack(0).to_string())


def main() -> None:
    if len(sys.argv) > 1 and "--ab-child" in sys.argv:
        i = sys.argv.index("--ab-child")
        ab_child(sys.argv[i + 1], Path(sys.argv[i + 2]))
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--models", nargs="+", default=["llama", "hf"])
    ap.add_argument("--batches", nargs="+", type=int, default=[1, 64])
    ap.add_argument("--sizes", nargs="+", type=int, default=[1, 2, 4, 8, 16, 32, 64])
    ap.add_argument("--parts", nargs="+", default=["exposure", "pair", "life", "memory"])
    ap.add_argument("--children", type=int, default=4, help="processes per arm (profiler)")
    ap.add_argument("--pair-trials", type=int, default=30, help="profile trials (pair)")
    ap.add_argument("--loop-launches", type=int, default=20, help="launches a loop trial (pair)")
    args = ap.parse_args()
    order = ["life", "memory", "exposure", "pair", "profiler"]
    unknown = sorted(set(args.parts) - set(order))
    if unknown:  # before anything is written
        ap.error(f"unknown --parts {unknown}: choose from {', '.join(order)}")
    for flag, value, least in [
        ("--pair-trials", args.pair_trials, 2),
        ("--loop-launches", args.loop_launches, 1),
        ("--children", args.children, 1),
    ]:
        if value < least:
            ap.error(f"{flag} must be at least {least}, got {value}")
    args.out.mkdir(parents=True, exist_ok=True)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    meta = dict(env=environment(device), created=now(), args=vars(args))
    meta["profile_settings"] = asdict(SETTINGS)
    (args.out / "launch.json").write_text(json.dumps(meta, indent=1, default=str) + "\n")
    failed: list[str] = []
    parts = {
        "exposure": lambda: exposure(args.out, args.models, args.batches),
        "pair": lambda: exposed_pair(args.out, args.pair_trials, args.loop_launches),
        "life": lambda: lifecycles(args.out, args.models),
        "memory": lambda: memory(args.out, args.models, args.sizes),
        "profiler": lambda: profiler_ab(args.out, args.children),
    }
    # A profiler session leaves this process's host launches (and captures) slow for good
    # (part 5, "profiler"): the parts that time them run before the ones that profile.
    for name in sorted(args.parts, key=order.index):
        part(name, parts[name], failed)
    if failed:
        print(f"parts that failed: {failed}")
        sys.exit(1)


if __name__ == "__main__":
    main()
