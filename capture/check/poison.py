"""Free memory filled with a pattern: a graph that reads memory freed after its capture
(a tensor it captured, since dropped) then computes from the pattern, and two replays
with two patterns disagree. Used by check (capture/check/step.py) around its replays.

The default pool's free blocks (torch.cuda.memory_snapshot()) are occupied by uint8
tensors on each block's stream, filled, and released afterwards; nothing is freed to the
driver (torch.cuda.empty_cache is never called). How blocks are taken:
docs/steps-and-check.md, "capture/check/poison.py".
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from graph_harness.capture.replay.guard import sync

SMALL_REQUEST = 1 << 20  # the allocator's small pool serves requests up to 1 MiB


@dataclass
class Poisoned:
    pattern: int
    free_bytes: int = 0  # free in the default pool when the filling began
    filled_bytes: int = 0  # taken and filled with `pattern`
    left_free: int = 0  # still free once filled (blocks the allocator would not hand out)
    skipped_streams: int = 0  # free blocks on streams that no longer answer

    def to_dict(self) -> dict:
        return {
            "pattern": self.pattern,
            "free_bytes": self.free_bytes,
            "filled_bytes": self.filled_bytes,
            "left_free": self.left_free,
            "skipped_streams": self.skipped_streams,
        }


def free_blocks(device: int) -> list[tuple[int, str, int]]:
    """(stream, segment type, size) of the default pool's free blocks on `device`."""
    out = []
    for seg in torch.cuda.memory_snapshot():
        if seg.get("device") != device or tuple(seg.get("segment_pool_id", (0, 0))) != (0, 0):
            continue
        for b in seg.get("blocks", ()):
            if b.get("state") == "inactive":
                out.append((int(seg.get("stream", 0)), seg.get("segment_type", "large"), b["size"]))
    return sorted(out, key=lambda x: -x[2])


def _stream(handle: int) -> torch.cuda.Stream:
    if handle == 0:
        return torch.cuda.default_stream()
    s = torch.cuda.ExternalStream(handle)
    s.query()  # a stream that no longer exists raises here, before any work is queued on it
    return s


@contextlib.contextmanager
def poisoned(pattern: int) -> Iterator[Poisoned]:
    """While open, the default pool's free memory holds `pattern` in every byte."""
    device = torch.cuda.current_device()
    info = Poisoned(pattern)
    held: list[torch.Tensor] = []
    try:
        blocks = free_blocks(device)
        info.free_bytes = sum(size for _, _, size in blocks)
        streams: dict[int, object] = {}
        for handle, kind, size in blocks:
            if handle not in streams:
                try:
                    streams[handle] = _stream(handle)
                except RuntimeError:
                    streams[handle] = None
            if streams[handle] is None:
                info.skipped_streams += 1
                continue
            parts = [size] if kind == "large" else _small_parts(size)
            with torch.cuda.stream(streams[handle]):
                for n in parts:
                    t = torch.empty(n, dtype=torch.uint8, device=f"cuda:{device}")
                    t.fill_(pattern)
                    held.append(t)
        sync()
        info.filled_bytes = sum(t.numel() for t in held)
        info.left_free = sum(size for _, _, size in free_blocks(device))
        yield info
        sync()  # nothing may still read the filled memory when it is handed back
    finally:
        held.clear()  # back to the allocator's free lists; no CUDA call


def _small_parts(size: int) -> list[int]:
    whole, rest = divmod(size, SMALL_REQUEST)
    return [SMALL_REQUEST] * whole + ([rest] if rest else [])
