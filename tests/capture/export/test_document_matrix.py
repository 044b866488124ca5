"""Every JSON document graph-harness writes, fed to every reader of documents.

The documents are written by the commands themselves (count, check, delta, advise, in
this process) or by the writers the GPU commands use (a replay document, a profile and
its timeline, a budget file), on a tiny round so it is quick. Each goes to delta's A,
advise's EXPORT, advise --costs and the budget reader: either it reads, and a figure of
the result is checked against the source document read with json here, or it is refused
with exit 2, one line on stderr that names the document given and the file to pass, and
nothing is written.
"""

import json
import shutil
from pathlib import Path

import pytest

from graph_harness.capture.budget.file import (
    BudgetEntry,
    BudgetFileError,
    read_budgets,
    render_budgets,
)
from graph_harness.capture.errors import UsageError
from graph_harness.capture.export.kinds import KINDS, schema_of
from graph_harness.capture.profile.document import ProfileResult
from graph_harness.capture.record.recording import Recording
from graph_harness.capture.replay.document import ReplayResult
from tests.capture.export.valid_documents import replay_doc
from tests.capture.profile.synthetic import _model
from tests.capture.record.recorded import record
from tests.in_process import _run

REPO = Path(__file__).resolve().parents[3]
SMALL = ["--stages", "2", "--rows", "2", "--k", "32", "--world", "2", "--shard", "64"]
TARGET = str(REPO / "tests" / "targets.py") + ":small_mlp"
BATCHED = str(REPO / "tests" / "targets.py") + ":batched_mlp"


@pytest.fixture(scope="module")
def docs(tmp_path_factory) -> dict[str, Path]:
    """name -> a file graph-harness wrote, every kind of JSON it writes."""
    d = tmp_path_factory.mktemp("docs")

    def stdout_of(argv, name):
        code, out, err = _run(argv, d)
        assert code == 0, err
        (d / name).write_text(out)
        return d / name

    two = ["--variant", "shipped", "--variant", "fused"]
    got = {
        "count --json (two exports)": stdout_of(["count", *SMALL, *two, "--json"], "c2.json"),
        "count --json (one export)": stdout_of(
            ["count", *SMALL, "--variant", "fused", "--json"], "c1.json"
        ),
        "count --json --target": stdout_of(["count", "--target", TARGET, "--json"], "ct.json"),
        "check --json": stdout_of(["check", "--target", TARGET, "--json"], "check.json"),
        "sweep --json (two sizes)": stdout_of(
            ["sweep", "--target", BATCHED, "--sizes", "1", "2", "--json"], "s2.json"
        ),
        "sweep --json (one size)": stdout_of(
            ["sweep", "--target", BATCHED, "--sizes", "2", "--json"], "s1.json"
        ),
    }
    code, _, err = _run(["count", *SMALL, *two, "--out", "round"], d)
    assert code == 0, err
    code, _, err = _run(["check", "--target", TARGET, "--out", "checked"], d)
    assert code == 0, err
    got["count --out nodes-shipped.json"] = d / "round" / "nodes-shipped.json"
    got["count --out manifest"] = d / "round" / ".graph-harness-manifest.json"
    got["check --out check.json"] = d / "checked" / "check.json"
    got["check --out nodes-target.json"] = d / "checked" / "nodes-target.json"
    got["delta --json"] = stdout_of(
        ["delta", "shipped", "fused", "--from", "round", "--json"], "d.json"
    )
    got["advise --json"] = stdout_of(["advise", "round/nodes-fused.json", "--json"], "a.json")
    # What the GPU commands write, through their own writers: replay --out's replay.json
    # (replay --json prints the same to_dict), profile --out's profile.json and trace.json.
    got["replay.json"] = ReplayResult.from_dict(replay_doc()).write_json(d / "replay.json")
    (d / "profiled").mkdir()
    ProfileResult(profiles={"model": _model()[0]}).write(d / "profiled")
    got["profile.json"] = d / "profiled" / "profile.json"
    got["trace.json"] = d / "profiled" / "trace.json"
    budgets = {"test_x": {"cpu-dispatch": BudgetEntry(7, {"matmul": 1})}}
    (d / "budgets.json").write_text(render_budgets(budgets))
    got["budget file"] = d / "budgets.json"
    # a recording (record --out's writer; the CPU captures no graph) and two compared
    (d / "recorded").mkdir()
    Recording(graphs=[record(0, 1, "decode n=1", 3), record(1, 1, "decode n=4", 5)]).write(
        d / "recorded"
    )
    got["record --out recording.json"] = d / "recorded" / "recording.json"
    got["delta REC REC --json"] = stdout_of(["delta", "recorded", "recorded", "--json"], "rd.json")
    return got


