"""A stand-in for torch.cuda.CUDAGraph, for the recorder's wrappers on the CPU
(capture/record/hooks.py): its methods logged, one made to fail where asked, the driver's
side stood in, and a listener that keeps what it is told. The `recorder` fixture
(conftest.py) and benchmarks/experiments/recorder_gc.py install the wrappers on it."""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any


class Graph:
    """What the wrappers wrap: torch.cuda.CUDAGraph's methods, each one logged."""

    def __init__(self, log: list, fail: str | None = None) -> None:
        self.log, self.fail = log, fail

    def _do(self, what: str) -> None:
        self.log.append(what)
        if self.fail == what:
            raise RuntimeError(f"{what} failed, as the program's would")

    def capture_begin(self, pool=None, capture_error_mode="global"):
        self._do("begin")

    def capture_end(self):
        self._do("end")

    def replay(self):
        self._do("replay")

    def reset(self):
        self._do("reset")

    def pool(self):
        return (3, 4)

    def raw_cuda_graph(self):
        raise RuntimeError("keep_graph=False")


class Sink:
    def __init__(self) -> None:
        self.records = []

    def captured(self, record):
        self.records.append(record)


def stand_in_driver(set_attr: Callable[[Any, str, Any], None], nodes: list) -> None:
    """The stand-in class in torch.cuda's place and the driver's reads stood in, through
    `set_attr(owner, name, value)` (pytest's monkeypatch.setattr, or setattr): a capture's
    stream, `nodes` as every capture's nodes, a 2 MiB pool, a named environment."""
    import torch

    from graph_harness.capture.graph import memory, reader
    from graph_harness.capture.record import capturing

    set_attr(torch.cuda, "CUDAGraph", Graph)
    stream = types.SimpleNamespace(device=types.SimpleNamespace(index=0), cuda_stream=7)
    set_attr(torch.cuda, "current_stream", lambda *a: stream)
    set_attr(reader, "read_capturing", lambda s: nodes)
    set_attr(reader, "capture_frontier", lambda s: [])
    mem = memory.PoolMemory(reserved=2 << 20, allocated=1 << 20, segments=1)
    set_attr(memory, "pool_memory", lambda pool: mem)
    set_attr(capturing, "environment_of", lambda device: {"device": "stand-in"})
