"""A recording built from the files a program's processes wrote, written and read back
checked (capture/record/recording.py), with no GPU: the records are made here as a
process's recorder writes them."""

from __future__ import annotations

import json
import os

import pytest

from graph_harness.capture.export.documents import ExportError
from graph_harness.capture.record.process import RecordOptions
from graph_harness.capture.record.recording import Recording
from tests.capture.record.recorded import record, write_process


def test_a_session_of_two_processes(tmp_path):
    a = [record(0, 100, "bs=8", 5), record(1, 100, "bs=4", 3), record(2, 100, "bs=4", 3)]
    write_process(
        tmp_path,
        100,
        a,
        exit_counts={
            "0": {"replays": 0, "released": None},
            "1": {"replays": 7, "released": "reset"},
        },
    )
    # a process killed after its last flush: the snapshot's counts, and its cut-off line
    b = [record(0, 200, "bs=8", 5, rank=1)]
    write_process(
        tmp_path, 200, b, snapshot={"0": {"replays": 9, "released": None}}, tail=b'{"event": "gr'
    )
    rec = Recording.from_session(tmp_path, options=RecordOptions(), program=["serve.py"])
    assert [g.replays for g in rec.graphs] == [0, 7, 0, 9]
    assert rec.graphs[1].released == "reset"
    assert rec.names() == ["bs=8", "bs=4 #1", "bs=4 #2", "bs=8"]
    assert [rec.process_label(g) for g in rec.graphs] == ["pid 100"] * 3 + ["rank 1"]
    assert rec.total == 16 and rec.never_replayed() == [rec.graphs[0], rec.graphs[2]]
    exited = {p.pid: p.exited for p in rec.processes}
    assert exited == {100: True, 200: False}
    assert any("cut off" in n for n in rec.notes)
    by = rec.by_module(None)
    assert by.set_index("scope").loc["unscoped", "launches"] == 3 * 7 + 5 * 9


@pytest.mark.parametrize(
    ("written", "read"),
    [
        ("bs=\x1b[2J4", "bs=\\x1b[2J4"),  # an escape's control character
        ("bs=\udc80", "bs=\\udc80"),  # an escape's lone surrogate
        ("bs=\u202e4", "bs=\\u202e4"),  # a raw bidirectional override
        ("bs=\x9b4", "bs=\\x9b4"),  # a raw C1 control (a CSI)
    ],
)
def test_a_session_file_is_read_as_text(tmp_path, written, read):
    # only a line that holds none of them is read without the pass (issue 59: its cost)
    write_process(tmp_path, 100, [record(0, 100, written, 2)], exit_counts={})
    raw = (tmp_path / "100-abcd.jsonl").read_bytes()
    if written[-1] == "4" and "\x1b" not in written:  # written raw, not as an escape
        raw = raw.replace(json.dumps(written).encode()[1:-1], written.encode())
        (tmp_path / "100-abcd.jsonl").write_bytes(raw)
    rec = Recording.from_session(tmp_path, options=RecordOptions())
    assert [g.key for g in rec.graphs] == [read]


@pytest.mark.smoke
def test_written_and_read_back_the_same(tmp_path):
    rec = Recording(
        graphs=[record(0, 1, "bs=1", 4, replays=3), record(1, 1, "bs=2", 2)],
        program=["python", "serve.py"],
        exit_code=0,
        wall_s=1.5,
    )
    rec.write(tmp_path)
    back = Recording.read(tmp_path)
    assert back.to_dict() == rec.to_dict()
    assert back.graphs[0].export.nodes == rec.graphs[0].export.nodes


