"""record --check's verdicts as a recording carries them (a process's files, the
recording's folder), the tables that show them, the exit code a CI job gates on, and the
command line's refusals: all without a GPU (the verdicts made here as a checker makes them)."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

from rich.console import Console

from graph_harness.capture.record.process import RecordOptions
from graph_harness.capture.record.recording import Recording
from graph_harness.capture.record.verdict import Difference, GraphVerdict
from graph_harness.reports.cli.commands.record import checked_status
from graph_harness.reports.record_tables import check_lines, graphs_table, recaptured_lines
from tests.capture.record.recorded import record, write_process

REPO = Path(__file__).resolve().parents[3]
CHECKED = RecordOptions(check=True, eager="engine.py:eager_form")


def _agrees(n: int) -> GraphVerdict:
    v = GraphVerdict(source="adapter")
    for i in range(1, n + 1):
        v.compared_at(i)
    return v


def _differs(at: int) -> GraphVerdict:
    v = _agrees(at - 1)
    v.status = "differs"
    detail = "8 of 64 elements differ"
    v.differences = [Difference(replay=at, tensor="target.k_cache", detail=detail, max_diff=2.0)]
    return v


def _session(tmp_path, verdicts, replays):
    recs = [record(i, 100, f"bs={2**i}", 3) for i in range(len(verdicts))]
    counts = {
        str(i): {"replays": r, "released": None, **({"check": v.to_dict()} if v else {})}
        for i, (v, r) in enumerate(zip(verdicts, replays))
    }
    write_process(tmp_path, 100, recs, exit_counts=counts)
    return Recording.from_session(tmp_path, options=CHECKED, program=["engine.py"])


def test_verdicts_travel_from_the_processes_files_to_the_folder_and_back(tmp_path):
    (tmp_path / "s").mkdir()
    rec = _session(tmp_path / "s", [_agrees(8), _differs(3), None], [12, 5, 0])
    assert [g.check.status if g.check else None for g in rec.graphs] == [
        "agrees", "differs", None,
    ]  # fmt: skip
    rec.write(tmp_path)
    back = Recording.read(tmp_path)
    assert back.to_dict() == rec.to_dict()
    assert back.options.check and back.options.eager == "engine.py:eager_form"
    assert back.graphs[1].check.first.tensor == "target.k_cache"
    # a recording made without --check reads as before (no options, no verdicts)
    plain = Recording(graphs=[record(0, 1, "bs=1", 2)], program=["x"], exit_code=0)
    (tmp_path / "p").mkdir()
    plain.write(tmp_path / "p")
    assert "check" not in plain.to_dict()["options"]
    assert not Recording.read(tmp_path / "p").options.check


def test_the_exit_code_gates_on_a_graph_that_differs():
    def rec(*verdicts, replays=5, code=0):
        graphs = [record(i, 1, f"k{i}", 2, replays=replays) for i in range(len(verdicts))]
        for g, v in zip(graphs, verdicts):
            g.check = v
        return Recording(graphs=graphs, options=CHECKED, program=["x"], exit_code=code)

    not_checked = GraphVerdict(status="not checked", reason="no eager form for this capture site")
    skipped = GraphVerdict(status="skipped", reason="a backward graph of make_graphed_callables")
    assert checked_status(rec(_agrees(5), skipped), 0) == 0  # by design: no doubt
    assert checked_status(rec(_agrees(5)), 0) == 0
    assert checked_status(rec(_agrees(5), _differs(2)), 0) == 1
    assert checked_status(rec(_agrees(5), not_checked), 0) == 3  # a doubt is never a pass
    assert checked_status(rec(not_checked, replays=0), 0) == 0  # never replayed: nothing ran
    assert checked_status(rec(_differs(2)), 7) == 7  # the program's own failure stands
    plain = Recording(graphs=[record(0, 1, "k", 2, replays=3)], program=["x"], exit_code=0)
    assert checked_status(plain, 0) == 0


def test_tables_show_each_verdict_and_what_to_do(tmp_path):
    why = "no eager form for this capture site: give one with `record --eager MODULE:FUNCTION`"
    graphs = [record(i, 1, k, 2, replays=r) for i, (k, r) in enumerate(
        [("verify", 9), ("draft", 30), ("draft", 2), ("side", 4), ("spare", 0)]
    )]  # fmt: skip
    graphs[0].check = _differs(3)
    graphs[1].check = _agrees(9)
    graphs[2].check = _agrees(2)
    graphs[3].check = GraphVerdict(status="not checked", reason=why)
    graphs[4].check = GraphVerdict(source="adapter")
    rec = Recording(graphs=graphs, options=CHECKED, program=["x"], exit_code=0)
    lines = check_lines(rec)
    assert lines[0] == (
        "DIFFERS: main verify: differs first at replay 3: target.k_cache: 8 of 64 elements differ"
    )
    assert f"not checked (1 graph: main side): {why}" in lines
    assert "agree: 2 graphs over 11 compared replays" in lines
    again = "captures under one key: main #1 and #2 share 'draft'"  # an engine's key: no hint
    assert recaptured_lines(rec) == [again]
    out = io.StringIO()
    Console(file=out, width=250).print(graphs_table(rec))
    text = out.getvalue()
    assert "DIFFERS at replay 3: target.k_cache" in text and "never replayed" in text
    assert "agrees (9 compared)" in text


def _cli(*args):
    cmd = [sys.executable, "-m", "graph_harness", "record", *args]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=120)


def test_the_command_line_refuses_check_flags_it_cannot_use(tmp_path):
    prog = tmp_path / "p.py"
    prog.write_text("print('ran')\n")
    r = _cli("--eager", f"{prog}:f", "--", str(prog))
    assert r.returncode == 2 and "--eager and --check-sample go with --check" in r.stderr
    r = _cli("--check", "--check-sample", "8,1", "--", str(prog))
    assert r.returncode == 2 and "--check-sample takes FIRST[,RATIO]" in r.stderr
    r = _cli("--check", "--eager", f"{prog}:missing", "--", str(prog))
    assert r.returncode == 2 and "--eager: " in r.stderr and "'missing'" in r.stderr
    assert "ran" not in r.stdout  # refused before the program ran


def test_report_of_a_checked_recording_shows_the_verdicts(tmp_path):
    from graph_harness.reports.recording_report import write_recording

    graphs = [record(0, 1, "verify", 2, replays=9), record(1, 1, "draft", 2, replays=4)]
    graphs[0].check, graphs[1].check = _differs(3), _agrees(4)
    rec = Recording(graphs=graphs, options=CHECKED, program=["x"], exit_code=1)
    (tmp_path / "r").mkdir()
    md = write_recording(tmp_path / "r", rec, command="graph-harness record --check").read_text()
    assert "## Checked against their eager forms (record --check)" in md
    assert "- DIFFERS: main verify: differs first at replay 3: target.k_cache" in md
    csv = (tmp_path / "r" / "graphs.csv").read_text().splitlines()
    assert csv[0].endswith("check,check_compared,check_finding")
    assert ",differs,2," in csv[1] and ",agrees,4," in csv[2]
