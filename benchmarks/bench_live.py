"""record --check on a GPU (issue 56): the graphs programs capture, checked while they run,
each verdict set against what the program itself shows, and what checking costs.

    python benchmarks/bench_live.py --out DIR [--parts spec engine hf window cost]

- spec: examples/spec_decode.py in its four variants under `record --check` (its eager
  adapter and key adapter): each graph's verdict, the first difference's replay against
  the program's own account of its acceptances, the re-captures under one key, the graph
  never replayed; the program's output against a run without the recorder.
- engine: examples/tiny_engine.py, whole and piecewise, under `record --check`: every
  replayed graph's verdict; the output against a run alone.
- hf / window: examples/hf_generate.py (Llama; Gemma 3 with sliding-window layers,
  generated past its window) under `record --check`: the verdicts of Inductor's trees;
  independently, the tokens of generate() compiled (with its graphs) against generate()
  eager (`--no-compile`), token by token, in fp32, and the checked run's tokens against
  an unchecked compiled run's.
- cost: the engine program alone, under `record`, under `record --check` (each a median of
  interleaved runs); in one process, a checked replay's wall time against a plain replay
  and an eager call of the same step (each synchronized).

Writes DIR/summary.json, prints a summary.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
EX = REPO / "examples"
sys.path.insert(0, str(REPO))


def _gh(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "graph_harness", *args]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=timeout)


def _py(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    cmd = [sys.executable, *args]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=timeout)


def _verdicts(folder: Path) -> list[dict]:
    doc = json.loads((folder / "recording.json").read_text())
    return [
        {
            "key": g["key"],
            "replays": g["replays"],
            "status": (g.get("check") or {}).get("status"),
            "compared": (g.get("check") or {}).get("compared_count"),
            "first": ((g.get("check") or {}).get("differences") or [{}])[0],
            "reason": (g.get("check") or {}).get("reason"),
            "seconds": (g.get("check") or {}).get("seconds"),
        }
        for g in doc["graphs"]
    ]


def part_spec(out: Path) -> list[dict]:
    rows = []
    spec = EX / "spec_decode.py"
    for variant in ("right", "host-rollback", "shared-key", "never-replayed"):
        rec, stats = out / f"spec-{variant}", out / f"spec-{variant}.json"
        t0 = time.perf_counter()
        r = _gh(
            "record", "--check", "--out", str(rec), "--eager", f"{spec}:eager_form",
            "--key", f"{spec}:record_key", "--", str(spec), "--variant", variant,
            "--stats", str(stats),
        )  # fmt: skip
        wall = time.perf_counter() - t0
        alone = _py(str(spec), "--variant", variant)
        (out / f"spec-{variant}.txt").write_text(r.stdout + r.stderr)
        rows.append(
            {
                "variant": variant,
                "exit": r.returncode,
                "wall_s": wall,
                "output_unchanged": r.stdout.startswith(alone.stdout),
                "accepted": json.loads(stats.read_text())["accepted"],
                "graphs": _verdicts(rec),
            }
        )
    return rows


def part_engine(out: Path) -> list[dict]:
    rows = []
    eng = EX / "tiny_engine.py"
    for piecewise in (False, True):
        name = "piecewise" if piecewise else "whole"
        rec = out / f"engine-{name}"
        extra = ["--piecewise"] if piecewise else []
        r = _gh(
            "record", "--check", "--out", str(rec), "--eager", f"{eng}:eager_form",
            "--key", f"{eng}:record_key", "--", str(eng), *extra,
        )  # fmt: skip
        alone = _py(str(eng), *extra)
        rows.append(
            {
                "engine": name,
                "exit": r.returncode,
                "output_unchanged": r.stdout.startswith(alone.stdout),
                "graphs": _verdicts(rec),
            }
        )
    return rows


def _hf(out: Path, name: str, arch: list[str], tokens: int) -> dict:
    gen = EX / "hf_generate.py"
    base = ["--preset", "tiny", "--new-tokens", str(tokens), *arch]
    rec = out / f"{name}-rec"
    stats = {k: out / f"{name}-{k}.json" for k in ("checked", "plain", "eager32", "graph32")}
    t0 = time.perf_counter()
    r = _gh("record", "--check", "--out", str(rec), "--", str(gen), *base,
            "--stats", str(stats["checked"]))  # fmt: skip
    checked_s = time.perf_counter() - t0
    (out / f"{name}-rec.txt").write_text(r.stdout + r.stderr)
    t0 = time.perf_counter()
    plain = _py(str(gen), *base, "--stats", str(stats["plain"]))
    plain_s = time.perf_counter() - t0
    _py(str(gen), *base, "--dtype", "float32", "--no-compile", "--stats", str(stats["eager32"]))
    _py(str(gen), *base, "--dtype", "float32", "--stats", str(stats["graph32"]))
    got = {k: json.loads(p.read_text())["tokens"] for k, p in stats.items() if p.exists()}
    same = [a == b for a, b in zip(got["graph32"][0], got["eager32"][0])]
    return {
        "exit": r.returncode,
        "plain_exit": plain.returncode,
        "checked_wall_s": checked_s,
        "plain_wall_s": plain_s,
        "checked_tokens_equal_plain": got.get("checked") == got.get("plain"),
        "fp32_compiled_vs_eager_tokens_equal": all(same),
        "fp32_first_token_that_differs": None if all(same) else same.index(False),
        "graphs": _verdicts(rec),
    }


def part_hf(out: Path) -> dict:
    return _hf(out, "hf", [], 24)


def part_window(out: Path) -> dict:
    # window 8, 24 new tokens after an 8-token prompt: 24 decode steps past the window
    return _hf(out, "window", ["--arch", "gemma3", "--window", "8"], 24)


def _median_interleaved(cmds: dict[str, list[str]], rounds: int) -> dict[str, float]:
    times: dict[str, list[float]] = {k: [] for k in cmds}
    for _ in range(rounds):
        for k, cmd in cmds.items():
            t0 = time.perf_counter()
            r = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=600)
            times[k].append(time.perf_counter() - t0)
            assert r.returncode == 0, (k, r.stderr[-2000:])
    return {k: statistics.median(v) for k, v in times.items()} | {
        f"{k}_all": v for k, v in times.items()
    }


def _engine_module():
    spec = importlib.util.spec_from_file_location("_bench_live_engine", EX / "tiny_engine.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def part_cost(out: Path, rounds: int = 3, n: int = 200) -> dict:
    eng = str(EX / "tiny_engine.py")
    prog = [eng, "--piecewise", "--steps", "200"]
    gh = [sys.executable, "-m", "graph_harness", "record"]
    adapters = ["--eager", f"{eng}:eager_form", "--key", f"{eng}:record_key"]
    walls = _median_interleaved(
        {
            "alone": [sys.executable, *prog],
            "record": [*gh, "--", *prog],
            "record_check": [*gh, "--check", *adapters, "--", *prog],
        },
        rounds,
    )
    # one process: the whole step at batch 4, a plain replay, a checked one, an eager call
    from graph_harness.capture.live.checked import GraphCheck
    from graph_harness.capture.live.forms import Adapted
    from graph_harness.capture.live.sample import Sample
    from graph_harness.capture.record.keys import CaptureContext
    from graph_harness.capture.record.verdict import GraphVerdict

    mod = _engine_module()
    engine = mod.Engine([4], piecewise=False, layers=4, dim=256)
    engine.capture()
    (graph,) = engine.graphs[4]
    mod._context.append(mod.ForwardContext(4))
    frame = sys._getframe()
    self = engine  # noqa: F841 (the adapter reads `self` off this frame)
    form = mod.eager_form(CaptureContext([frame], graph, 0))
    mod._context.pop()
    check = GraphCheck(Adapted(form), GraphVerdict(source="adapter"), Sample(first=10**9))
    replay = type(graph).replay

    def timed(fn) -> list[float]:
        got = []
        for i in range(n):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            fn(i)
            torch.cuda.synchronize()
            got.append((time.perf_counter() - t0) * 1e6)
        return got

    with torch.no_grad():
        for _ in range(20):
            replay(graph)
            engine.model(engine.ids[:4])
        rows = {"plain": [], "checked": [], "eager": []}
        for _ in range(3):  # interleaved blocks
            rows["plain"] += timed(lambda i: replay(graph))
            rows["checked"] += timed(lambda i: check.replay(graph, replay, i + 1))
            rows["eager"] += timed(lambda i: engine.model(engine.ids[:4]))
    us = {k: statistics.median(v) for k, v in rows.items()}
    assert check.verdict.status == "agrees", check.verdict.line()
    return {
        "program_wall_s": walls,
        "replay_us_median": us,
        "replay_us_p20_p80": {k: statistics.quantiles(v, n=5)[0:4:3] for k, v in rows.items()},
        "checked_replays_compared": check.verdict.compared_count,
    }


PARTS = {
    "spec": part_spec,
    "engine": part_engine,
    "hf": part_hf,
    "window": part_window,
    "cost": part_cost,
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--parts", nargs="+", default=list(PARTS), choices=list(PARTS))
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    summary: dict = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__}
    try:
        import triton

        summary["triton"] = triton.__version__
    except ImportError:
        pass
    for part in args.parts:
        t0 = time.perf_counter()
        try:
            summary[part] = PARTS[part](out)
        except Exception as e:  # the other parts still run; the summary says what failed
            summary[part] = {"error": f"{type(e).__name__}: {e}"}
        summary[f"{part}_s"] = time.perf_counter() - t0
        (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
        print(part, json.dumps(summary[part], default=str)[:3000], flush=True)


if __name__ == "__main__":
    main()
