"""The plain values scopes are named by: `ScopeKey` (a scope's stage and step, and its
label), `UNSCOPED` (the label outside every scope) and `EVERY_LEVEL` (an export's
module_depth when no depth cut its module scopes). No torch: an export is read, checked
and rendered without it (`graph-harness record`'s own process never imports torch)."""

from __future__ import annotations

from dataclasses import dataclass

from graph_harness.capture.text import printable

UNSCOPED = "unscoped"
EVERY_LEVEL = "every level"  # an export's module_depth when no depth cut the scopes


@dataclass(frozen=True)
class ScopeKey:
    stage: int | None
    step: str

    def __post_init__(self) -> None:
        # a name is text from here on: exports, frames and streams all take it
        object.__setattr__(self, "step", printable(self.step))

    @property
    def label(self) -> str:
        return self.step if self.stage is None else f"stage{self.stage}/{self.step}"