def test_every_kind_graph_harness_writes_is_among_them(docs):
    written = {schema_of(json.loads(p.read_text())) for p in docs.values()}
    assert written == set(KINDS), set(KINDS) ^ written


# document -> (what delta and advise read from it, or None; the words naming what to pass)
EXPORT_FILE = "count --out DIR` writes DIR/nodes-VARIANT.json"
READS = {
    "count --json (two exports)": (None, "c2.json#shipped"),
    "count --json (one export)": ("fused", None),
    "count --json --target": ("target", None),
    "sweep --json (two sizes)": (None, "s2.json#batch1"),
    "sweep --json (one size)": ("batch2", None),
    "count --out nodes-shipped.json": ("", None),
    "check --out nodes-target.json": ("", None),
    "check --json": (None, EXPORT_FILE),
    "check --out check.json": (None, EXPORT_FILE),
    "count --out manifest": (None, EXPORT_FILE),
    "delta --json": (None, EXPORT_FILE),
    "advise --json": (None, EXPORT_FILE),
    "replay.json": (None, EXPORT_FILE),
    "profile.json": (None, EXPORT_FILE),
    "trace.json": (None, EXPORT_FILE),
    "budget file": (None, EXPORT_FILE),
    "delta REC REC --json": (None, EXPORT_FILE),
}
REPLAY_FILE = "replay --out DIR` writes DIR/replay.json"
BUDGET_FILE = "pytest --update-node-budgets"


def _check(argv, folder: Path):
    """main(argv) in this process: 0 with output and no error, or 2 with one error line,
    last, and nothing on stdout; in both cases nothing under `folder` changed."""

    def listing():
        return {p: p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}

    before = listing()
    code, out, err = _run(argv, folder)
    assert "Traceback" not in err and listing() == before, err
    errors = [line for line in err.splitlines() if "error:" in line]
    if code == 0:
        assert out.strip() and not errors, err
    else:
        assert code == 2 and out == "", (argv, code, err)
        assert len(errors) == 1 and err.splitlines()[-1] == errors[0], err
    return code, out, err


def source_export(path: Path, name: str) -> dict:
    """The export the reader should have taken, read here with json alone."""
    doc = json.loads(path.read_text())
    return doc["exports"][name] if name else doc


def refused(argv, folder, names: Path, says: str) -> None:
    code, _, err = _check(argv, folder)  # exit 2, one error line last, nothing written
    line = err.splitlines()[-1]
    assert code == 2 and str(names) in line and says in line, line


@pytest.mark.parametrize("name", sorted(READS))
def test_delta_and_advise_read_every_export_and_refuse_the_rest(docs, name):
    path, (taken, says) = docs[name], READS[name]
    folder = path.parent
    other = docs["count --out nodes-shipped.json"]
    if taken is None:
        refused(["delta", str(path), str(other), "--json"], folder, path, says)
        refused(["advise", str(path), "--json"], folder, path, says)
        return
    want = source_export(path, taken)
    mine = json.loads(other.read_text())
    code, out, _ = _check(["delta", str(other), str(path), "--json"], folder)
    d = json.loads(out)
    assert code == 0 and (d["total_a"], d["total_b"]) == (mine["total_nodes"], want["total_nodes"])
    code, out, _ = _check(["advise", str(path), "--json"], folder)
    a = json.loads(out)["export"]
    assert code == 0 and (a["total_nodes"], a["variant"]) == (want["total_nodes"], want["variant"])


