"""Programmatic dependent launch only where it can pay: decided from the graph at capture.

While a stream is capturing, a `pdl=True` launch asks the capture which nodes it will
depend on (`cudaStreamGetCaptureInfo`) and keeps PDL only when that is exactly one node, a
launch of ours that signals its dependents (torch's kernels never signal: behind one, PDL
gains nothing and cost ~0.35 us per launch). Every other launch goes out plainly, its
kernel still signalling. Outside capture `pdl=True` is honoured as asked; without
cuda-bindings a capturing one goes out plainly. Why: docs/builtin-round.md, "Programmatic
dependent launch"."""

from __future__ import annotations

import threading

import torch

# Node handles of our signalling launches in the capture in progress, by capture id (ids
# are unique per capture, so a recycled node address in a later graph never matches).
_signalling: dict[int, set[int]] = {}
_lock = threading.Lock()


def _capture_info(stream: torch.cuda.Stream) -> tuple[int, list[int]] | None:
    """(capture id, the nodes the next captured op depends on), or None when `stream` is
    not capturing or the capture cannot be read."""
    try:
        from cuda.bindings import runtime as rt

        err, status, cid, _graph, deps, _edata, n = rt.cudaStreamGetCaptureInfo(stream.cuda_stream)
    except Exception:  # no cuda-bindings, or one whose call returns another shape
        return None
    if int(err) != 0 or status != rt.cudaStreamCaptureStatus.cudaStreamCaptureStatusActive:
        return None
    return int(cid), [int(d) for d in deps[:n]]


def launch_with_pdl(stream: torch.cuda.Stream) -> tuple[bool, int | None]:
    """For a `pdl=True` launch about to go out on `stream`: whether to set PDL on it, and
    the capture id to `record` it under afterwards (None: not capturing, PDL as asked)."""
    if not torch.cuda.is_current_stream_capturing():
        return True, None
    info = _capture_info(stream)
    if info is None:  # capturing, but the capture cannot be read: plainly
        return False, None
    cid, deps = info
    with _lock:
        mine = _signalling.get(cid, set())
        return len(deps) == 1 and deps[0] in mine, cid


def record(stream: torch.cuda.Stream, cid: int | None) -> None:
    """After a signalling launch under capture `cid`: remember its node."""
    if cid is None:
        return
    info = _capture_info(stream)
    if info is None or info[0] != cid or len(info[1]) != 1:
        return
    with _lock:
        if cid not in _signalling:
            # An older capture's nodes are never needed again. Two captures at once (two
            # threads) would clear each other's: they then lose PDL, never correctness.
            _signalling.clear()
            _signalling[cid] = set()
        _signalling[cid].add(info[1][0])
