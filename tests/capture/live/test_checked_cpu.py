"""record --check's logic on the CPU: a checked replay against a stand-in for a graph (a
Python function that does what a right, or a wrong, replay would), through the same
GraphCheck the recorder's replay hook calls. What a CUDA graph adds (its replay, device
assertions, Inductor's tree) is tested on the GPU (test_live_gpu.py)."""

from __future__ import annotations

import math

import pytest
import torch

from graph_harness.capture.errors import UsageError
from graph_harness.capture.export.documents import ExportError, Fields
from graph_harness.capture.live.checked import Checker, GraphCheck
from graph_harness.capture.live.compare import compare, spread
from graph_harness.capture.live.forms import Adapted, EagerForm, builtin_form
from graph_harness.capture.live.sample import Sample
from graph_harness.capture.record.verdict import GraphVerdict


class Engine:
    """A decode step with a cache and a host position, as an engine holds it: the eager
    form writes the new row at the host's `pos`; a 'frozen' replay writes it at the
    position its capture saw (the TensorRT-LLM bug), a right one at `pos`."""

    def __init__(self, frozen: bool = False, random: bool = False, raises_at: int = 0):
        g = torch.Generator().manual_seed(0)
        self.cache = torch.randn(16, 8, generator=g)  # [positions, dim]
        self.x = torch.randn(8, generator=g)  # the static input buffer
        self.out = torch.empty(8)  # the graph's static output
        self.pos, self.captured_pos = 3, 3
        self.frozen, self.random, self.raises_at = frozen, random, raises_at
        self.eager_calls = self.replays = 0

    def forward(self, x, pos):
        self.eager_calls += 1
        if self.raises_at and self.eager_calls >= self.raises_at:
            raise ValueError("the engine's own error")
        row = torch.tanh(x * 2 + 1)
        if self.random:
            row = row + torch.rand(8)
        self.cache[pos] = row
        return self.cache[: pos + 1].sum(0)

    def replay_graph(self, _graph=None):
        """What the graph does at a replay: the same work, into its static output."""
        self.replays += 1
        pos = self.captured_pos if self.frozen else self.pos
        self.cache[pos] = torch.tanh(self.x * 2 + 1)
        self.out.copy_(self.cache[: pos + 1].sum(0))

    def form(self, into_out: bool = False) -> EagerForm:
        """The adapter's form; `into_out`: the eager call writes the graph's own static
        output and returns it (the docs' example does), as engines' eager paths often do."""

        def fn():
            got = self.forward(self.x, self.pos)
            return self.out.copy_(got) if into_out else got

        return EagerForm(fn=fn, state={"cache": self.cache}, outputs=lambda: (self.out,))

    def serve(self, check: GraphCheck, steps: int) -> list[torch.Tensor]:
        """The program's loop: new input, replay (checked when due), read, advance."""
        seen = []
        for n in range(1, steps + 1):
            self.x.copy_(torch.full((8,), 0.1 * n))
            if n >= check.next:
                check.replay(None, self.replay_graph, n)
            else:
                self.replay_graph()
            seen.append(self.out.clone())
            self.pos += 1
        return seen


def _check(engine: Engine, sample: str = "8,2", into_out: bool = False) -> GraphCheck:
    verdict = GraphVerdict(source="adapter")
    return GraphCheck(Adapted(engine.form(into_out)), verdict, Sample.parse(sample))


def _unchecked(steps: int, **kw) -> tuple[list[torch.Tensor], torch.Tensor]:
    e = Engine(**kw)
    seen = []
    for n in range(1, steps + 1):
        e.x.copy_(torch.full((8,), 0.1 * n))
        e.replay_graph()
        seen.append(e.out.clone())
        e.pos += 1
    return seen, e.cache


def test_a_right_graph_agrees_and_the_program_sees_only_its_replays():
    e = Engine()
    check = _check(e)
    seen = e.serve(check, 12)
    v = check.verdict
    assert v.status == "agrees", v.line()
    assert v.compared == [1, 2, 3, 4, 5, 6, 7, 8] and v.compared_count == 8  # 16 is next
    assert check.next == 16
    assert e.replays == 12, "the program's replay runs once per call, checked or not"
    assert e.eager_calls == 16, "two eager runs per checked replay"
    # what the program computed and holds is what it would have without the check
    alone, cache = _unchecked(12)
    assert all(torch.equal(a, b) for a, b in zip(seen, alone))
    assert torch.equal(e.cache, cache)


