"""Graphs and executables played on the CPU, for the checks of a shared pool's graphs
(test_interleaved.py, test_updated.py): a stand-in graph's capture runs the step once from
its start and keeps what it returned as the static output; a replay runs the step and
writes that output. A stand-in driver (capture/check/updated.py Driver) shares one such
"executable" across sizes, optionally refusing updates or planting a defect."""

from __future__ import annotations

from graph_harness.capture.check.size_runs import SizeGraph
from graph_harness.capture.check.updated import Driver
from graph_harness.capture.graph.attributes import Attribute, GraphLaunches, KernelLaunch
from graph_harness.capture.graph.shared_exec import Update


class StandIn:
    """A graph on the CPU (module docstring). `writes=False`: a graph that never writes
    its output; `launches`: its kernel nodes as the driver would read them."""

    def __init__(self, step, *, batch: int = 0, writes: bool = True, launches=None) -> None:
        self.step, self.writes, self.batch = step, writes, batch
        self.launches = launches or launches_of(batch)
        _start(step)
        self.output = step().clone()
        _start(step)

    def replay(self) -> None:
        out = self.step()
        if self.writes:
            self.output.copy_(out)


def _start(step) -> None:
    """Its reset (where it has one), then its feed of call 0."""
    for hook, args in (("reset", ()), ("feed", (0,))):
        if hasattr(step, hook):
            getattr(step, hook)(*args)


def sizes(factory, batches=(4, 2, 1), launches=None, **kw) -> list[SizeGraph]:
    """Each size built and "captured" largest first, as a sweep's shared pool holds them;
    `launches(batch)`: its kernel launches (default: one kernel, `launches_of`)."""
    out = []
    for b in sorted(batches, reverse=True):
        step = factory(b)
        g = StandIn(step, batch=b, launches=launches(b) if launches else None, **kw)
        out.append(SizeGraph(batch=b, step=step, graph=g, output=g.output))
    return out


def launches_of(batch: int, *, function: int = 0x100, kernel: str = "k", **attributes):
    """One kernel node (node 0) of `function`, its Priority 0 unless given (an Attribute)."""
    attrs = {"Priority": Attribute(raw=b"\0", shown="0"), **attributes}
    return GraphLaunches(("kernel",), [KernelLaunch(0, kernel, function, attrs)], (1000 + batch,))


class StandInShared:
    """One executable across the stand-in graphs: it replays the graph it was last made
    from or updated to. `refuse`: (from, to) batch pairs the "driver" refuses; `keeps`:
    an update that reports success but keeps something of its origin, which adds 1 to
    every output it writes after an update (the defect the check must find)."""

    def __init__(self, graph, *, refuse=(), keeps=False) -> None:
        self.refuse, self.keeps = set(refuse), keeps
        self.origin = self.current = graph
        self.instantiated = 1

    def update(self, graph) -> Update:
        if (self.current.batch, graph.batch) in self.refuse:
            return Update("ErrorTopologyChanged", 1000 + graph.batch, 2000)
        self.current = graph
        return Update("success", None, 1000)

    def reinstantiate(self, graph) -> None:
        self.origin = self.current = graph
        self.instantiated += 1

    def replay(self) -> None:
        self.current.replay()
        if self.keeps and self.current is not self.origin:
            self.current.output.add_(1)

    def close(self) -> None:
        pass


def standin_driver(*, refuse=(), keeps=False) -> Driver:
    return Driver(
        shared=lambda graph: StandInShared(graph, refuse=refuse, keeps=keeps),
        own=lambda graph: graph,
        launches=lambda graph: graph.launches,
        recapture=lambda size: None,
        attributes=("Priority",),
    )
