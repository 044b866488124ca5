"""The graph's outputs filled with a pattern before every call of every run: an output the
graph never writes then holds the pattern after its replay, where the eager call left
its result, and check fails it (else a static output the warm-up wrote reads as a match).

Each returned tensor is filled with OUTPUT_POISON in every byte, by its own strides,
before the call's inputs are fed, in all four runs alike. Not filled, and named in `left`
with why: boolean outputs, and integer outputs that are also the step's state. In full:
docs/steps-and-check.md, "capture/check/outputs.py".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from graph_harness.capture.state.fingerprint import reachable

OUTPUT_POISON = 0x3C  # finite in every float type (bf16 ~0.0115, fp16 ~1.06, fp32 ~0.0115)


@dataclass
class OutputPoison:
    """The outputs filled before each call (`filled`, by name) and those left (`left`:
    name -> why)."""

    tensors: list[torch.Tensor] = field(default_factory=list)
    filled: list[str] = field(default_factory=list)
    left: dict[str, str] = field(default_factory=dict)
    _values: dict[torch.dtype, torch.Tensor] = field(default_factory=dict)

    def fill(self) -> None:
        """Every filled output to the pattern, queued on the current stream."""
        with torch.no_grad():
            for t in self.tensors:
                t.fill_(self._value(t))

    def _value(self, t: torch.Tensor) -> torch.Tensor:
        v = self._values.get(t.dtype)
        if v is None:
            raw = torch.full((t.element_size(),), OUTPUT_POISON, dtype=torch.uint8, device=t.device)
            v = self._values[t.dtype] = raw.view(t.dtype).reshape(())
        return v

    def to_dict(self) -> dict:
        return {"pattern": OUTPUT_POISON, "filled": self.filled, "left": self.left}


def _span(t: torch.Tensor) -> tuple[int, int]:
    """The bytes `t` can touch: [first, last) over its strides."""
    if t.numel() == 0:
        return (t.data_ptr(), t.data_ptr())
    last = sum((n - 1) * s for n, s in zip(t.shape, t.stride()) if n > 0)
    return (t.data_ptr(), t.data_ptr() + (last + 1) * t.element_size())


def outputs_to_poison(step: Callable[[], object], output: object) -> OutputPoison:
    """Which of the graph's outputs (`output`, what its capture returned) are filled
    before each call, and which are left (module docstring)."""
    out = OutputPoison()
    found, _ = reachable(step, output)
    state = [_span(v) for _, v, is_output in found if not is_output and isinstance(v, torch.Tensor)]
    seen: set[tuple[int, int]] = set()
    for name, v, is_output in found:
        if not is_output or not isinstance(v, torch.Tensor) or not v.numel():
            continue
        span = _span(v)
        if span in seen:
            continue
        seen.add(span)
        if v.dtype == torch.bool:
            out.left[name] = "a boolean tensor: no byte pattern is a valid bool"
            continue
        is_state = any(a < span[1] and span[0] < b for a, b in state)
        if is_state and not (v.is_floating_point() or v.is_complex()):
            out.left[name] = (
                "an integer tensor that is also the step's state: the step may read it as "
                "an index, which the pattern would send out of range"
            )
            continue
        out.tensors.append(v)
        out.filled.append(name)
    return out
