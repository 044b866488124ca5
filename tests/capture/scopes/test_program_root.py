"""Which model a recorded capture names its modules in (capture/scopes/program.py) when no
module is running around it: an engine that captures its model piece by piece, calling
blocks from its own methods (examples/tiny_engine.py's `--piecewise`), names them in the
model it holds, not in the first block called. On the CPU, with the scope recorder alone."""

from __future__ import annotations

import sys

from torch import nn

from graph_harness.capture.scopes.program import CaptureModules, held_models
from graph_harness.capture.scopes.recorder import Recorder


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(8, 4)
        self.layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(2))


class Engine:  # not a module: it holds one, and the draft it does not run here
    def __init__(self) -> None:
        self.draft = nn.Linear(4, 4)
        self.model = Model()

    def frames(self) -> list:
        frames, f = [], sys._getframe()
        while f is not None:  # innermost first, as the recorder collects them
            frames.append(f)
            f = f.f_back
        return frames

    def piece(self) -> CaptureModules:
        return CaptureModules(Recorder(frontier=lambda: None), self.frames())


def test_an_engines_piece_is_named_in_the_model_it_holds():
    e = Engine()
    mods = e.piece()
    assert mods.root is None  # nothing running around the capture
    mods._pre(e.model.layers[1])  # the first module called inside it
    assert mods.broken is None and mods.root is e.model
    assert mods.names[e.model.layers[1]] == "layers.1"
    assert [k.step for k in mods.recorder.stack] == ["layers", "layers.1"]
    mods._post(e.model.layers[1])
    assert mods.recorder.stack == []


def test_without_a_model_that_holds_it_the_first_module_is_the_root():
    e = Engine()
    mods = e.piece()
    lone = nn.Linear(4, 4)
    mods._pre(lone)
    assert mods.root is lone and mods.recorder.stack == []  # its own work: no scope


def test_held_models_reads_only_a_methods_self():
    e = Engine()
    assert held_models([sys._getframe()]) == []  # a test function: no self
    got = held_models(e.frames())
    assert len(got) == 2 and got[0] is e.draft and got[1] is e.model
    # a module's own method: running_modules' business, its attributes not read here
    assert held_models([_module_frame(e.model)]) == []


def _module_frame(m: nn.Module):
    class Wrap(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = m

        def frame(self):
            return sys._getframe()

    return Wrap().frame()
