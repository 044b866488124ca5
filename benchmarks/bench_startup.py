"""Start-up: how long `graph-harness --version`, `--help` and each subcommand's `--help`
take, and what `import graph_harness.capture` (for `scope`) and the parser import.

    python3 benchmarks/bench_startup.py [--repeats 10] [--repo DIR]

Prints, per invocation, the median and fastest wall time over the repeats (each a fresh
process, CUDA_VISIBLE_DEVICES="" as on a CPU machine), and `python -X importtime`'s
figures: the cumulative import time of each heavy library (torch, triton, pandas,
matplotlib, rich) that the import or the parser loaded, or "not loaded", with all the
imports' time and the part of it beyond torch's (what graph-harness adds to a model that
imports torch anyway). `--repo DIR`
measures another checkout (a source tree, run as `python -m graph_harness` with
PYTHONPATH=DIR) instead of this one, for a before/after.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HEAVY = ("torch", "triton", "pandas", "matplotlib", "rich")
SUBCOMMANDS = ("count", "delta", "replay", "advise", "profile", "check", "report")
IMPORT_SCOPE = "import graph_harness.capture; from graph_harness.capture import scope"


class Runs:
    """Fresh processes of one checkout, each started in an empty folder: `python -m`
    puts the current folder first on sys.path, where it would stand in for the checkout."""

    def __init__(self, repo: Path) -> None:
        self.env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
        self.env["CUDA_VISIBLE_DEVICES"] = ""
        self.env["PYTHONPATH"] = str(repo)
        self.cwd = tempfile.mkdtemp(prefix="bench-startup-")

    def run(self, args: list[str], **kw) -> subprocess.CompletedProcess:
        return subprocess.run(args, env=self.env, cwd=self.cwd, text=True, **kw)


def _wall(runs: Runs, cmd: list[str], repeats: int) -> tuple[float, float]:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        runs.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), min(times)


def _import_times(runs: Runs, args: list[str]) -> dict[str, int]:
    """Cumulative microseconds of each heavy top-level module `python -X importtime`
    saw imported (first import only, as the interpreter reports it)."""
    cmd = [sys.executable, "-X", "importtime", *args]
    err = runs.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE).stderr
    seen: dict[str, int] = {"all": 0}
    for line in err.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = line.split("|")
        if not cumulative.strip().isdigit():  # the header
            continue
        if not name.startswith("  "):  # a top-level import: its cumulative time is its own
            seen["all"] += int(cumulative)
        name = name.strip()
        if name in HEAVY and name not in seen:
            seen[name] = int(cumulative)
    return seen


def _heavy(seen: dict[str, int]) -> str:
    heavy = ", ".join(
        f"{m} {seen[m] / 1e6:.3f} s" if m in seen else f"{m} not loaded" for m in HEAVY
    )
    beyond = seen["all"] - seen.get("torch", 0)
    return f"all {seen['all'] / 1e6:.3f} s, {beyond / 1e6:.3f} s beyond torch; {heavy}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--repo", type=Path, default=Path(__file__).resolve().parents[1])
    args = ap.parse_args()
    repo = args.repo.resolve()
    runs = Runs(repo)
    cli = [sys.executable, "-m", "graph_harness"]
    print(f"checkout: {repo}  python {sys.version.split()[0]}  repeats {args.repeats}")
    base, _ = _wall(runs, [sys.executable, "-c", "pass"], args.repeats)
    print(f"{'python -c pass':<32} median {base:.3f} s")
    rows = [["--version"], ["--help"], *([c, "--help"] for c in SUBCOMMANDS)]
    for extra in rows:
        med, best = _wall(runs, cli + extra, args.repeats)
        print(f"{'graph-harness ' + ' '.join(extra):<32} median {med:.3f} s  fastest {best:.3f} s")
    torch_med, _ = _wall(runs, [sys.executable, "-c", "import torch"], args.repeats)
    scope_med, _ = _wall(runs, [sys.executable, "-c", IMPORT_SCOPE], args.repeats)
    print(f"{'import torch':<32} median {torch_med:.3f} s")
    print(f"{'import capture, scope':<32} median {scope_med:.3f} s (torch's share: below)")
    print("\nimported (python -X importtime, cumulative):")
    parser = _import_times(runs, ["-m", "graph_harness", "--help"])
    print(f"  --help:                {_heavy(parser)}")
    print(f"  import capture, scope: {_heavy(_import_times(runs, ['-c', IMPORT_SCOPE]))}")


if __name__ == "__main__":
    main()
