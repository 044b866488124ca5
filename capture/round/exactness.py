"""Whether every variant of the round computes what the shipped round computes, bit for bit:
the seed's bit-exactness matrix, measured by the run instead of quoted. Each variant's
counted round is run once more from the same inputs, its output buffers first filled with
random bits of its own (a buffer never written cannot agree by accident), and compared
with the shipped round's through integer views: one `Cell` per variant and kind of output,
summed over the stages (docs/builtin-round.md, "The bit-exactness matrix, measured")."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch

from graph_harness.capture.round.count import CountedRound

REFERENCE = "shipped"
KINDS = ("slot", "physical", "counts")  # the suffixes of DecodeRound.outputs()' keys


@dataclass(frozen=True)
class Cell:
    variant: str
    kind: str  # one of KINDS
    words: int  # 32-bit words compared (8-bit where a dtype has no 4-byte multiple)
    differing: int  # of them, how many differ from the shipped round's

    @property
    def exact(self) -> bool:
        return self.differing == 0


def _words(t: torch.Tensor) -> torch.Tensor:
    """The tensor's bytes as int32 words (or bytes), on the CPU."""
    flat = t.detach().contiguous().reshape(-1)
    word = torch.int32 if flat.element_size() % 4 == 0 else torch.uint8
    return flat.view(word).cpu()


def _scramble_(t: torch.Tensor, gen: torch.Generator) -> None:
    """Random bits over the whole buffer, never all-zero words."""
    words = t.view(-1).view(torch.int32) if t.element_size() % 4 == 0 else None
    if words is None:
        t.view(-1).view(torch.uint8).copy_(
            torch.randint(1, 256, (t.numel() * t.element_size(),), generator=gen, dtype=torch.uint8)
        )
        return
    bits = torch.randint(-(2**31), 2**31 - 1, (words.numel(),), generator=gen, dtype=torch.int32)
    bits[bits == 0] = 0x5A5A5A5A
    words.copy_(bits.to(t.device))


def outputs_after_a_run(counted: CountedRound, seed: int) -> dict[str, torch.Tensor]:
    """The round's outputs (CPU copies) after one more run from scrambled outputs."""
    rnd, gen = counted.round, torch.Generator().manual_seed(seed)
    for t in rnd.outputs().values():
        _scramble_(t, gen)
    if counted.captured is not None:
        counted.captured.graph.replay()
        torch.cuda.synchronize(rnd.device)
    else:
        rnd.run()
    return {k: _words(v) for k, v in rnd.outputs().items()}


def exactness(counted: Mapping[str, CountedRound]) -> list[Cell]:
    """One Cell per variant other than the shipped one and kind of output; [] without a
    shipped round to compare with."""
    if REFERENCE not in counted:
        return []
    names = list(counted)
    outs = {v: outputs_after_a_run(counted[v], seed=1000 + i) for i, v in enumerate(names)}
    ref = outs[REFERENCE]
    cells = []
    for v in names:
        if v == REFERENCE:
            continue
        for kind in KINDS:
            keys = [k for k in ref if k.endswith(f".{kind}")]
            words = sum(ref[k].numel() for k in keys)
            differing = sum(
                int((outs[v][k] != ref[k]).sum())
                if outs[v][k].shape == ref[k].shape
                else ref[k].numel()
                for k in keys
            )
            cells.append(Cell(v, kind, words, differing))
    return cells
