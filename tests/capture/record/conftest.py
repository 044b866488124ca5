"""The `recorder` fixture: the recorder's wrappers on a stand-in graph class
(tests/capture/record/standin.py), the driver's side stood in, and a listener."""

from __future__ import annotations

import types

import pytest
import torch

from graph_harness.capture.graph import memory, reader
from graph_harness.capture.graph.reader import RawNode
from graph_harness.capture.record import capturing, hooks, settings
from tests.capture.record.standin import Graph, Sink


@pytest.fixture
def recorder(monkeypatch):
    """The wrappers on the stand-in class, the driver's side stood in, a listener."""
    monkeypatch.setattr(torch.cuda, "CUDAGraph", Graph)
    stream = types.SimpleNamespace(device=types.SimpleNamespace(index=0), cuda_stream=7)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda *a: stream)
    node = RawNode(handle=1, kind="kernel", kernel="k", grid=(1, 1, 1), block=(32, 1, 1))
    monkeypatch.setattr(reader, "read_capturing", lambda s: [node])
    monkeypatch.setattr(reader, "capture_frontier", lambda s: [])
    mem = memory.PoolMemory(reserved=2 << 20, allocated=1 << 20, segments=1)
    monkeypatch.setattr(memory, "pool_memory", lambda pool: mem)
    monkeypatch.setattr(capturing, "environment_of", lambda device: {"device": "stand-in"})
    saved = settings.configure(adapters=[], module_scopes=False)
    sink = Sink()
    hooks.listen(sink)
    yield sink
    hooks.unlisten(sink)
    settings.restore(saved)
