"""Real DOT dumps of the examples' decode steps, each beside a count made of the same
capture by another route (issue 41's benchmarks read them back through the DOT reader):

    python benchmarks/experiments/dot_dumps.py --out DIR --example hf_decode --compiled --how count
        graph-harness's own capture (capture_and_keep, under module_scopes): its export
        (DIR/NAME-export.json) and its kept graph dumped (DIR/NAME-none.dot, -verbose.dot)
    graph-harness record --module-scopes --out REC -- \\
        python benchmarks/experiments/dot_dumps.py --out DIR --example llama_decode --how plain
        a plain torch.cuda.graph capture of the step (what any program does), dumped; the
        recording around it is the other route

NAME is EXAMPLE-eager or EXAMPLE-compiled (-plain for --how plain). Needs a GPU and
cuda-bindings.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]


def load(example: str):
    spec = importlib.util.spec_from_file_location(example, REPO / "examples" / f"{example}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[example] = mod
    spec.loader.exec_module(mod)
    return mod


def dump(raw: int, stem: Path) -> None:
    from cuda.bindings import runtime as rt

    for name, flags in (("none", 0), ("verbose", 1)):
        path = str(f"{stem}-{name}.dot").encode()
        err = rt.cudaGraphDebugDotPrint(rt.cudaGraph_t(raw), path, flags)
        err = err[0] if isinstance(err, tuple) else err
        print(f"{stem.name} {name}: {err}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--example", choices=["hf_decode", "llama_decode"], required=True)
    ap.add_argument("--compiled", action="store_true")
    ap.add_argument("--how", choices=["count", "plain"], required=True)
    ap.add_argument("--preset", default="small")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    ex = load(args.example)
    step = ex.make_step(compiled=args.compiled, preset=args.preset)
    name = f"{args.example}-{'compiled' if args.compiled else 'eager'}"
    if args.how == "count":
        from graph_harness.capture import capture_and_keep, module_scopes

        with module_scopes(step.module):
            counted = capture_and_keep(step, warmup=2)
        counted.export.write_json(args.out / f"{name}-export.json")
        dump(int(counted.captured.graph.raw_cuda_graph()), args.out / name)
        return 0
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            step()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph(keep_graph=True)
    with torch.cuda.graph(g):
        step()
    torch.cuda.synchronize()
    dump(int(g.raw_cuda_graph()), args.out / f"{name}-plain")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