def test_one_export_of_counts_output_by_name(docs):
    path = docs["count --json (two exports)"]
    for name in ("shipped", "fused"):
        ref = f"{path}#{name}"
        code, out, _ = _check(["advise", ref, "--json"], path.parent)
        got = json.loads(out)["export"]
        assert code == 0 and got["variant"] == name
        assert got["total_nodes"] == source_export(path, name)["total_nodes"] > 0
    code, out, _ = _check(["delta", f"{path}#shipped", f"{path}#fused", "--json"], path.parent)
    d = json.loads(out)
    want = json.loads(path.read_text())["exports"]
    assert code == 0
    assert d["total_delta"] == want["fused"]["total_nodes"] - want["shipped"]["total_nodes"] < 0
    refused(["advise", f"{path}#nope", "--json"], path.parent, path, "it holds shipped, fused")
    one = docs["count --out nodes-shipped.json"]
    refused(["advise", f"{one}#fused", "--json"], one.parent, one, "drop #fused")
    # two '#': FILE is the shortest part before a '#' that exists; the name may hold a '#'
    for argv in (["advise", f"{path.name}#shipped#x"], ["delta", f"{path.name}#a#b", "fused"]):
        code, _, err = _check(argv, path.parent)
        assert code == 2 and "it holds shipped, fused" in err, err
    # an export whose name holds a '#' is named whole
    doc = json.loads(path.read_text())
    doc["exports"] = {"a#b": doc["exports"]["fused"], "shipped": doc["exports"]["shipped"]}
    hashed = path.parent / "hashed.json"
    hashed.write_text(json.dumps(doc))
    code, out, _ = _check(["advise", "hashed.json#a#b", "--json"], path.parent)
    assert code == 0 and json.loads(out)["export"]["variant"] == "fused"
    # a file whose own name holds a '#' is that file, as named
    (path.parent / "c.json#fused").write_text(json.dumps(source_export(path, "fused")))
    for argv in (
        ["advise", "c.json#fused", "--json"],
        ["delta", "hashed.json#shipped", "c.json#fused"],
    ):
        code, out, err = _check(argv, path.parent)
        assert code == 0, (argv, err)


def test_one_graph_of_a_recording_by_name(docs):
    path = docs["record --out recording.json"]
    graphs = {g["name"]: g for g in json.loads(path.read_text())["graphs"]}
    other = docs["count --out nodes-shipped.json"]
    want = {}
    for name, g in graphs.items():
        want[name] = json.loads((path.parent / g["export"]).read_text())["total_nodes"]
        code, out, _ = _check(["advise", f"{path}#{name}", "--json"], path.parent)
        got = json.loads(out)["export"]["total_nodes"]
        assert code == 0 and got == want[name] == g["total_nodes"]
    a, b = (f"{path}#{name}" for name in graphs)
    code, out, _ = _check(["delta", a, b, "--json"], path.parent)
    d = json.loads(out)
    assert code == 0 and [d["total_a"], d["total_b"]] == list(want.values()) == [3, 5]
    # the whole recording: advise wants one graph of it; delta compares two recordings
    names = "(decode n=1, decode n=4)"
    refused(["advise", str(path)], path.parent, path, f"{names}; name one after a '#': '")
    missing = f'no export "decode n=2" (it holds {names[1:-1]})'
    refused(["advise", f"{path}#decode n=2"], path.parent, path, missing)
    refused(["advise", str(other), "--costs", str(path)], path.parent, path, REPLAY_FILE)
    with pytest.raises(BudgetFileError, match=BUDGET_FILE):
        read_budgets(path)


def test_a_key_two_processes_share_is_told_apart_by_its_file(tmp_path):
    Recording(graphs=[record(0, 1, "w", 2), record(1, 2, "w", 4)]).write(tmp_path)
    path = tmp_path / "recording.json"
    for name, nodes in (("w (graph-0)", 2), ("w (graph-1)", 4)):
        code, out, _ = _check(["advise", f"{path}#{name}", "--json"], tmp_path)
        assert code == 0 and json.loads(out)["export"]["total_nodes"] == nodes
    refused(["advise", f"{path}#w"], tmp_path, path, "it holds w (graph-0), w (graph-1)")


@pytest.mark.parametrize("name", sorted(READS))
def test_costs_read_replay_documents_and_refuse_the_rest(docs, name):
    path = docs[name]
    export = docs["count --out nodes-shipped.json"]
    argv = ["advise", str(export), "--costs", str(path), "--json"]
    if name != "replay.json":
        refused(argv, path.parent, path, REPLAY_FILE)
        return
    code, out, _ = _check(argv, path.parent)
    fits = {f["kind"]: f["slope"] for f in json.loads(path.read_text())["fits"]}
    got = json.loads(out)["costs"]
    assert code == 0 and str(path) in got["source"]
    assert got["us_per_node"]["torch-add"] == fits["torch-add"]


@pytest.mark.parametrize("name", sorted(READS))
def test_the_budget_reader_reads_budget_files_and_refuses_the_rest(docs, name):
    path = docs[name]
    if name == "budget file":
        want = json.loads(path.read_text())["budgets"]["test_x"]["cpu-dispatch"]
        assert read_budgets(path)["test_x"]["cpu-dispatch"].total == want["total"]
        return
    with pytest.raises(BudgetFileError) as e:
        read_budgets(path)
    line = str(e.value)
    assert isinstance(e.value, UsageError) and e.value.exit_code == 2
    assert "\n" not in line and str(path) in line and BUDGET_FILE in line, line