def test_a_replay_with_a_frozen_host_position_differs_at_the_first_replay_it_matters():
    e = Engine(frozen=True)
    e.pos = e.captured_pos = 3
    check = _check(e)
    seen = e.serve(check, 6)
    v = check.verdict
    # replay 1 writes at position 3, as the eager form does; replay 2 writes 3 again
    assert v.status == "differs" and v.first.replay == 2, v.line()
    assert {d.tensor for d in v.differences} == {"cache", "output[0]"}, v.differences
    # rows 3 (rewritten by the replay) and 4 (written eagerly) differ, all 8 elements each
    detail = next(d.detail for d in v.differences if d.tensor == "cache")
    assert detail.startswith("16 of 128 elements differ (first at [3, 0]"), detail
    assert check.next == math.inf, "checking stops at the first difference"
    # and the program computed what it computes without the check: the wrong graph's values
    alone, cache = _unchecked(6, frozen=True)
    assert all(torch.equal(a, b) for a, b in zip(seen, alone))
    assert torch.equal(e.cache, cache)


def test_eager_code_that_draws_random_numbers_is_not_checked_never_judged():
    e = Engine(random=True)
    check = _check(e)
    torch.manual_seed(5)
    e.serve(check, 3)
    v = check.verdict
    assert v.status == "not checked" and "random numbers" in v.reason, v.line()
    # the generator was put back: the program's own draws are its own
    torch.manual_seed(5)
    state = torch.get_rng_state()
    e2 = Engine(random=True)
    check2 = _check(e2)
    check2.next = math.inf  # never checked
    torch.manual_seed(5)
    e2.serve(check2, 1)
    assert torch.equal(torch.get_rng_state(), state)


def test_an_eager_form_that_raises_leaves_the_state_as_the_replay_leaves_it():
    e = Engine(raises_at=2)  # the second eager run (B) of replay 1 raises
    check = _check(e)
    seen = e.serve(check, 3)
    v = check.verdict
    assert v.status == "not checked" and "ValueError: the engine's own error" in v.reason
    alone, cache = _unchecked(3)
    assert all(torch.equal(a, b) for a, b in zip(seen, alone))
    assert torch.equal(e.cache, cache)


def test_sample_every_replay_up_to_first_then_geometric():
    s = Sample.parse("8,2")
    due, n = [], s.due()
    while n < 200:
        due.append(n)
        n = s.next_after(n)
    assert due == [1, 2, 3, 4, 5, 6, 7, 8, 16, 32, 64, 128]
    s = Sample.parse("0,1.5")
    assert [s.next_after(n) for n in (1, 2, 10)] == [2, 3, 15]
    for bad in ("x", "8,1", "-1", "8,nan", "8,inf", ""):
        with pytest.raises(UsageError, match="FIRST"):
            Sample.parse(bad)


def test_compare_exact_where_eager_repeats_within_spread_where_it_does_not():
    a = {"out": torch.tensor([1.0, 2.0, 3.0]), "ids": torch.tensor([1, 2])}
    same = {k: v.clone() for k, v in a.items()}
    assert not compare(a, {"out": 0.0, "ids": 0.0}, same).differ
    off = dict(same, out=torch.tensor([1.0, 2.0, 3.0 + 1e-6]))
    got = compare(a, {"out": 0.0, "ids": 0.0}, off)
    assert [d[0] for d in got.differ] == ["out"]  # the eager runs agreed bit for bit
    # measured spread 1e-3: a replay 2e-3 away passes, 1e-2 away does not
    b = {"out": torch.tensor([1.0, 2.0, 3.001]), "ids": torch.tensor([1, 2])}
    spreads = {k: spread(a[k], b[k]) for k in a}
    assert spreads["ids"] == 0.0 and spreads["out"] == pytest.approx(1e-3, rel=1e-3)
    near = dict(same, out=torch.tensor([1.0, 2.0, 3.002]))
    assert compare(a, spreads, near).nondeterministic == ["out"]
    far = dict(same, out=torch.tensor([1.0, 2.0, 3.01]))
    assert [d[0] for d in compare(a, spreads, far).differ] == ["out"]
    # integers two eager runs disagree on cannot be judged
    c = {"ids": torch.tensor([1, 3])}
    assert spread(a["ids"], c["ids"]) is None
    assert compare({"ids": a["ids"]}, {"ids": None}, c).undecided == ["ids"]


