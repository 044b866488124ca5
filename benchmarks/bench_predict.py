"""Graph memory predicted from three sizes against the truth from capturing every size
(issue 58, item 2), on a GPU: per model, the ladder captured largest first into one
shared pool (the truth: the pool after its last size plus every executable), against

- the prediction from `--from` sizes (`sweep --predict-from`: capture/sweep/forecast.py),
  with its interval;
- vLLM's method (vllm/v1/worker/gpu_model_runner.py profile_cudagraph_memory, as
  capture/sweep/vllm_method.py implements it from that code): its two largest sizes'
  free-memory drops, the first plus the second times the other sizes;
- the two existing estimators (capture/sweep/estimate.py): linear from the smallest and
  largest size alone, and every size alone summed.

Each model is swept as `graph-harness sweep --predict-from` runs it (`sweep_step`, then
`with_forecast`), its timing cut to the least (the memory is what is measured here).

    python benchmarks/bench_predict.py --out DIR [--models llama qwen2 ...] \\
        [--ladder vllm|pow2|B,B,...] [--from 1 64 512]
    python benchmarks/bench_predict.py --refit DIR/NAME/traces.json [--from 1 64 512]

Models (examples/, built from configs, random weights): llama (examples/llama_decode.py),
hf-llama, qwen2, qwen2-moe (examples/hf_decode.py, the "small" preset); each with
`-compiled` (torch.compile, default mode); each model in a process of its own. Ladders:
`vllm`, vLLM's default capture sizes to 512 ([1, 2, 4] + every multiple of 8: 67 sizes;
the default for eager models); `pow2`, 1 to 512 in powers of two (10 sizes; the default
for compiled ones, each size a compile of its own). Writes DIR/predict.json,
DIR/predict.md and DIR/NAME/ (each sweep's files, as `sweep --out`, and traces.json:
every size's own-pool allocator requests, events `["a", bytes]` or `["f", allocation
number]`, to refit without a GPU: `--refit` predicts from it again, with no GPU); prints
the table. On the H100, an eager model of the
vLLM ladder took 30-36 s (2026-12-07, before its sampled executables were resolved); a
compiled one of the pow2 ladder about two minutes (estimate: read `seconds`).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import asdict, replace
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from graph_harness.capture.environment import environment  # noqa: E402
from graph_harness.capture.sweep.alloc_trace import Alloc, Free, Trace  # noqa: E402
from graph_harness.capture.sweep.forecast import (  # noqa: E402
    VLLM_DEFAULT,
    Forecast,
    forecast,
    ladders_for,
)
from graph_harness.capture.sweep.run import sweep_step  # noqa: E402
from graph_harness.capture.sweep.settings import SweepSettings  # noqa: E402
from graph_harness.capture.sweep.truth import SharedRow  # noqa: E402
from graph_harness.reports import plots  # noqa: E402
from tests.llama_example import load_example  # noqa: E402

POW2 = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
# (example file, factory keywords): dense Llama (ours and transformers'), dense Qwen2,
# and Qwen2-MoE (8 experts, 2 per token, a shared expert)
MODELS = {
    "llama": ("llama", {}),
    "hf-llama": ("hf", {}),
    "qwen2": ("hf", {"arch": "qwen2"}),
    "qwen2-moe": ("hf", {"arch": "qwen2_moe"}),
}
# the memory is measured here, not the time: the least timing the sweep allows
FAST = SweepSettings(trials=2, replays=1, host_launches=0, leak_replays=1)


def factory(model: str):
    """`make(batch)` for a model name (MODELS, `-compiled` for torch.compile)."""
    base, compiled = model.removesuffix("-compiled"), model.endswith("-compiled")
    file, kw = MODELS[base]
    mod = load_example(file)
    return lambda b: mod.make_step(compiled=compiled, batch=b, **kw)


def ladder_of(spec: str | None, model: str) -> tuple[int, ...]:
    if spec is None:
        spec = "pow2" if model.endswith("-compiled") else "vllm"
    if spec == "vllm":
        return tuple(VLLM_DEFAULT)
    if spec == "pow2":
        return POW2
    return tuple(sorted({int(x) for x in spec.split(",")}))


def record(model: str, ladder: tuple[int, ...], result, seconds: float) -> dict:
    """One model's figures: the truth, the prediction, vLLM's method, the estimators."""
    fc = result.forecast
    est = {r["estimator"]: r for r in result.estimate_table().to_dict("records")}
    row = dict(model=model, sizes=len(ladder), largest=max(ladder), sampled=list(fc.sampled),
               seconds=seconds, why_not=fc.why_not)  # fmt: skip
    if fc.ladders:
        lf = fc.ladders[0]  # the sizes swept: the ladder whose truth was captured
        row.update(
            true_bytes=lf.true_total, predicted=lf.last.total, lo=lf.last.total_lo,
            hi=lf.last.total_hi, error=lf.error, within=lf.within, flagged=len(lf.flagged),
            path_changes=[(c.lo, c.hi, c.held, c.share) for c in lf.path_changes],
            vllm=lf.vllm, vllm_error=lf.vllm_error, vllm_why=lf.vllm_why,
            model_miss={str(b): m for b, m in fc.model_miss.items()},
            per_size=[dict(batch=r.batch, predicted=r.total, true=r.true_total, error=r.error)
                      for r in lf.rows],
        )  # fmt: skip
    for key, name in (("linear", "linear from two sizes"), ("deltas", "sum of per-size deltas")):
        if name in est:
            row[key], row[f"{key}_error"] = est[name]["bytes"], est[name]["error"]
    return row


def write_traces(result, path: Path) -> None:
    """Every size's own-pool allocator requests and the shared rows, as read: what the
    prediction is made from, kept so that the model can be refitted without a GPU."""

    def one(t):
        if t is None:
            return None
        events = [["a", e.size] if isinstance(e, Alloc) else ["f", e.alloc] for e in t.events]
        return dict(events=events, live=sorted(t.live), reserved=t.reserved)

    data = dict(traces={str(b): one(t) for b, t in sorted(result.traces.items())},
                shared=[asdict(r) for r in result.shared], weights=result.weights,
                execs={str(r.batch): r.exec_bytes for r in result.rows},
                exec_each={str(r.batch): [r.exec_each, r.exec_each_spread]
                           for r in result.rows})  # fmt: skip
    part = path.with_suffix(".part")
    part.write_text(json.dumps(data) + "\n")
    part.replace(path)  # whole or not at all


def refit(path: Path, sampled: list[int]) -> Forecast:
    """The prediction made again from a traces.json (write_traces) and `sampled` sizes,
    with no GPU: the sizes swept and vLLM's default ladder, against the shared pool read."""
    data = json.loads(path.read_text())

    def trace(t: dict) -> Trace:
        events = tuple(Alloc(v) if k == "a" else Free(v) for k, v in t["events"])
        return Trace(events=events, live=frozenset(t["live"]), reserved=t["reserved"])

    missing = [b for b in sampled if data["traces"].get(str(b)) is None]
    if missing:
        raise SystemExit(f"{path} holds no trace of batch {missing[0]}: give --from sizes "
                         f"among {sorted(map(int, data['traces']))}")  # fmt: skip
    shared = [SharedRow(**r) for r in data["shared"]]
    ladders = ladders_for(sorted((r.batch for r in shared), reverse=True))
    each = {b: data["exec_each"][str(b)] for b in sampled}
    spread = {b: e[1] or 0 for b, e in each.items()}
    return forecast({b: trace(data["traces"][str(b)]) for b in sampled},
                    {b: e[0] for b, e in each.items()}, ladders, shared,
                    weights=data["weights"], spread=spread)  # fmt: skip


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:+.1f}%"


