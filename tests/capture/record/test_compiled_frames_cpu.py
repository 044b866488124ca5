"""Which kept provenance a recording offers a capture (capture/record/process.py): the
graphs compiled from the forward of a module of the capture's model, its root included.
The frame Dynamo compiled is found by another route, Dynamo's own cache (the one code
among the model's methods and nn.Module's call methods that holds an entry), on the CPU
with the eager backend (no Inductor needed to know the frame)."""

from __future__ import annotations

import types

import pytest
import torch
from torch import nn
from torch._dynamo.eval_frame import _debug_get_cache_entry_list

from graph_harness.capture.record.compiled_scopes import forwards, model_of
from graph_harness.capture.scopes.program import names_of


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x):
        return self.proj(x).relu()


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList([Block(), Block()])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x * 2

    def generate(self, x):  # HF's shape: the root's own method calls the compiled model
        return self._compiled(x)


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def compiled_frames() -> set:
    """The codes Dynamo holds cache entries for, among every candidate frame."""
    candidates = {
        f.__code__
        for cls in (Model, Block, nn.Module, nn.ModuleList)
        for f in vars(cls).values()
        if isinstance(f, types.FunctionType)
    }
    return {c for c in candidates if _debug_get_cache_entry_list(c)}


@pytest.mark.parametrize("how", ["torch.compile(model)", "model.generate"])
def test_the_frame_dynamo_compiled_is_offered_root_included(how):
    model = Model()
    compiled = torch.compile(model, backend="eager", fullgraph=True)
    if how == "torch.compile(model)":
        root = compiled  # the wrapper is the outermost module on the stack
        compiled(torch.randn(2, 8))
    else:
        model._compiled = compiled
        root = model  # generate() is a method of the model itself
        model.generate(torch.randn(2, 8))
    frames = compiled_frames()
    assert frames == {Model.forward.__code__}, frames  # the other route found the one frame
    names = names_of(root)
    assert model not in names  # the root's scope is the enclosing one: it has no name
    modules = types.SimpleNamespace(names=names, root=root)
    assert frames <= forwards(model_of(modules))
    # the names alone (the root left out) miss it: the case this guards
    assert not frames <= forwards(list(names))


def test_module_scopes_own_object_names_its_model_by_module():
    from graph_harness.capture.scopes.modules import module_scopes

    model = Model()
    scopes = module_scopes(model)  # not entered: only its names are read
    assert Model.forward.__code__ in forwards(model_of(scopes))
