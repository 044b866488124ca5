"""Aliasing guard: refuse an output whose bytes overlap an input's or another output's.

Buffers carved from one GraphBufferPool chunk share a storage, so comparing storages
would reject every pool-backed call. The guard compares byte ranges instead: exact
for contiguous tensors, the strided bounding box otherwise (never a false "disjoint").

Tensors on the meta device have no memory: their data pointers are storage offsets
counted from 0, so any two would seem to overlap. They never overlap: nothing can be
overwritten where nothing is stored (and no kernel runs on them).
"""

from __future__ import annotations

import torch


def byte_range(t: torch.Tensor) -> tuple[int, int]:
    """Half-open byte range `[lo, hi)` the tensor can touch; `(p, p)` when it is empty."""
    p = t.data_ptr()
    n = t.numel()
    if n == 0:
        return p, p
    item = t.element_size()
    if t.is_contiguous():
        return p, p + n * item
    lo = hi = 0  # in elements, relative to data_ptr
    for size, stride in zip(t.shape, t.stride()):
        span = (size - 1) * stride
        if span < 0:
            lo += span
        else:
            hi += span
    return p + lo * item, p + (hi + 1) * item


def overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
    """True when `a` and `b` sit on one device and their byte ranges intersect; never
    for meta tensors (no addresses)."""
    if a.device != b.device or a.device.type == "meta" or a.numel() == 0 or b.numel() == 0:
        return False
    a_lo, a_hi = byte_range(a)
    b_lo, b_hi = byte_range(b)
    return a_lo < b_hi and b_lo < a_hi


def check_no_alias(outputs: dict[str, torch.Tensor], inputs: dict[str, torch.Tensor]) -> None:
    """Raise ValueError naming both tensors and ranges if an output overlaps an input or
    another output. `None` entries are ignored. Skipped under torch.compile tracing,
    where data pointers cannot be read."""
    if _is_compiling():
        return
    outs = [(k, v) for k, v in outputs.items() if v is not None]
    ins = [(k, v) for k, v in inputs.items() if v is not None]
    for i, (oname, o) in enumerate(outs):
        for iname, t in ins + outs[i + 1 :]:
            if overlaps(o, t):
                o_lo, o_hi = byte_range(o)
                t_lo, t_hi = byte_range(t)
                raise ValueError(
                    f"output {oname!r} bytes [{o_lo:#x}, {o_hi:#x}) overlap {iname!r} bytes "
                    f"[{t_lo:#x}, {t_hi:#x}) on {o.device}; give {oname!r} its own buffer "
                    "(e.g. a separate GraphBufferPool.carve)"
                )


def _is_compiling() -> bool:
    compiler = getattr(torch, "compiler", None)
    return bool(compiler is not None and compiler.is_compiling())
