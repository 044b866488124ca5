"""Allocator traces made by hand, shared by the prediction's tests (test_predict.py,
test_forecast.py): a decode step's requests at a batch, and a compiled MoE's paths."""

from graph_harness.capture.sweep.alloc_trace import Alloc, Free, Trace

KIB = 1 << 10
MIB = 1 << 20


def decode_trace(batch: int, workspace=lambda b: 4 * MIB) -> Trace:
    """A decode step's requests at `batch`: a workspace (constant unless told), four
    layers of activations affine in batch (some small at batch 1 and large at 64, so
    they change pools across the ladder), the logits kept live as the graph's output."""
    events = [Alloc(workspace(batch))]  # #0, kept
    n = 1
    h = None
    for _ in range(4):
        events += [Alloc(64 * KIB * batch + 256), Alloc(256 * KIB * batch)]  # h, mlp
        if h is not None:
            events.append(Free(h))
        events.append(Free(n + 1))  # mlp freed within the layer
        h, n = n, n + 2
    events += [Alloc(128 * KIB * batch + 512), Free(h)]  # logits, last h freed
    return Trace(events=tuple(events), live=frozenset({0, n}))


def moe_like(batch: int) -> Trace:
    """A compiled MoE as Inductor made it on the H100 (docs/data/gpu-2026-12-07f): a path
    at every few sizes, each a small request more or in another place. Here: batch 1
    bare; from 2 a routing scratch at the end, padded to a power of two of rows (not a
    line in batch); from 32 a 1 KiB one before it."""
    t = decode_trace(batch)
    ev, n = list(t.events), len(t.allocs)
    rows = 1 << (batch - 1).bit_length()
    for size, on in ((KIB, batch >= 32), (32 * KIB * rows, batch >= 2)):
        if on:
            ev += [Alloc(size), Free(n)]
            n += 1
    return Trace(events=tuple(ev), live=t.live)
