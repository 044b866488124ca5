"""The `recorder` fixture: the recorder's wrappers on a stand-in graph class
(tests/capture/record/standin.py), the driver's side stood in, and a listener."""

from __future__ import annotations

import pytest

from graph_harness.capture.graph.reader import RawNode
from graph_harness.capture.record import hooks, settings
from tests.capture.record.standin import Sink, stand_in_driver


@pytest.fixture
def recorder(monkeypatch):
    """The wrappers on the stand-in class, the driver's side stood in, a listener."""
    node = RawNode(handle=1, kind="kernel", kernel="k", grid=(1, 1, 1), block=(32, 1, 1))
    stand_in_driver(monkeypatch.setattr, [node])
    saved = settings.configure(adapters=[], module_scopes=False)
    sink = Sink()
    hooks.listen(sink)
    yield sink
    hooks.unlisten(sink)
    settings.restore(saved)
