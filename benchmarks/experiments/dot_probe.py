"""Real `cudaGraphDebugDotPrint` dumps for issue 41's DOT reader: one graph of every node
kind graph-harness counts, dumped under each debug flag alone and all together, beside the
counts an independent walk of the same graph gives (tests/independent.py). The reader is
written and tested against these files, not against a guess at the format.

    python benchmarks/experiments/dot_probe.py --out DIR     (needs a GPU and cuda-bindings)

Writes DIR/<graph>-<flags>.dot, DIR/counts.json ({graph: {"kinds": ..., "kernels": ...}})
and DIR/flags.json (each flag of the bindings' cudaGraphDebugDotFlags: name and value).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.independent import walk  # noqa: E402


def check(result):
    err, *rest = result if isinstance(result, tuple) else (result,)
    if int(err) != 0:
        raise RuntimeError(f"CUDA error {err}")
    return rest[0] if len(rest) == 1 else rest


def captured(fn) -> torch.cuda.CUDAGraph:
    """`fn` warmed up on a side stream, then captured into a kept graph."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph(keep_graph=True)
    with torch.cuda.graph(g):
        fn()
    return g


def graphs() -> dict[str, int]:
    """Name -> raw cudaGraph_t of each probe graph (kept alive in KEEP)."""
    import triton
    import triton.language as tl
    from cuda.bindings import runtime as rt

    @triton.jit
    def grid3(x_ptr):
        i = tl.program_id(0) + 2 * tl.program_id(1) + 6 * tl.program_id(2)
        tl.store(x_ptr + i, tl.load(x_ptr + i) + 1.0)

    x = torch.randn(1024, device="cuda")
    y = torch.empty_like(x)
    a = torch.randn(64, 64, device="cuda")
    pinned = torch.randn(1024, pin_memory=True)
    back = torch.empty(1024, pin_memory=True)
    ev = torch.cuda.Event(external=True)

    def kernels():  # 1D elementwise, a cuBLAS GEMM, a Triton kernel on a 3D grid
        x.add_(1.0)
        torch.mm(a, a)
        grid3[(2, 3, 4)](x)

    def copies():  # DtoD, HtoD from pinned, DtoH to pinned, a memset
        y.copy_(x)
        x.copy_(pinned, non_blocking=True)
        back.copy_(y, non_blocking=True)
        stream = torch.cuda.current_stream().cuda_stream
        check(rt.cudaMemsetAsync(y.data_ptr(), 0, y.numel() * 4, stream))

    def events():  # an external event recorded and waited on
        x.mul_(2.0)
        ev.record()
        torch.cuda.current_stream().wait_event(ev)
        x.add_(3.0)

    def allocs():  # stream-ordered allocation: a mem-alloc and a mem-free node
        stream = torch.cuda.current_stream().cuda_stream
        p = check(rt.cudaMallocAsync(4096, stream))
        check(rt.cudaMemsetAsync(p, 7, 4096, stream))
        check(rt.cudaFreeAsync(p, stream))

    out = {}
    for name, fn in (
        ("kernels", kernels),
        ("copies", copies),
        ("events", events),
        ("allocs", allocs),
    ):
        try:  # one device run: a graph that fails is said, the others go on
            g = captured(fn)
        except Exception as e:
            print(f"{name}: not captured: {type(e).__name__}: {e}")
            continue
        KEEP.append(g)
        out[name] = int(g.raw_cuda_graph())
    if "kernels" not in out:
        return out
    # built by hand: the kernels graph as a child twice (a child launched twice runs
    # twice), an empty node joining them, and a kernel-less parent around them
    try:
        parent = check(rt.cudaGraphCreate(0))
        child = rt.cudaGraph_t(out["kernels"])
        c1 = check(rt.cudaGraphAddChildGraphNode(parent, None, 0, child))
        c2 = check(rt.cudaGraphAddChildGraphNode(parent, None, 0, child))
        check(rt.cudaGraphAddEmptyNode(parent, [c1, c2], 2))
        KEEP.append(parent)
        out["children"] = int(parent)
    except Exception as e:
        print(f"children: not built: {type(e).__name__}: {e}")
    try:  # a conditional (if) node whose body holds one empty node
        g = check(rt.cudaGraphCreate(0))
        h = check(rt.cudaGraphConditionalHandleCreate(g, 1, 1))
        params = rt.cudaGraphNodeParams()
        params.type = rt.cudaGraphNodeType.cudaGraphNodeTypeConditional
        params.conditional.handle = h
        params.conditional.type = rt.cudaGraphConditionalNodeType.cudaGraphCondTypeIf
        params.conditional.size = 1
        # cudaGraphAddNode(graph, dependencies, edge data, count, params): CUDA 12.3's form
        check(rt.cudaGraphAddNode(g, None, None, 0, params))
        body = params.conditional.phGraph_out[0]
        check(rt.cudaGraphAddEmptyNode(body, None, 0))
        KEEP.append(g)
        out["conditional"] = int(g)
    except Exception as e:
        print(f"conditional: not built: {type(e).__name__}: {e}")
    return out


KEEP: list = []


def main() -> int:
    from cuda.bindings import runtime as rt

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    flags = {f.name: int(f.value) for f in rt.cudaGraphDebugDotFlags}
    (args.out / "flags.json").write_text(json.dumps(flags, indent=1) + "\n")
    everything = 0
    for v in flags.values():
        everything |= v
    counts = {}
    for name, raw in graphs().items():
        try:
            kinds, kernels = walk(raw)
            counts[name] = {"kinds": dict(kinds), "kernels": dict(kernels)}
        except Exception as e:
            counts[name] = {"error": f"{type(e).__name__}: {e}"}
        # written after each graph: a later failure keeps what was read
        (args.out / "counts.json").write_text(json.dumps(counts, indent=1) + "\n")
        for fname, value in [("none", 0), *flags.items(), ("all", everything)]:
            path = args.out / f"{name}-{fname}.dot"
            try:
                err = rt.cudaGraphDebugDotPrint(rt.cudaGraph_t(raw), str(path).encode(), value)
            except Exception as e:
                err = f"{type(e).__name__}: {e}"
            err = err[0] if isinstance(err, tuple) else err
            print(f"{name} {fname}: {err} {path.stat().st_size if path.exists() else '-'} B")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