def test_a_count_out_folder_reads_as_variants_and_its_files_by_path(docs, tmp_path):
    folder = docs["count --out nodes-shipped.json"].parent
    copy = tmp_path / "copied"
    shutil.copytree(folder, copy)
    code, out, _ = _check(["delta", "shipped", "fused", "--from", str(copy), "--json"], tmp_path)
    d = json.loads(out)
    totals = [
        json.loads((copy / f"nodes-{v}.json").read_text())["total_nodes"]
        for v in ("shipped", "fused")
    ]
    assert code == 0 and [d["total_a"], d["total_b"]] == totals


def test_a_recording_of_another_version_or_with_a_stray_file_name_is_refused(tmp_path):
    Recording(graphs=[record(0, 1, "a", 2), record(1, 1, "b", 3)]).write(tmp_path)
    path = tmp_path / "recording.json"
    doc = json.loads(path.read_text())
    path.write_text(json.dumps({**doc, "schema_version": 2}))
    refused(["advise", f"{path}#a"], tmp_path, path, "not a version of a recording")
    doc["graphs"][0]["export"] = "../outside.json"  # no file but graph-<n>.json beside it
    path.write_text(json.dumps(doc))
    refused(["advise", f"{path}#b"], tmp_path, path, "a file graph-<n>.json beside it")


def test_one_graph_of_a_recording_is_read_alone_and_a_bad_one_named(tmp_path):
    Recording(graphs=[record(0, 1, "a", 2), record(1, 1, "b", 3)]).write(tmp_path)
    path = tmp_path / "recording.json"
    (tmp_path / "graph-1.json").unlink()
    (tmp_path / "graph-1.json").mkdir()  # b's file is no file now: a is still read
    code, out, _ = _check(["advise", f"{path}#a", "--json"], tmp_path)
    assert code == 0 and json.loads(out)["export"]["total_nodes"] == 2
    refused(["advise", f"{path}#b"], tmp_path, path, "graphs[1].export: cannot read export")


def test_a_made_up_name_that_meets_a_real_one_is_refused(tmp_path):
    graphs = [record(0, 1, "w", 2), record(1, 2, "w", 3), record(2, 1, "w (graph-1)", 4)]
    Recording(graphs=graphs).write(tmp_path)
    path = tmp_path / "recording.json"
    refused(["advise", f"{path}#w (graph-0)"], tmp_path, path, "two graphs are named")


def test_csv_never_replaces_a_graph_of_a_renamed_recording(tmp_path):
    Recording(graphs=[record(0, 1, "a", 2), record(1, 1, "b", 3)]).write(tmp_path)
    renamed = tmp_path / "rec.json"
    (tmp_path / "recording.json").rename(renamed)
    before = (tmp_path / "graph-1.json").read_bytes()
    argv = ["delta", f"{renamed}#a", f"{renamed}#b", "--csv", str(tmp_path / "graph-1.json")]
    refused(argv, tmp_path, tmp_path / "graph-1.json", "which this run reads")
    assert (tmp_path / "graph-1.json").read_bytes() == before


def test_csv_never_replaces_a_variant_read_from_a_folder_and_dotdot_leaves_one(docs, tmp_path):
    plain = tmp_path / "plain"  # a copy of count's exports, without its manifest
    plain.mkdir()
    for v in ("shipped", "fused"):
        shutil.copy(docs["count --out nodes-shipped.json"].parent / f"nodes-{v}.json", plain)
    before = (plain / "nodes-fused.json").read_bytes()
    argv = ["delta", "shipped", "fused", "--from", "plain", "--csv", "plain/nodes-fused.json"]
    refused(argv, tmp_path, Path("plain/nodes-fused.json"), "which this run reads")
    assert (plain / "nodes-fused.json").read_bytes() == before
    # `out/../x.csv` is beside the output folder, not in it
    out = docs["count --out nodes-shipped.json"].parent
    argv = ["delta", "shipped", "fused", "--from", "plain", "--csv", f"{out}/../beside.csv"]
    code, _, err = _run(argv, tmp_path)
    assert code == 0 and (out.parent / "beside.csv").is_file(), err
    (out.parent / "beside.csv").unlink()
