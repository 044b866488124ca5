"""Graphs named by what their region read (capture/record/reads.py), through the recorder's
wrappers on a stand-in graph class (the `recorder` fixture), on the CPU: a runner that
captures several sizes in one loop with no adapter, a program that captures one shape
twice, and what the recording, its document and its tables say of them. The same on the
GPU: test_names_gpu.py."""

from __future__ import annotations

import io

import pytest
import torch
from rich.console import Console
from torch import nn

from graph_harness.capture.record import reads_mode, settings
from graph_harness.capture.record.recording import Recording
from graph_harness.reports.record_tables import graphs_table, recaptured_lines
from graph_harness.reports.recording_report import graphs_frame
from tests.capture.record.standin import Graph


class Runner:
    """An engine in miniature: one static ids buffer sized for the largest batch, a step
    that adds into a static cache in place (state, not an input), every size captured in
    one loop, as vLLM and SGLang capture theirs (no forward context, no adapter)."""

    def __init__(self) -> None:
        self.embed = nn.Embedding(32, 16)
        self.head = nn.Linear(16, 32)
        self.ids = torch.zeros(8, dtype=torch.long)  # [max]
        self.cache = torch.zeros(8, 16)  # [max, dim]
        self.graphs: dict[int, Graph] = {}
        self.log: list = []

    @torch.no_grad()
    def step(self, b: int) -> torch.Tensor:
        x = self.embed(self.ids[:b])
        self.cache[:b].add_(x)
        return self.head(x + self.cache[:b])

    def capture_all(self, sizes: tuple[int, ...]) -> None:
        for b in sizes:
            g = Graph(self.log)
            g.capture_begin()
            self.step(b)
            g.capture_end()
            self.graphs[b] = g


def _recording(records) -> Recording:
    return Recording(graphs=list(records), program=["serve.py"], exit_code=0)


def test_a_runner_capturing_sizes_in_one_loop_is_named_by_them(recorder, tmp_path):
    runner = Runner()
    runner.capture_all((8, 4, 1))
    for b, n in ((8, 1), (4, 2), (1, 3)):
        for _ in range(n):
            runner.graphs[b].replay()
    recs = recorder.records
    assert [r.key for r in recs] == ["reads [8] int64", "reads [4] int64", "reads [1] int64"]
    assert {r.key_source for r in recs} == {"shapes"}
    assert [r.reads for r in recs] == [["[8] int64"], ["[4] int64"], ["[1] int64"]]
    assert [r.replays for r in recs] == [1, 2, 3], "each name on its own graph"
    assert torch._C._len_torch_dispatch_stack() == 0, "the mode popped at each capture's end"
    rec = _recording(recs)
    assert rec.names() == [r.key for r in recs] and rec.shared_keys() == []
    assert recaptured_lines(rec) == []
    doc = rec.to_dict(inline=True)
    assert [g["shares_key_with"] for g in doc["graphs"]] == [[], [], []]
    rec.write(tmp_path)
    back = Recording.read(tmp_path)
    assert [g.reads for g in back.graphs] == [r.reads for r in recs]
    assert [g.key_source for g in back.graphs] == ["shapes"] * 3


def test_one_shape_captured_twice_shows_which_captures_share_the_key(recorder):
    runner = Runner()
    runner.capture_all((4, 2))
    runner.capture_all((4,))  # the 4 again: one key for captures #0 and #2
    rec = _recording(recorder.records)
    assert rec.names() == ["reads [4] int64 #1", "reads [2] int64", "reads [4] int64 #2"]
    (group,) = rec.shared_keys()
    assert [g.index for g in group] == [r.index for r in recorder.records[::2]]
    first, second = (g.index for g in group)
    (line,) = recaptured_lines(rec)
    assert line.startswith(
        f"captures under one key: main #{first} and #{second} share 'reads [4] int64'"
    ), line
    assert "record --key" in line, "a key not the engine's own: say what names them"
    doc = rec.to_dict(inline=True)
    assert [g["shares_key_with"] for g in doc["graphs"]] == [[second], [], [first]]
    table = graphs_frame(rec)  # graphs.csv
    assert list(table["shares_key_with"]) == [str(second), "", str(first)]
    assert list(table["reads"]) == ["[4] int64", "[2] int64", "[4] int64"]
    out = io.StringIO()
    Console(file=out, width=200).print(graphs_table(rec))
    assert "reads [4] int64 #2" in out.getvalue()


def test_without_the_reads_a_loops_graphs_share_its_arguments(recorder, monkeypatch):
    """What the issue saw: where the reads cannot be looked at (a torch whose Dynamo would
    not compile under a dispatch mode), every graph of the loop is keyed by the loop's
    own arguments, alike; the note says why."""
    monkeypatch.setattr(reads_mode, "available", lambda: "no dispatch mode here")
    Runner().capture_all((8, 4))
    recs = recorder.records
    assert [r.key for r in recs] == ["sizes=(8, 4)"] * 2
    assert {r.key_source for r in recs} == {"arguments"} and recs[0].reads is None
    assert "what the region reads not read: RuntimeError: no dispatch mode here" in recs[0].key_note
    assert len(_recording(recs).shared_keys()) == 1


class Watching(Runner):
    """The runner, noting how many dispatch modes are active at each step."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[int] = []

    def step(self, b: int) -> torch.Tensor:
        self.seen.append(torch._C._len_torch_dispatch_stack())
        return super().step(b)


def test_an_engines_key_wins_and_its_region_is_not_looked_at(recorder):
    settings.configure(adapters=[("engine", lambda ctx: f"bs={ctx.find('b')}")])
    runner = Watching()
    runner.capture_all((8, 4))
    assert [r.key for r in recorder.records] == ["bs=8", "bs=4"]
    assert [r.reads for r in recorder.records] == [None, None]
    assert runner.seen == [0, 0], "no mode pushed where an engine names the graph"


def test_no_read_names_pushes_no_mode_and_names_by_arguments(recorder):
    # `record --no-read-names`: the watch's Python call per operator spared, the loop's
    # graphs keyed by its arguments, alike, as before the reads were looked at
    settings.configure(read_names=False)
    runner = Watching()
    runner.capture_all((8, 4))
    recs = recorder.records
    assert runner.seen == [0, 0], "no mode pushed"
    assert [r.key for r in recs] == ["sizes=(8, 4)"] * 2 and recs[0].reads is None
    assert {r.key_source for r in recs} == {"arguments"}


def test_record_graphs_read_names_false_reaches_the_capture(recorder):
    from graph_harness.capture import record_graphs

    with record_graphs(children=False, read_names=False) as rec:
        Runner().capture_all((8, 4))
    assert [g.key for g in rec.graphs] == ["sizes=(8, 4)"] * 2, [g.key for g in rec.graphs]
    assert rec.options.read_names is False and settings.settings.read_names is True


def test_a_failed_capture_is_named_by_what_it_read_and_the_mode_popped(recorder):
    runner = Runner()
    g = Graph(runner.log, fail="end")
    g.capture_begin()
    runner.step(4)
    with pytest.raises(RuntimeError, match="end failed"):
        g.capture_end()
    (r,) = recorder.records
    assert r.status == "failed" and r.key == "reads [4] int64"
    assert torch._C._len_torch_dispatch_stack() == 0
