"""Argument checks shared by the kernels: each failure says what was expected.

Everything here runs before a kernel writes anything, so a rejected call leaves every
output buffer exactly as it was.
"""

from __future__ import annotations

import torch

from graph_harness.kernels.guard import _is_compiling
from graph_harness.kernels.launch import INT32_LIMIT

_INT_DTYPES = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)


def check_tensor(
    name: str,
    t: object,
    *,
    dtypes: tuple[torch.dtype, ...],
    ndim: int,
    device: torch.device | None = None,
) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype not in dtypes:
        want = " or ".join(str(d) for d in dtypes)
        raise TypeError(f"{name} must be {want}, got {t.dtype}")
    if t.dim() != ndim:
        raise ValueError(f"{name} must have {ndim} dims, got shape {tuple(t.shape)}")
    _check_no_lazy_bits(name, t)
    if device is not None and t.device != device:
        raise ValueError(f"{name} is on {t.device}; expected {device} like the other inputs")
    return t


def _check_no_lazy_bits(name: str, t: torch.Tensor) -> None:
    # A view such as x.conj().imag carries torch's lazy negation bit: torch ops apply it,
    # a kernel reading raw memory would not (silently negated scores or outputs). Under
    # torch.compile (which cannot trace is_neg) only torch ops run, and they apply it.
    if not _is_compiling() and (t.is_neg() or t.is_conj()):
        raise ValueError(
            f"{name} is a view with torch's lazy negation (or conjugation) bit, e.g. "
            f"x.conj().imag, which the kernels do not apply: pass {name}.resolve_neg() "
            "(for an output, a buffer without the bit)"
        )


def check_shape(name: str, t: torch.Tensor, shape: tuple[int, ...]) -> None:
    if tuple(t.shape) != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)}, got {tuple(t.shape)}")


def check_writable(name: str, t: torch.Tensor | None) -> None:
    """An output written in place, outside autograd, must be one the shipped path's
    in-place copy could also write: both paths call this first, so they refuse alike.

    - requires grad (with grad mode on): torch refuses an in-place write to a leaf that
      requires grad, and for a non-leaf the kernel would bypass the autograd graph;
    - an inference tensor outside inference mode: torch refuses in-place updates to it."""
    if t is None:
        return
    if t.requires_grad and torch.is_grad_enabled():
        raise ValueError(
            f"{name} requires grad, but the kernels write it in place outside autograd: "
            f"pass a buffer that does not require grad (e.g. {name}.detach()) or call "
            "under torch.no_grad()"
        )
    # torch.compile cannot trace is_inference(); the compiled copy itself decides there.
    if not _is_compiling() and t.is_inference() and not torch.is_inference_mode_enabled():
        raise ValueError(
            f"{name} is an inference tensor (made under torch.inference_mode()), which "
            "cannot be updated in place outside inference mode: call under "
            f"torch.inference_mode(), or pass a normal tensor (e.g. {name}.clone())"
        )


def check_width(width: object) -> int:
    if isinstance(width, bool) or not isinstance(width, int):
        raise TypeError(f"width must be a Python int, got {type(width).__name__}")
    if not 1 <= width < INT32_LIMIT:
        raise ValueError(f"width must be in [1, 2**31), got {width}")
    return width


def check_rank(rank: object, device: torch.device) -> int | torch.Tensor:
    """A Python int in [0, 2**31), or a 0-d integer tensor on `device`.

    A tensor rank is not range-checked: reading it would synchronize the device (and
    break graph capture). The kernels read it from memory at run time."""
    if isinstance(rank, torch.Tensor):
        if rank.dtype not in _INT_DTYPES:
            raise TypeError(f"rank tensor must have an integer dtype, got {rank.dtype}")
        if rank.dim() != 0:
            raise ValueError(f"rank tensor must be 0-d, got shape {tuple(rank.shape)}")
        if rank.device != device:
            raise ValueError(f"rank tensor is on {rank.device}; expected {device}")
        _check_no_lazy_bits("rank", rank)
        return rank
    if isinstance(rank, bool) or not isinstance(rank, int):
        raise TypeError(f"rank must be a Python int or a 0-d integer tensor, got {rank!r}")
    if not 0 <= rank < INT32_LIMIT:
        raise ValueError(f"rank must be in [0, 2**31), got {rank}")
    return rank


def wrap_int32(x: int) -> int:
    """Two's-complement wrap of a Python int into int32 range."""
    return (x + INT32_LIMIT) % (2 * INT32_LIMIT) - INT32_LIMIT
