"""`record --out` on a disk that fills: the program ran, so its tables are printed, what
fits of its recording is kept (the recording itself first, whole or not at all; its
report after), what was lost is said with where, and the exit code is the program's. The
full disk is injected in this process (tests/full_disk.py); the program's recording is
made from session files as a recorder writes them (tests/capture/record/recorded.py)."""

import json
import re
import shutil

import pytest

from graph_harness.capture.record import program as record_program
from graph_harness.capture.record.process import RecordOptions
from graph_harness.capture.record.recording import Recording
from graph_harness.reports.output.manifest import MANIFEST, MANIFEST_NEW
from tests.capture.record.recorded import record, write_process
from tests.full_disk import FullDisk
from tests.in_process import _run


@pytest.fixture
def ran(tmp_path, monkeypatch):
    """`record -- prog.py` runs nothing: its recording, of two graphs and an exit code 3,
    is read from session files."""
    session = tmp_path / "session"
    session.mkdir()
    write_process(session, 41, [record(0, 41, "decode", 5), record(1, 41, "prefill", 3)])
    (tmp_path / "prog.py").write_text("print('never run')\n")

    def run_program(program, options=None, **kw):
        return Recording.from_session(
            session, options=options or RecordOptions(), program=program, exit_code=3
        )

    monkeypatch.setattr(record_program, "run_program", run_program)
    return tmp_path


def _record(folder, *extra):
    return _run(["record", "--out", "rec", *extra, "--", "prog.py"], folder)


def test_a_report_that_does_not_fit_keeps_the_recording(ran, monkeypatch):
    disk = FullDisk(monkeypatch, ran)
    disk.fill_at(r"\.report\.md\.[0-9a-f]+\.tmp", only=True)
    code, out, err = _record(ran)
    assert code == 3, err
    assert "2 graphs captured (8 nodes)" in out and "decode" in out, "the tables, printed"
    assert "graphs.csv" in err and str(ran / "rec" / "report.md") not in err
    assert "writing rec/report.md" in err and "report --recording rec" in err, err
    files = sorted(p.name for p in (ran / "rec").iterdir())
    assert "recording.json" in files and "report.md" not in files, files
    assert not any(".tmp" in f or "gh-partial" in f for f in files), files
    assert json.loads((ran / "rec" / MANIFEST).read_text())["complete"] is True
    # what was kept reads back, and makes the report where there is room
    disk.free()
    code, _, err = _run(["report", "--recording", "rec", "--out", "rep"], ran)
    assert code == 0, err
    assert "program exit 3" in (ran / "rep" / "report.md").read_text()


@pytest.mark.parametrize(
    ("where", "nth"),
    [
        (r"\.graph-1\.json\.[0-9a-f]+\.tmp", 1),  # a graph's export: the recording itself
        (r"\.recording\.json\.[0-9a-f]+\.tmp", 1),  # the recording's document
        (re.escape(MANIFEST_NEW), -1),  # the commit's complete manifest, the last write
    ],
)
def test_a_recording_that_does_not_fit_is_said_lost_and_its_tables_printed(
    ran, monkeypatch, where, nth
):
    disk = FullDisk(monkeypatch, ran)
    if nth == -1:  # counted on a run with room
        disk.fill_at(where, nth=10**6)
        assert _record(ran)[0] == 3 and disk.hits > 3
        shutil.rmtree(ran / "rec")
        nth = disk.hits
    disk.fill_at(where, nth=nth)
    code, out, err = _record(ran)
    assert (code, disk.hits) == (3, nth), err
    assert "2 graphs captured (8 nodes)" in out and "prefill" in out, "the tables, printed"
    assert "no room for the recording in rec" in err and "nothing of it was kept" in err, err
    assert ": error:" not in err and "gh-partial" not in err, err
    assert sorted(p.name for p in ran.iterdir()) == ["prog.py", "session"], "nothing left"


def test_a_disk_full_before_the_program_runs_stops_before_it(ran, monkeypatch):
    # the first manifest is written before the work: nothing ran, so nothing is lost
    FullDisk(monkeypatch, ran).fill_at(re.escape(MANIFEST_NEW))
    code, out, err = _record(ran)
    assert code == 1 and out == "" and "running" not in err, err
    assert f"No space left on device: 'rec/{MANIFEST}'" in err
