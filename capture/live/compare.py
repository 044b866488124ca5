"""Eager against replay, tensor by tensor: two eager runs from one state (A and B) measure
the code's own non-determinism; the replay (C) must agree with A bit for bit wherever A and
B agree bit for bit, and within SLACK times their spread where floating-point A and B
differ (check's rule: capture/check/judge.py). Integer tensors that differ between A and
B cannot be judged: not verified, never passed."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from graph_harness.capture.state.changes import elementwise, same_bits

SLACK = 4.0  # as check's: a nondeterministic tensor may differ by this many times its spread


@dataclass
class Comparison:
    differ: list[tuple[str, str, float | None]] = field(default_factory=list)
    nondeterministic: list[str] = field(default_factory=list)
    undecided: list[str] = field(default_factory=list)


def spread(a: torch.Tensor, b: torch.Tensor) -> float | None:
    """How far two eager runs' tensors differ: 0.0 bit for bit; the largest absolute
    difference for floating point; None where that cannot be judged (integers, shapes)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return None
    if same_bits(a, b):
        return 0.0
    if not (a.is_floating_point() or a.is_complex()):
        return None
    d = (a.double() - b.double()).abs() if not a.is_complex() else (a - b).abs()
    finite = torch.isfinite(d)
    if not bool(finite.all()):
        return None  # NaN or infinity in one run only: no spread to judge by
    return float(d.max())


def compare(
    a: dict[str, torch.Tensor], spreads: dict[str, float | None], c: dict[str, torch.Tensor]
) -> Comparison:
    """The replay's tensors `c` against eager run A's `a`, given A-B `spreads`."""
    out = Comparison()
    for name, ta in a.items():
        tc = c.get(name)
        if tc is None:
            out.differ.append((name, "the graph has no such tensor after its replay", None))
            continue
        if ta.shape != tc.shape or ta.dtype != tc.dtype:
            what = f"{list(ta.shape)} {ta.dtype} eagerly, {list(tc.shape)} {tc.dtype} replayed"
            out.differ.append((name, f"another shape or type: {what}", None))
            continue
        s = spreads.get(name, 0.0)
        if s is None:
            if not same_bits(ta, tc):
                out.undecided.append(name)
            continue
        if same_bits(ta, tc):
            if s:
                out.nondeterministic.append(name)
            continue
        text, big = elementwise(ta, tc)
        if s == 0.0:
            out.differ.append((name, text, big))
        elif big is not None and big <= SLACK * s:
            out.nondeterministic.append(name)
        else:
            out.differ.append(
                (name, f"{text}, over {SLACK:g}x the eager runs' spread {s:.3g}", big)
            )
    for name in c:
        if name not in a and name.startswith("output"):
            out.differ.append((name, "an output of the graph the eager form does not return", None))
    return out
