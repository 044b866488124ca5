"""What `graph-harness record` adds to a program's wall time (issue 59): the program alone,
under `record`, `record --module-scopes` and `record --module-scopes --out DIR --json`,
for one process and for several, each run a fresh process tree, the variants interleaved.

    python benchmarks/bench_record_startup.py [--repeats 5] [--processes 3] [--repo DIR]
        [--variants record "record --no-read-names" ...] [--json FILE]

The program is examples/tiny_engine.py (`--sizes` 1 to 8: eight graphs in one pool, as
engines capture; replays served for `--steps`); with several processes, a parent that
imports no torch spawns that many engines (multiprocessing's spawn), each recorded. Without
CUDA the engines run eagerly and capture nothing: the figures are then the recorder's
start-up alone. Prints one JSON document: each variant's wall seconds (median, min, max,
every run), what each adds to the program alone (the median of the differences within a
round), what one more process adds, and, from the --out runs' recording.json, the
recorder's own seconds per graph (`record_s`, summed over its processes). `--repo DIR`
measures another checkout (PYTHONPATH=DIR), for a before and after. `--variants` picks the
recorded variants (`record --no-read-names` among them, not by default); `--json FILE` is
written after each program, so a deadline keeps what ran.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SIZES = [str(s) for s in range(1, 9)]
VARIANTS = {
    "alone": None,
    "record": [],
    "record --module-scopes": ["--module-scopes"],
    "record --module-scopes --out --json": ["--module-scopes", "--out", "{out}", "--json"],
    "record --no-read-names": ["--no-read-names"],
}
DEFAULT = [v for v in VARIANTS if v != "record --no-read-names"]
# a parent that imports no torch, starting `n` engines that each do (spawn: fresh Pythons)
PARENT = """import multiprocessing as mp, runpy, sys

def engine(argv):
    sys.argv = argv
    try:
        runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as e:
        assert not e.code, e.code

if __name__ == "__main__":
    n, argv = int(sys.argv[1]), sys.argv[2:]
    procs = [mp.get_context("spawn").Process(target=engine, args=(argv,)) for _ in range(n)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]
"""


def _command(variant: str, program: list[str], out: Path) -> list[str]:
    flags = VARIANTS[variant]
    if flags is None:
        return [sys.executable, *program]
    flags = [f.replace("{out}", str(out)) for f in flags]
    return [sys.executable, "-m", "graph_harness", "record", *flags, "--", *program]


def _run(cmd: list[str], env: dict, cwd: Path) -> float:
    t0 = time.perf_counter()
    r = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {r.returncode}:\n{r.stderr.decode()[-2000:]}")
    return wall


def _recorder_s(out: Path) -> dict | None:
    """The recorder's own time in the --out run's captures, from its recording.json."""
    doc_path = out / "recording.json"
    if not doc_path.is_file():
        return None
    doc = json.loads(doc_path.read_text())
    own = [g["record_s"] for g in doc["graphs"]]
    return {
        "graphs": len(own),
        "processes": len(doc["processes"]),
        "record_s_total": sum(own),
        # the mean is what a ladder pays; the median leaves out the collector's full passes
        "record_s_per_graph_mean": sum(own) / len(own) if own else None,
        "record_s_per_graph_median": statistics.median(own) if own else None,
    }


def scenario(program: list[str], env: dict, repeats: int, work: Path, names: list[str]) -> dict:
    """The variants `names` ("alone" first) of one program, `repeats` rounds after a warm-up
    round, interleaved (each round starts at the next variant: none always runs first)."""
    runs: dict[str, list[float]] = {n: [] for n in names}
    recorder = []
    for r in range(-1, repeats):  # round -1: the warm-up, not counted
        order = names[r % len(names) :] + names[: r % len(names)] if r >= 0 else names
        for name in order:
            out = work / f"out-{r}"
            wall = _run(_command(name, program, out), env, work)
            if r >= 0:
                runs[name].append(wall)
                got = _recorder_s(out)
                if got is not None:
                    recorder.append(got)
            shutil.rmtree(out, ignore_errors=True)
    alone = runs["alone"]
    return {
        "program": program,
        "variants": {
            n: {"median_s": statistics.median(t), "min_s": min(t), "max_s": max(t), "runs": t}
            for n, t in runs.items()
        },
        # the median of each round's difference: rounds run back to back, so a drift of the
        # machine's speed moves both sides of a difference alike
        "added_s": {n: statistics.median(a - b for a, b in zip(runs[n], alone)) for n in names[1:]},
        "recorder": _median_recorder(recorder),
    }


def _median_recorder(runs: list[dict]) -> dict | None:
    """The --out runs' recorder figures: the graphs and processes of the first, the
    median over runs of the seconds."""
    if not runs:
        return None
    out = dict(runs[0])
    for key in ("record_s_total", "record_s_per_graph_mean", "record_s_per_graph_median"):
        values = [r[key] for r in runs if r.get(key) is not None]
        out[key] = statistics.median(values) if values else None
    return out


def _machine(env: dict) -> dict:
    probe = (
        "import json, torch; c = torch.cuda.is_available(); print(json.dumps({'torch': "
        "torch.__version__, 'device': torch.cuda.get_device_name() if c else 'cpu'}))"
    )
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)
    info = json.loads(out.stdout) if out.returncode == 0 else {"torch": None, "device": None}
    return {**info, "python": platform.python_version(), "cpus": os.cpu_count()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--processes", type=int, default=3, help="engines of the second program")
    ap.add_argument("--steps", type=int, default=64, help="each engine's served steps")
    ap.add_argument("--repo", type=Path, default=REPO, help="the checkout to measure")
    ap.add_argument("--variants", nargs="+", choices=list(VARIANTS)[1:], default=DEFAULT[1:],
                    help="the recorded variants, beside the program alone")  # fmt: skip
    ap.add_argument("--json", type=Path, help="also write the document here, after each program")
    args = ap.parse_args()
    names = ["alone", *dict.fromkeys(args.variants)]  # each once: one list of runs each
    if args.json is not None and not args.json.parent.is_dir():
        raise SystemExit(f"--json {args.json}: its folder does not exist")
    repo = args.repo.resolve()
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env["PYTHONPATH"] = str(repo)
    engine = [str(REPO / "examples" / "tiny_engine.py"), "--sizes", *SIZES]
    engine += ["--steps", str(args.steps)]
    work = Path(tempfile.mkdtemp(prefix="bench-record-startup-"))
    try:
        (work / "parent.py").write_text(PARENT)
        several = [str(work / "parent.py"), str(args.processes), *engine]
        doc = {"checkout": str(repo), "machine": _machine(env), "repeats": args.repeats}
        doc["one_process"] = scenario(engine, env, args.repeats, work, names)
        _keep(doc, args.json)  # what ran survives a deadline
        doc[f"{args.processes}_processes"] = many = scenario(
            several, env, args.repeats, work, names
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    one, n = doc["one_process"], args.processes
    # what one more recorded process adds: one engine alone, then n under a parent that
    # imports no torch (the parent's own start-up is not in the difference)
    doc["per_process_s"] = {
        v: (many["added_s"][v] - one["added_s"][v]) / max(n - 1, 1) for v in one["added_s"]
    }
    _keep(doc, args.json)
    print(json.dumps(doc, indent=1))


def _keep(doc: dict, path: Path | None) -> None:
    """`doc` written to `path` whole (a temporary file, then renamed), where given."""
    if path is not None:
        part = path.with_name(path.name + ".part")
        part.write_text(json.dumps(doc, indent=1) + "\n")
        part.replace(path)


if __name__ == "__main__":
    main()