def test_read_names_kept_and_a_recording_from_before_it_still_read(tmp_path):
    rec = Recording(graphs=[record(0, 1, "bs=1", 4)], options=RecordOptions(read_names=False))
    rec.write(tmp_path)
    assert Recording.read(tmp_path).options.read_names is False
    doc = json.loads((tmp_path / "recording.json").read_text())
    del doc["options"]["read_names"]  # as written before the flag
    (tmp_path / "recording.json").write_text(json.dumps(doc))
    assert Recording.read(tmp_path).options.read_names is True
    doc["options"]["read_names"] = "no"
    (tmp_path / "recording.json").write_text(json.dumps(doc))
    with pytest.raises(ExportError, match="options.read_names"):
        Recording.read(tmp_path)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["graphs"][0].update(export="../graph-0.json"), "graph-<n>.json"),
        (lambda d: d["graphs"][0].update(export="/etc/passwd"), "graph-<n>.json"),
        (lambda d: d["graphs"][0].update(total_nodes=99), "total_nodes"),
        (lambda d: d["graphs"][0].update(status="done"), "status"),
        (lambda d: d["graphs"][0].update(replays=-1), "replays"),
        (lambda d: d.update(schema="x"), "not a graph-harness recording"),
        (lambda d: d["graphs"][0].update(extra=1), "unknown key"),
    ],
)
def test_a_bad_recording_is_one_error_naming_the_field(tmp_path, change, message):
    Recording(graphs=[record(0, 1, "bs=1", 4)]).write(tmp_path)
    doc = json.loads((tmp_path / "recording.json").read_text())
    change(doc)
    (tmp_path / "recording.json").write_text(json.dumps(doc))
    with pytest.raises(ExportError, match="recording.json") as e:
        Recording.read(tmp_path)
    assert message in str(e.value)


def test_a_graph_file_that_is_not_an_export_is_refused(tmp_path):
    Recording(graphs=[record(0, 1, "bs=1", 4)]).write(tmp_path)
    (tmp_path / "graph-0.json").write_text('{"schema": "something else"}')
    with pytest.raises(ExportError, match=r"graphs\[0\]\.export"):
        Recording.read(tmp_path)


def test_a_folder_named_as_a_process_file_is_left_out_and_said(tmp_path):
    # the program writes where it likes, its session folder included: a folder there
    # named *.jsonl is not one of the recorder's files
    write_process(tmp_path, 7, [record(0, 7, "decode", 3)])
    (tmp_path / "0-made-by-the-program.jsonl").mkdir()
    rec = Recording.from_session(tmp_path, options=RecordOptions())
    assert [g.key for g in rec.graphs] == ["decode"]
    (note,) = rec.notes
    assert note.startswith("0-made-by-the-program.jsonl could not be read (is a directory)")


def test_a_pipe_or_a_link_named_as_a_process_file_is_left_out_unread(tmp_path):
    # a FIFO blocked the read for good (record hung, the exit code lost); a link was
    # followed out of the session folder (attack pass)
    write_process(tmp_path, 7, [record(0, 7, "decode", 3)])
    os.mkfifo(tmp_path / "1-fifo.jsonl")
    outside = tmp_path.parent / f"{tmp_path.name}-outside.txt"
    outside.write_text("not the recorder's\n")
    (tmp_path / "2-link.jsonl").symlink_to(outside)
    rec = Recording.from_session(tmp_path, options=RecordOptions())
    assert [g.key for g in rec.graphs] == ["decode"]
    assert rec.notes == [
        f"{name} is not a file the recorder wrote (a link or a pipe the program made there); "
        "left out"
        for name in ("1-fifo.jsonl", "2-link.jsonl")
    ]


def test_lines_nested_past_the_parsers_depth_or_many_are_said_once_each_and_counted(tmp_path):
    write_process(tmp_path, 7, [record(0, 7, "decode", 3)])
    (tmp_path / "1-junk.jsonl").write_bytes(b"[" * 100_000 + b"\n" + b"not json\n" * 40)
    rec = Recording.from_session(tmp_path, options=RecordOptions())
    assert [g.key for g in rec.graphs] == ["decode"]
    assert rec.notes == [
        *(f"1-junk.jsonl: line {n} is not JSON; left out" for n in range(1, 6)),
        "1-junk.jsonl: 36 more lines are not JSON; left out",
    ]
