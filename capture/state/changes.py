"""What changed between two fingerprints of a step's state (capture/state/fingerprint.py), exactly:
tensors compared bit for bit through their bytes (so -0.0 differs from 0.0 and NaNs are
told apart by payload), host values by equality.

Every comparison reads back from the device (syncs)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from graph_harness.capture.state.fingerprint import Fingerprint, Seen

SHOWN = 3  # names a one-line summary lists before "and N more"


@dataclass(frozen=True)
class Change:
    """One watched value that differs. `detail` says how, in words; `max_diff` is the
    largest absolute difference of a floating-point tensor held whole (None otherwise:
    hashed, integer, host, or replaced)."""

    name: str
    detail: str
    output: bool = False
    host: bool = False
    replaced: bool = False
    max_diff: float | None = None

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "detail": self.detail,
            "output": self.output,
            "host": self.host,
            "replaced": self.replaced,
            "max_diff": self.max_diff,
        }


def _rows(t: torch.Tensor) -> torch.Tensor:
    """[numel, itemsize] uint8: each element's bytes."""
    n = max(1, t.numel())
    return t.contiguous().reshape(-1).view(torch.uint8).reshape(n, t.element_size())


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two tensors of one shape and dtype hold the same bits (-0.0 is not 0.0,
    NaNs are told apart by payload); syncs."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return a.numel() == 0 or torch.equal(_rows(a), _rows(b))


def _index(flat: int, shape: tuple[int, ...]) -> list[int]:
    out = []
    for size in reversed(shape):
        flat, r = divmod(flat, max(size, 1))
        out.append(r)
    return list(reversed(out))


def _value(t: torch.Tensor, flat: int) -> str:
    v = t.reshape(-1)[flat].item()
    return f"{v:.6g}" if isinstance(v, float) else repr(v)


def elementwise(a: torch.Tensor, b: torch.Tensor) -> tuple[str, float | None]:
    """How two tensors of one shape and dtype differ: the count of differing elements,
    the first (index and both values) and, for floating point, the largest difference."""
    bad = (_rows(a) != _rows(b)).any(dim=1)
    n = int(bad.sum())
    first = int(bad.nonzero()[0, 0])
    where = _index(first, tuple(a.shape))
    text = (
        f"{n} of {a.numel()} elements differ (first at {where}: "
        f"{_value(a, first)} then {_value(b, first)})"
    )
    big = None
    if a.is_floating_point() or a.is_complex():
        d = (a.detach().to(torch.complex128 if a.is_complex() else torch.float64) - b).abs()
        d = d.reshape(-1)[bad]
        finite = d[torch.isfinite(d)]
        if finite.numel():
            big = float(finite.max())
            text += f", largest difference {big:.3g}"
        if finite.numel() < d.numel():
            text += f", {d.numel() - finite.numel()} with NaN or infinity"
    return text, big


def _differs(a: Seen, b: Seen) -> Change | None:
    if a.host or b.host:
        if a.meta == b.meta and a.value == b.value:
            return None
        return Change(a.name, f"{a.value!r} then {b.value!r}", a.output, host=True)
    # Addresses are not compared here: a fresh output lands wherever the allocator puts
    # it, and a tensor rebound to an equal one holds the same state (replaced_by says so).
    if a.meta[1:] != b.meta[1:]:
        pa, pb = a.meta, b.meta
        return Change(
            a.name,
            f"replaced by a tensor of another shape or type ({_shape(pa)} then {_shape(pb)})",
            a.output,
            replaced=True,
        )
    if a.hashed:
        bad = (a.value != b.value).any(dim=1)
        n = int(bad.sum())
        if not n:
            return None
        return Change(
            a.name, f"differs ({n} of {bad.numel()} pieces, compared by exact digest)", a.output
        )
    if a.value.numel() == 0 or torch.equal(_rows(a.value), _rows(b.value)):
        return None
    text, big = elementwise(a.value, b.value)
    return Change(a.name, text, a.output, max_diff=big)


def _shape(meta: tuple) -> str:
    return f"{list(meta[1])} {str(meta[3]).removeprefix('torch.')}"


def disagreement(a: Fingerprint, b: Fingerprint) -> dict[str, Change]:
    """The tensors two eager runs from one state disagree on after one call, by name (the
    spread every check judges a replay's differences by)."""
    return {c.name: c for c in compare(a, b) if not c.host}


def compare(a: Fingerprint, b: Fingerprint, *, outputs: bool = True) -> list[Change]:
    """What differs from `a` to `b`, in `a`'s order (then what only `b` holds)."""
    out = []
    for name, sa in a.seen.items():
        if sa.output and not outputs:
            continue
        sb = b.seen.get(name)
        if sb is None:
            out.append(Change(name, "no longer reachable from the step", sa.output))
        elif (c := _differs(sa, sb)) is not None:
            out.append(c)
    for name, sb in b.seen.items():
        if name not in a.seen and (outputs or not sb.output):
            out.append(Change(name, "newly reachable from the step", sb.output))
    return out


def replaced_by(a: Fingerprint, b: Fingerprint) -> list[str]:
    """State tensors held under the same name at another address in `b` than in `a`:
    rebound to new tensors (a graph keeps reading the ones its capture saw)."""
    return [
        n
        for n, sa in a.seen.items()
        if not sa.host
        and not sa.output
        and n in b.seen
        and not b.seen[n].host
        and b.seen[n].meta[0] != sa.meta[0]
    ]


def names(changes: list[Change], shown: int = SHOWN) -> str:
    """The first `shown` names, "and N more"."""
    listed = [c.name + (" (a host value)" if c.host else "") for c in changes[:shown]]
    more = len(changes) - shown
    return ", ".join(listed) + (f" and {more} more" if more > 0 else "")
