"""graph-harness record on a GPU (issue 40): the graphs programs nobody here keyed capture,
each checked against an independent walk of the driver's graph (tests/independent.py),
and what the recorder costs.

    python benchmarks/bench_record.py --out DIR [--parts hf llama engine overhead]

- hf: Hugging Face `generate(..., cache_implementation="static")` of the HF example's
  model (random weights from a config), recorded in process with module scopes: the
  graphs, each one's nodes against the independent walk (by kind and by kernel), its
  replays against the decode steps, nodes by module.
- llama: the llama example compiled with mode="reduce-overhead" at three batch sizes,
  counted by recording (capture_and_count) beside the same model compiled in the default
  mode and captured by graph-harness: nodes, graphs per step, the walk's counts.
- engine: examples/tiny_engine.py recorded as a program (`run_program`, its key
  adapter), whole and piecewise: graphs, never replayed, replays against its own account.
- overhead: a replay's host time with the recorder's wrapper and without (interleaved
  rounds), a capture's time with and without (a 200-kernel graph), the recorder's own
  time per capture, and the engine program's wall time alone and recorded.

Writes DIR/summary.json and DIR/*.csv, and prints a summary.
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
sys.path.insert(0, str(REPO))

from graph_harness.capture import capture_and_count, module_scopes, record_graphs  # noqa: E402
from graph_harness.capture.record.process import RecordOptions  # noqa: E402
from graph_harness.capture.record.program import run_program  # noqa: E402
from tests.independent import export_counts, independent_counts  # noqa: E402


def example(name: str):
    path = REPO / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_bench_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def checked(rec, seen) -> list[dict]:
    """Each graph of a recording against the independent walk of the same capture."""
    rows = []
    names = rec.names()
    assert len(rec.graphs) == len(seen), (len(rec.graphs), len(seen))
    for g, name, (kinds, kernels) in zip(rec.graphs, names, seen):
        mine = export_counts(g.export) if g.export is not None else (None, None)
        rows.append(
            dict(
                name=name,
                key_source=g.key_source,
                nodes=g.nodes,
                walk_nodes=sum(kinds.values()),
                equal_by_kind=mine[0] == kinds,
                equal_by_kernel=mine[1] == kernels,
                replays=g.replays,
                pool_mib=None if g.pool_reserved is None else g.pool_reserved / 2**20,
                record_ms=g.record_s * 1e3,
                capture_ms=g.capture_s * 1e3,
            )
        )
    return rows


def part_hf(out: Path, new_tokens: int = 16) -> dict:
    hf = example("hf_decode")
    cfg, _ = hf.config_of("small")
    torch.manual_seed(0)
    model = hf.LlamaForCausalLM(cfg).to("cuda", torch.bfloat16).eval()
    model.generation_config.pad_token_id = 0
    prompt = torch.randint(1, cfg.vocab_size, (1, 8), device="cuda")
    from graph_harness.capture.record import compiled_scopes

    with record_graphs(module_scopes=True, children=False) as rec, independent_counts() as seen:
        tokens = model.generate(
            prompt,
            attention_mask=torch.ones_like(prompt),
            max_new_tokens=new_tokens,
            min_new_tokens=new_tokens,
            do_sample=False,
            cache_implementation="static",
        )
        # the provenance the recorder collected (diagnosis; from Inductor's import on)
        log = compiled_scopes.PROVENANCE[0]
    new = tokens.shape[1] - prompt.shape[1]
    rows = checked(rec, seen)
    exports = [g.export for g in rec.graphs if g.export is not None and g.nodes]
    depth = max((e.options.get("block_depth") or 0 for e in exports), default=0) or None
    mods = rec.by_module(depth)
    mods.to_csv(out / "hf-modules.csv", index=False)
    how = sorted({e.options.get("compiled_attribution") for e in exports} - {None})
    return dict(
        graphs=rows,
        new_tokens=new,
        decode_steps=new - 1,
        replays_total=sum(r["replays"] for r in rows),
        modules=mods.head(12).to_dict("records"),
        compiled_attribution=how,
        provenance_graphs=None if log is None else len(log.graphs),
        provenance_unavailable=None if log is None else log.unavailable,
        options=[g.export.options for g in rec.graphs if g.export is not None],
    )


def part_llama(out: Path, batches=(1, 4, 16)) -> list[dict]:
    ex = example("llama_decode")
    rows = []
    for b in batches:
        step = ex.make_step(compiled="reduce-overhead", batch=b)
        with independent_counts() as seen, module_scopes(step.module):
            e = capture_and_count(step)
        graphs = e.options["graphs"]
        walk = sum((k for k, _ in seen[-graphs:]), start=type(seen[0][0])())
        plain = ex.make_step(compiled=True, batch=b)
        ours = capture_and_count(plain)
        per_layer = (
            e.frame()["scope_path"].map(lambda p: p[1] if len(p) > 1 else None).value_counts()
        )
        rows.append(
            dict(
                batch=b,
                nodes=e.total,
                graphs_per_step=graphs,
                captures_seen=len(seen),
                walk_nodes=sum(walk.values()),
                equal_by_kind=export_counts(e)[0] == walk,
                default_mode_nodes=ours.total,
                per_layer=sorted(set(per_layer[per_layer.index.str.startswith("layers.")])),
                attribution=e.options.get("compiled_attribution"),
            )
        )
        del step, plain
        torch.cuda.empty_cache()
    return rows


def part_engine(out: Path) -> list[dict]:
    rows = []
    for piecewise in (False, True):
        stats = out / f"engine-{'piecewise' if piecewise else 'whole'}.json"
        prog = [str(REPO / "examples" / "tiny_engine.py"), "--steps", "64", "--stats", str(stats)]
        prog += ["--piecewise"] * piecewise
        key = f"{REPO / 'examples' / 'tiny_engine.py'}:record_key"
        with open(out / "engine.log", "a") as log:
            rec = run_program(prog, RecordOptions(key=key), stdout=log.fileno())
        own = json.loads(stats.read_text())
        agree = all(
            g.replays == own["replays_per_size"][g.key.split()[0].removeprefix("bs=")]
            for g in rec.graphs
        )
        rows.append(
            dict(
                piecewise=piecewise,
                graphs=len(rec.graphs),
                engine_graphs=own["graphs"],
                nodes=rec.total,
                never_replayed=len(rec.never_replayed()),
                replays_agree=agree,
                one_pool=len({g.pool for g in rec.graphs}) == 1,
                exit_code=rec.exit_code,
            )
        )
    return rows


def _replay_loop(g, n: int) -> float:
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        g.replay()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / n * 1e6


def part_overhead(out: Path, rounds: int = 7, n: int = 20000) -> dict:
    x = torch.randn(1024, device="cuda")
    for _ in range(3):
        x.add_(1)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        x.add_(1)
    g.replay()
    cls = torch.cuda.CUDAGraph
    # replay: the same graph object, the wrapper on (its record attached) and off
    with record_graphs(children=False) as rec:
        h = torch.cuda.CUDAGraph()
        with torch.cuda.graph(h):
            x.add_(1)
    wrapped = cls.replay
    plain = wrapped.__wrapped__
    on, off = [], []
    for _ in range(rounds):  # interleaved: each round both, order alternating
        for which in ("on", "off") if _ % 2 == 0 else ("off", "on"):
            cls.replay = wrapped if which == "on" else plain
            (on if which == "on" else off).append(_replay_loop(h, n))
    cls.replay = wrapped

    # capture: a 200-kernel graph, with the recorder listening and without
    def capture_once() -> float:
        gg = torch.cuda.CUDAGraph()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.cuda.graph(gg):
            for _ in range(200):
                x.mul_(1.0001)
        return (time.perf_counter() - t0) * 1e3

    cap_on, cap_off, record_ms = [], [], []
    for i in range(rounds):
        for which in ("on", "off") if i % 2 == 0 else ("off", "on"):
            if which == "on":
                with record_graphs(children=False) as r2:
                    cap_on.append(capture_once())
                record_ms.append(r2.graphs[0].record_s * 1e3)
            else:
                cap_off.append(capture_once())
    # the engine program, alone and recorded (wall time, start-up included)
    engine = str(REPO / "examples" / "tiny_engine.py")
    prog = [sys.executable, engine, "--piecewise", "--steps", "256"]
    alone, recorded = [], []
    for i in range(3):
        for which in ("alone", "recorded") if i % 2 == 0 else ("recorded", "alone"):
            t0 = time.perf_counter()
            if which == "alone":
                subprocess.run(prog, check=True, capture_output=True)
                alone.append(time.perf_counter() - t0)
            else:
                subprocess.run(
                    [sys.executable, "-m", "graph_harness", "record", "--", *prog],
                    check=True,
                    capture_output=True,
                )
                recorded.append(time.perf_counter() - t0)
    med = statistics.median
    return dict(
        replay_us_on=sorted(on),
        replay_us_off=sorted(off),
        replay_overhead_us=med(on) - med(off),
        capture_ms_on=sorted(cap_on),
        capture_ms_off=sorted(cap_off),
        capture_overhead_ms=med(cap_on) - med(cap_off),
        record_ms_per_capture=sorted(record_ms),
        engine_alone_s=sorted(alone),
        engine_recorded_s=sorted(recorded),
        rounds=rounds,
        replays_per_round=n,
        recorded_graphs=len(rec.graphs),
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--parts", nargs="+", default=["hf", "llama", "engine", "overhead"])
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    env = dict(
        gpu=torch.cuda.get_device_name(),
        torch=torch.__version__,
        triton=__import__("triton").__version__,
        date=time.strftime("%Y-%m-%d"),
    )
    summary = {"env": env}
    for part in args.parts:
        t0 = time.perf_counter()
        try:
            summary[part] = globals()[f"part_{part}"](args.out)
        except Exception as e:  # one part's failure must not hide the others' figures
            summary[part] = {"error": f"{type(e).__name__}: {e}"}
        summary[f"{part}_s"] = time.perf_counter() - t0
        (args.out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
        print(f"== {part} ({summary[f'{part}_s']:.0f} s)")
        print(json.dumps(summary[part], indent=1, default=str)[:4000])


if __name__ == "__main__":
    main()