def mib(x: int | None) -> str:
    return "-" if x is None else f"{x / 2**20:,.1f}"


def markdown(rows: list[dict], env: dict) -> str:
    head = (
        "| model | sizes | true MiB | predicted MiB (interval) | error | vLLM's method | "
        "linear from two | sum of deltas | seconds |\n" + "|---" * 9 + "|"
    )
    lines = [f"{env.get('device', '')}, torch {torch.__version__}", "", head]
    for r in rows:
        if "true_bytes" not in r:
            why = r.get("failed") or r["why_not"]
            lines.append(f"| {r['model']} | {r['sizes']} | failed: {why} | | | | | | |")
            continue
        lines.append(
            f"| {r['model']} | {r['sizes']} (to {r['largest']}, from {r['sampled']}) | "
            f"{mib(r['true_bytes'])} | {mib(r['predicted'])} ({mib(r['lo'])}-{mib(r['hi'])}) | "
            f"{pct(r['error'])} | {pct(r['vllm_error'])} | {pct(r.get('linear_error'))} | "
            f"{pct(r.get('deltas_error'))} | {r['seconds']:.0f} |"
        )
    return "\n".join(lines) + "\n"


def one(model: str, args: argparse.Namespace) -> dict:
    """One model swept and predicted in this process: its files under DIR/MODEL, its row."""
    ladder = ladder_of(args.ladder, model)
    print(f"{model}: {len(ladder)} sizes, 1-{max(ladder)}", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    try:
        settings = replace(FAST, resolve=tuple(args.sampled))
        result = sweep_step(factory(model), ladder, settings, name=model)
        result = result.with_forecast(args.sampled)
    except Exception as e:  # the failure is the row
        traceback.print_exc()
        return dict(model=model, sizes=len(ladder), largest=max(ladder),
                    failed=f"{type(e).__name__}: {e}"[:300], why_not=None)  # fmt: skip
    seconds = time.perf_counter() - t0
    folder = args.out / model
    folder.mkdir(exist_ok=True)
    result.write(folder)
    write_traces(result, folder / "traces.json")
    plots.sweep(result, folder / "sweep.png")
    return record(model, ladder, result, seconds)


def alone(model: str, args: argparse.Namespace) -> dict:
    """`model` in a process of its own: the driver keeps the pages of every executable a
    process destroys and hands them to the next with no drop in free memory, so a second
    model in one process would read its executables as nothing. Its row comes back through
    a file in a temporary folder of this run's own."""
    with tempfile.TemporaryDirectory() as tmp:
        row_file = Path(tmp) / "row.json"
        cmd = [sys.executable, __file__, "--out", str(args.out), "--models", model,
               "--row", str(row_file), "--from", *map(str, args.sampled),
               *(["--ladder", args.ladder] if args.ladder else [])]  # fmt: skip
        rc = subprocess.run(cmd).returncode
        if rc == 0 and row_file.exists():
            return json.loads(row_file.read_text())
    return dict(model=model, sizes=None, largest=None, failed=f"its process exited {rc}",
                why_not=None)  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path)
    ap.add_argument("--models", nargs="+", default=["llama", "qwen2"],
                    choices=[*MODELS, *(f"{m}-compiled" for m in MODELS)])  # fmt: skip
    ap.add_argument("--ladder", help="vllm, pow2 or B,B,... (default: vllm eager, pow2 compiled)")
    ap.add_argument("--from", dest="sampled", type=int, nargs="+", default=[1, 64, 512])
    ap.add_argument("--row", type=Path, help=argparse.SUPPRESS)  # a child's: one model
    ap.add_argument("--refit", type=Path, help="a traces.json: predict again, no GPU needed")
    args = ap.parse_args()
    if args.refit is not None:
        print(json.dumps(refit(args.refit, args.sampled).totals_table(), indent=1))
        return
    if not torch.cuda.is_available():
        raise SystemExit("bench_predict measures graph memory: it needs a CUDA GPU")
    if args.out is None:
        ap.error("--out DIR is needed to measure (or --refit traces.json)")
    args.out.mkdir(parents=True, exist_ok=True)
    if args.row is not None:
        (model,) = args.models
        args.row.write_text(json.dumps(one(model, args)) + "\n")
        return
    env = environment(torch.device("cuda"))
    rows: list[dict] = []
    for model in args.models:  # the table after each model: a run cut short keeps its rows
        rows.append(alone(model, args))
        doc = json.dumps({"env": env, "rows": rows}, indent=1) + "\n"
        (args.out / "predict.json").write_text(doc)
        text = markdown(rows, env)
        (args.out / "predict.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
