"""A stand-in for torch.cuda.CUDAGraph, for the recorder's wrappers on the CPU
(capture/record/hooks.py): its methods logged, one made to fail where asked, and a
listener that keeps what it is told. The `recorder` fixture (conftest.py) installs the
wrappers on it."""

from __future__ import annotations


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