def test_verdict_round_trips_and_refuses_a_bad_field():
    e = Engine(frozen=True)
    check = _check(e)
    e.serve(check, 3)
    doc = check.verdict.to_dict()
    back = GraphVerdict.from_dict(doc, Fields("t"), "check")
    assert back.to_dict() == doc and back.line() == check.verdict.line()
    with pytest.raises(ExportError, match="check.status"):
        GraphVerdict.from_dict({**doc, "status": "fine"}, Fields("t"), "check")
    with pytest.raises(ExportError, match="unknown key"):
        GraphVerdict.from_dict({**doc, "extra": 1}, Fields("t"), "check")


def test_forms_found_and_not_found():
    # no known frame and no adapter: not checked, with how to give one
    why = builtin_form([], object())
    assert isinstance(why, str) and "--eager MODULE:FUNCTION" in why
    e = Engine()
    calls = []

    def adapter(ctx):
        calls.append(ctx.index)
        return e.form() if ctx.index == 0 else None

    def broken(ctx):
        raise KeyError("bs")

    checker = Checker(Sample(), [("mine", adapter)])
    assert isinstance(checker.find([], object(), 0), Adapted)
    assert isinstance(checker.find([], object(), 1), str)  # None: the built-in rules
    assert calls == [0, 1]
    why = Checker(Sample(), [("mine", broken)]).find([], object(), 0)
    assert why == "eager adapter mine raised KeyError: 'bs'"
    why = Checker(Sample(), [("mine", lambda ctx: 3)]).find([], object(), 0)
    assert "returned int, not an EagerForm" in why


def test_the_recorders_replay_hook_checks_only_the_replays_due():
    # The wrapper hooks.py puts on CUDAGraph.replay, called with a stand-in graph (the
    # class itself needs CUDA): a recorded graph's replays counted, the due ones checked.
    from graph_harness.capture.record import hooks
    from graph_harness.capture.record.graphs import GraphRecord
    from graph_harness.capture.record.sites import CaptureSite

    e = Engine()

    class Graph:  # what the wrapper reads: the record in the object's __dict__
        pass

    g = Graph()
    record = GraphRecord(index=0, pid=1, rank=None, key="k", key_source="order",
                         site=CaptureSite(user=None, library=None))  # fmt: skip
    record.live = GraphCheck(Adapted(e.form()), GraphVerdict(source="adapter"), Sample.parse("2,2"))
    record.check = record.live.verdict
    g.__dict__[hooks._RECORD] = record
    replay = hooks._replay(lambda self: e.replay_graph())
    for n in range(1, 10):
        e.x.copy_(torch.full((8,), 0.1 * n))
        replay(g)
        e.pos += 1
    assert record.replays == 9 and e.replays == 9
    assert record.check.compared == [1, 2, 4, 8] and record.check.status == "agrees"
    assert e.eager_calls == 8  # two per checked replay


def test_an_eager_form_that_writes_the_graphs_own_output_is_still_judged():
    # its output is the static buffer the replay then overwrites: kept as a copy, else
    # the frozen replay would be compared with itself
    e = Engine(frozen=True)
    check = _check(e, into_out=True)
    e.serve(check, 4)
    assert check.verdict.status == "differs" and check.verdict.first.replay == 2


def test_an_eager_form_that_replays_the_graph_itself_is_no_eager_form():
    e = Engine()
    check = _check(e)

    def replaying():  # a module whose forward is now the graphed one (make_graphed_callables)
        check.replay(None, e.replay_graph, 99)
        return e.out

    check.form.form.fn = replaying
    e.serve(check, 2)
    v = check.verdict
    assert v.status == "not checked" and "replays the graph itself" in v.reason, v.line()


def test_a_graph_with_nothing_to_compare_by_design_is_skipped_not_doubted():
    from graph_harness.capture.live.forms import Skipped
    from graph_harness.capture.record.graphs import GraphRecord
    from graph_harness.capture.record.sites import CaptureSite

    record = GraphRecord(index=0, pid=1, rank=None, key="k", key_source="order",
                         site=CaptureSite(user=None, library=None))  # fmt: skip
    assert Checker(Sample(), []).attach(Skipped("a backward graph"), record) is None
    assert record.check.status == "skipped" and record.check.reason == "a backward graph"
    assert Checker(Sample(), []).attach("no eager form", record) is None
    assert record.check.status == "not checked"
