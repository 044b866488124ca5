"""The recorder's wrappers (capture/record/hooks.py) around a stand-in graph class, on the
CPU: what the program sees (its calls in order, its exceptions unchanged) and what is
recorded whatever goes wrong in the recorder. The driver's side (reading real graphs) is
test_record_gpu.py's; here the reader and the stream are stand-ins (the `recorder`
fixture: tests/capture/record/conftest.py)."""

from __future__ import annotations

import pytest
import torch

from graph_harness.capture.record import hooks, settings
from tests.capture.record.standin import Graph


def capture(graph, x):
    graph.capture_begin()
    graph.capture_end()


def test_a_capture_recorded_and_the_programs_calls_unchanged(recorder):
    log: list = []
    g = Graph(log)
    capture(g, torch.zeros(4, 2))
    for _ in range(3):
        g.replay()
    g.reset()
    assert log == ["begin", "end", "replay", "replay", "replay", "reset"]
    (r,) = recorder.records
    assert r.status == "captured" and r.nodes == 1 and r.replays == 3
    assert r.key == "x[4, 2]" and r.key_source == "arguments"
    assert r.pool == (3, 4) and r.pool_reserved == 2 << 20
    assert r.released == "reset" and r.keep_graph is False
    g.replay()
    assert r.replays == 3, "a replay after reset counts for no record"


def test_a_records_nodes_are_kept_out_of_the_collectors_way(recorder):
    # a recording keeps every graph's node records as long as the program runs: each a
    # dict of tuples, ints and strings that the collector no longer walks (record/kept.py)
    import gc

    from graph_harness.capture.record import kept

    capture(Graph([]), torch.zeros(4, 2))
    (r,) = recorder.records
    (n,) = r.export.nodes
    assert n["grid"] == (1, 1, 1) and n["deps"] == () and n["scope_path"] == ()
    if kept.YOUNG_PASS:
        assert not any(gc.is_tracked(v) for v in n.values())
        assert gc.is_tracked(n) is not kept.DICTS_UNTRACKED


def test_a_capture_with_gc_collect_patched_out_is_recorded(recorder):
    # vLLM's and SGLang's capture: `with patch("gc.collect", lambda: None)` around it
    from unittest import mock

    with mock.patch("gc.collect", lambda: None):
        capture(Graph([]), torch.zeros(4, 2))
    (r,) = recorder.records
    assert r.status == "captured" and r.nodes == 1, r.error


def test_the_key_is_read_before_the_capture_begins(recorder):
    log: list = []
    seen = []

    def adapter(ctx):  # an engine's code: it must not run inside the program's capture
        seen.append(list(log))
        return "bs=4"

    settings.configure(adapters=[("engine", adapter)])
    capture(Graph(log), torch.zeros(1))
    assert seen == [[]]
    assert recorder.records[0].key == "bs=4"


def test_what_the_recorder_cannot_read_never_loses_the_graph(recorder):
    class Shapeless:
        @property
        def shape(self):  # a jagged tensor's symbolic size raises as it is read
            raise RuntimeError("no shape here")

        dtype = "x"

    def adapter(ctx):
        raise KeyError("batch")

    settings.configure(adapters=[("engine", adapter)])
    log: list = []
    capture(Graph(log), Shapeless())
    (r,) = recorder.records
    assert r.status == "captured" and r.nodes == 1
    assert r.key_source != "engine" and "x[" not in r.key  # the argument left out
    assert "key adapter engine raised KeyError" in r.key_note


def test_a_reset_inside_a_capture_keeps_it(recorder):
    log: list = []
    g = Graph(log)
    g.capture_begin()
    g.reset()  # torch's reset waits for the capture's end
    g.capture_end()
    assert log == ["begin", "reset", "end"]
    assert [r.status for r in recorder.records] == ["captured"]


@pytest.mark.parametrize("where", ["begin", "end"])
def test_the_programs_failure_reaches_it_unchanged_and_is_recorded(recorder, where):
    g = Graph([], fail=where)
    with pytest.raises(RuntimeError, match=f"^{where} failed, as the program's would$"):
        capture(g, torch.zeros(2))
    (r,) = recorder.records
    assert r.status == "failed" and f"{where} failed" in r.error


def test_a_listener_that_fails_is_its_own_problem(recorder):
    class Broken:
        def captured(self, record):
            raise ValueError("listener")

    broken = Broken()
    hooks.listen(broken)
    try:
        capture(Graph([]), torch.zeros(1))
    finally:
        hooks.unlisten(broken)
    assert len(recorder.records) == 1


def test_wrapped_once_however_often_installed(recorder):
    first = Graph.replay
    hooks._install()
    assert Graph.replay is first and hooks._ours(Graph.replay)
    assert not hooks._ours(Graph.replay.__wrapped__)


def test_a_recording_inside_another_gives_its_settings_back(recorder):
    from graph_harness.capture.record.process import ProcessRecorder, RecordOptions

    outer = ProcessRecorder(None, RecordOptions(), adapters=[("outer", lambda c: "o")]).start()
    try:
        inner = ProcessRecorder(None, RecordOptions(), adapters=[("inner", lambda c: "i")])
        inner.start()
        assert [n for n, _ in settings.settings.adapters][:1] == ["inner"]
        inner.stop()
        assert [n for n, _ in settings.settings.adapters][:1] == ["outer"]
        capture(Graph([]), torch.zeros(1))
        assert outer.records[0].key == "o" and inner.records == []
    finally:
        outer.stop()


def test_a_step_counts_a_graph_as_often_as_one_call_replays_it(recorder):
    from graph_harness.capture.record.steps import RecordedStep, combined_export

    capture(Graph([]), torch.zeros(1))
    (rec,) = recorder.records
    twice = combined_export(RecordedStep(graphs=[rec], replays=[2]), workload="w", options={})
    once = combined_export(RecordedStep(graphs=[rec]), workload="w", options={})
    assert twice.total == 2 * once.total == 2 * rec.nodes
    assert [n["index"] for n in twice.nodes] == [0, 1]
