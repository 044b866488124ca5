"""Export and replay documents read back: every malformed one is refused with the exact
message (file and field), and nothing else escapes but ExportError."""

import copy
import json
import re
import sys

import pandas as pd
import pytest

from graph_harness.capture import ExportError, NodeExport
from graph_harness.capture.replay.document import ReplayDocumentError, ReplayResult
from tests.capture.export.valid_documents import (
    export_doc,
    export_doc_v2,
    export_doc_v3,
    replay_doc,
)

BIG = 10**5000  # str() of it raises past Python's digit limit; messages give its size
BIG_BITS = BIG.bit_length()


def edit(path, value=None, *, delete=False):
    """A change to a document: set (or delete) the field at `path` ("nodes.1.step")."""

    def apply(doc):
        *parents, last = path.split(".")
        target = doc
        for p in parents:
            target = target[int(p)] if isinstance(target, list) else target[p]
        key = int(last) if isinstance(target, list) else last
        if delete:
            del target[key]
        else:
            target[key] = value
        return doc

    return apply


X = "nodes-x.json"
EXPORT_KEYS = (
    "schema, schema_version, source, workload, variant, params, rank, env, created, nodes, "
    "options, total_nodes"
)
NODE_KEYS = "index, type, kernel, grid, block, stage, step, deps, parent, programmatic_deps"
NODE_KEYS += ", fused_modules, graph, launch_after"

# (case, change to a valid document, exact message). Every one raises ExportError.
BAD_EXPORTS = [
    ("step null", edit("nodes.1.step"), f"{X}: nodes[1].step: expected a str, got null"),
    ("type an int", edit("nodes.0.type", 5), f"{X}: nodes[0].type: expected a str, got 5"),
    (
        "fused_modules not strs",
        edit("nodes.0.fused_modules", ["layers.1", 3]),
        f"{X}: nodes[0].fused_modules[1]: expected a str, got 3",
    ),
    (
        "fused_modules an object",
        edit("nodes.0.fused_modules", {}),
        f"{X}: nodes[0].fused_modules: expected a list, got an object",
    ),
    (
        "type empty",
        edit("nodes.0.type", ""),
        f'{X}: nodes[0].type: expected a non-empty str, got ""',
    ),
    (
        "version true",
        edit("schema_version", True),
        f"{X}: export schema version true is not one this graph-harness reads (1, 2, 3); "
        "re-export it with this graph-harness",
    ),
    (
        "version 1.0",
        edit("schema_version", 1.0),
        f"{X}: export schema version 1.0 is not one this graph-harness reads (1, 2, 3); "
        "re-export it with this graph-harness",
    ),
    (
        "version missing",
        edit("schema_version", delete=True),
        f"{X}: export schema version null is not one this graph-harness reads (1, 2, 3); "
        "re-export it with this graph-harness",
    ),
    (
        "schema wrong",
        edit("schema", "graph-harness/replay"),
        f'{X}: not a graph-harness node export (schema "graph-harness/replay", expected '
        "'graph-harness/nodes')",
    ),
    (
        "not an object",
        lambda doc: [1, 2],
        f"{X}: not a graph-harness node export: expected an object, got a list of 2",
    ),
    ("nodes of ints", edit("nodes", [1, 2]), f"{X}: nodes[0]: expected an object, got 1"),
    ("nodes an object", edit("nodes", {}), f"{X}: nodes: expected a list, got an object"),
    (
        "params a list",
        edit("params", [1, 2]),
        f"{X}: params: expected an object or null, got a list of 2",
    ),
    ("params a str value", edit("params.k", "4"), f'{X}: params.k: expected an int, got "4"'),
    (
        "stage a float",
        edit("nodes.0.stage", 1.5),
        f"{X}: nodes[0].stage: expected an int in [0, 9223372036854775808) or null, got 1.5",
    ),
    (
        "stage past int64 (found by the property test: pandas then overflowed)",
        edit("nodes.0.stage", 2**64),
        f"{X}: nodes[0].stage: expected an int in [0, 9223372036854775808) or null, got {2**64}",
    ),
    (
        "stage negative",
        edit("nodes.0.stage", -1),
        f"{X}: nodes[0].stage: expected an int in [0, 9223372036854775808) or null, got -1",
    ),
    (
        "a 5000-digit rank",
        edit("rank", BIG),
        f"{X}: rank: expected an int >= 0 or null within 64 bits, got an integer of "
        f"{BIG_BITS} bits",
    ),
    (
        "source unknown",
        edit("source", "gpu"),
        f'{X}: source: expected one of "cuda-graph", "cpu-dispatch", got "gpu"',
    ),
    ("variant an int", edit("variant", 3), f"{X}: variant: expected a str or null, got 3"),
    ("workload null", edit("workload"), f"{X}: workload: expected a str, got null"),
    ("created missing", edit("created", delete=True), f"{X}: missing key 'created'"),
    (
        "unknown key",
        edit("extra", 1),
        f'{X}: unknown key "extra" (expected keys: {EXPORT_KEYS})',
    ),
    ("node key missing", edit("nodes.0.deps", delete=True), f"{X}: nodes[0]: missing key 'deps'"),
    (
        "node key unknown",
        edit("nodes.0.stpe", "x"),
        f'{X}: nodes[0]: unknown key "stpe" (expected keys: {NODE_KEYS})',
    ),
    (
        "index not the position",
        edit("nodes.1.index", 5),
        f"{X}: nodes[1].index: expected 1 (the node's position), got 5",
    ),
    (
        "dep out of range",
        edit("nodes.1.deps", [7]),
        f"{X}: nodes[1].deps[0]: expected an int in [0, 4), got 7",
    ),
    (
        "dep on itself",
        edit("nodes.1.deps", [1]),
        f"{X}: nodes[1].deps[0]: expected another node's index, got 1",
    ),
    ("deps not a list", edit("nodes.1.deps", 0), f"{X}: nodes[1].deps: expected a list, got 0"),
    (
        "launch_after out of range",
        edit("nodes.1.launch_after", [9]),
        f"{X}: nodes[1].launch_after[0]: expected an int in [0, 4), got 9",
    ),
    (
        "programmatic dep out of range",
        edit("nodes.1.programmatic_deps", [9]),
        f"{X}: nodes[1].programmatic_deps[0]: expected an int in [0, 4), got 9",
    ),
    (
        "parent out of range",
        edit("nodes.1.parent", 9),
        f"{X}: nodes[1].parent: expected an int in [0, 4) or null, got 9",
    ),
    (
        "grid of four",
        edit("nodes.0.grid", [1, 2, 3, 4]),
        f"{X}: nodes[0].grid: expected null or a list of 1 to 3 ints, got a list of 4",
    ),
    (
        "grid of a str",
        edit("nodes.0.grid", ["a"]),
        f'{X}: nodes[0].grid[0]: expected an int in [0, 4294967296), got "a"',
    ),
    (
        "kernel an int",
        edit("nodes.0.kernel", 7),
        f"{X}: nodes[0].kernel: expected a str or null, got 7",
    ),
    (
        "env nested",
        edit("env.torch", {"a": 1}),
        f"{X}: env.torch: expected a str, number, bool or null, got an object",
    ),
    ("options a list", edit("options", []), f"{X}: options: expected an object, got a list of 0"),
    (
        "total_nodes wrong",
        edit("total_nodes", 99),
        f"{X}: total_nodes: expected 3 (the launching nodes listed), got 99",
    ),
]


@pytest.mark.parametrize("case,change,message", BAD_EXPORTS, ids=[c[0] for c in BAD_EXPORTS])
def test_bad_export_documents(case, change, message):
    doc = change(export_doc())
    with pytest.raises(ExportError) as info:
        NodeExport.from_dict(doc, where=X)
    assert str(info.value) == message


BAD_V2 = [
    (
        "scope missing",
        edit("nodes.0.scope", delete=True),
        f"{X}: nodes[0]: missing key 'scope'",
    ),
    (
        "scope_path a str",
        edit("nodes.1.scope_path", "layers"),
        f'{X}: nodes[1].scope_path: expected a list, got "layers"',
    ),
    (
        "scope_path of ints",
        edit("nodes.1.scope_path", [3]),
        f"{X}: nodes[1].scope_path[0]: expected a str, got 3",
    ),
    (
        "scope not the innermost",
        edit("nodes.1.scope", "layers"),
        f'{X}: nodes[1].scope_path: expected "layers" last (the innermost scope), got a list of 2',
    ),
    (
        "unscoped with a path",
        edit("nodes.1.scope", "unscoped"),
        f'{X}: nodes[1].scope_path: expected "unscoped" last (the innermost scope), '
        "got a list of 2",
    ),
    (
        "empty path, scoped",
        edit("nodes.1.scope_path", []),
        f"{X}: nodes[1].scope_path: expected [] (unscoped), got a list of 0",
    ),
]


@pytest.mark.parametrize("case,change,message", BAD_V2, ids=[c[0] for c in BAD_V2])
def test_bad_v2_scope_columns(case, change, message):
    with pytest.raises(ExportError) as info:
        NodeExport.from_dict(change(export_doc_v2()), where=X)
    assert str(info.value) == message


def test_v2_document_reads_and_v1_gets_scope_columns():
    v2 = NodeExport.from_dict(export_doc_v2(), where=X)
    assert v2.nodes[1]["scope_path"] == ["layers", "stage0/pack"]
    v1 = NodeExport.from_dict(export_doc(), where=X)
    steps = ("topk", "pack", "select", "copy")
    assert [n["scope_path"] for n in v1.nodes] == [[f"stage0/{s}"] for s in steps]
    assert v1.to_dict()["schema_version"] == 3


BAD_V3 = [
    (
        "warmup negative",
        edit("options.warmup", -1),
        f"{X}: options.warmup: expected an int >= 0, got -1",
    ),
    (
        "warmup a str",
        edit("options.warmup", "3"),
        f'{X}: options.warmup: expected an int >= 0, got "3"',
    ),
    (
        "module_depth 0",
        edit("options.module_depth", 0),
        f"{X}: options.module_depth: expected an int >= 1, got 0",
    ),
    (
        "module_depth a word",
        edit("options.module_depth", "all"),
        f"{X}: options.module_depth: expected an int >= 1, 'every level' or null, got \"all\"",
    ),
    (
        "module_depth a bool",
        edit("options.module_depth", True),
        f"{X}: options.module_depth: expected an int >= 1, 'every level' or null, got true",
    ),
    (
        "block_depth a str",
        edit("options.block_depth", "3"),
        f'{X}: options.block_depth: expected an int >= 1 or null, got "3"',
    ),
    (
        "blocks an int",
        edit("options.blocks", 3),
        f"{X}: options.blocks: expected a str or null, got 3",
    ),
    (
        "compiled a str",
        edit("options.compiled", "yes"),
        f'{X}: options.compiled: expected a bool, got "yes"',
    ),
    ("target null", edit("options.target", None), f"{X}: options.target: expected a str, got null"),
]


@pytest.mark.parametrize("case,change,message", BAD_V3, ids=[c[0] for c in BAD_V3])
def test_bad_v3_options(case, change, message):
    with pytest.raises(ExportError) as info:
        NodeExport.from_dict(change(export_doc_v3()), where=X)
    assert str(info.value) == message


def test_v3_document_round_trips_its_options():
    e = NodeExport.from_dict(export_doc_v3(), where=X)
    assert e.to_dict()["options"] == export_doc_v3()["options"]
    for depth in (2, None):  # a depth cut, and no module scopes at all
        doc = export_doc_v3()
        doc["options"]["module_depth"] = depth
        assert NodeExport.from_dict(doc, where=X).options["module_depth"] == depth


def test_valid_export_document_reads():
    # The table's base document is valid, so each row fails for its own change alone.
    e = NodeExport.from_dict(export_doc(), where=X)
    assert e.total == 3 and e.nodes[1]["programmatic_deps"] == [0]
    assert list(e.frame()["step"]) == ["topk", "pack", "copy"]
    # Without the optional keys (older version-1 files lack options).
    doc = export_doc()
    del doc["options"], doc["total_nodes"]
    assert NodeExport.from_dict(doc).options == {}


def test_export_round_trip_through_a_file(tmp_path):
    e = NodeExport.from_dict(export_doc())
    back = NodeExport.read_json(e.write_json(tmp_path / "nodes.json"))
    assert back.to_dict() == e.to_dict()


# (case, file bytes, exact message after "cannot read export <path>: ")
BAD_FILES = [
    ("not UTF-8", b'{"schema": "\xff"}', "not UTF-8 text (byte 0xff at offset 12)"),
    ("deeply nested", b"[" * 200_000 + b"]" * 200_000, "nested too deeply to read"),
    (
        "a 5000-digit number",
        b'{"rank": ' + b"7" * 5000 + b"}",
        f"a number has more digits than Python converts ({sys.get_int_max_str_digits()})",
    ),
    (
        "not JSON",
        b"{not json",
        "not JSON (Expecting property name enclosed in double quotes at line 1 column 2)",
    ),
    ("empty", b"", "not JSON (Expecting value at line 1 column 1)"),
]


@pytest.mark.parametrize("case,data,message", BAD_FILES, ids=[c[0] for c in BAD_FILES])
def test_bad_export_files(tmp_path, case, data, message):
    path = tmp_path / "nodes-x.json"
    path.write_bytes(data)
    with pytest.raises(ExportError) as info:
        NodeExport.read_json(path)
    assert str(info.value) == f"cannot read export {path}: {message}"


def test_export_file_errors_name_the_file(tmp_path):
    with pytest.raises(ExportError) as info:
        NodeExport.read_json(tmp_path / "missing.json")
    assert (
        str(info.value)
        == f"cannot read export {tmp_path / 'missing.json'}: No such file or directory"
    )
    with pytest.raises(ExportError) as info:
        NodeExport.read_json(tmp_path)
    assert str(info.value) == f"cannot read export {tmp_path}: it is a folder, not a file"
    path = tmp_path / "nodes-x.json"
    path.write_text(json.dumps(edit("nodes.1.step")(export_doc())))
    with pytest.raises(ExportError) as info:
        NodeExport.read_json(path)
    assert str(info.value) == f"{path}: nodes[1].step: expected a str, got null"


# --- DOT: names are text, never syntax ---------------------------------------------------------

DOT_LINE = re.compile(r'^  n\d+ \[label="((?:[^"\\]|\\.)*)"\];$|^  n\d+ -> n\d+;$')


def test_dot_quotes_every_name(tmp_path):
    doc = export_doc()
    doc["nodes"][0]["kernel"] = 'evil"]; n9 [label="x'
    doc["nodes"][1]["step"] = 'back\\slash "quoted"\nnext line'
    doc["nodes"][3]["type"] = 'memcpy"'
    e = NodeExport.from_dict(doc)
    text = e.write_dot(tmp_path / "g.dot").read_text().splitlines()
    assert text[:2] == ["digraph G {", "  rankdir=TB; node [shape=box, fontsize=9];"]
    assert text[-1] == "}"
    labels = []
    for line in text[2:-1]:
        m = DOT_LINE.match(line)
        assert m, f"not a node or edge line: {line!r}"
        if m.group(1) is not None:
            labels.append(
                re.sub(r"\\(.)", lambda c: {"n": "\n"}.get(c.group(1), c.group(1)), m.group(1))
            )
    # Unescaped, each label holds the names as they were.
    assert labels[0] == '0: kernel\nevil"]; n9 [label="x\nstage0/topk'
    assert labels[1] == '1: kernel\n_pack_flat_kernel\nstage0/back\\slash "quoted"\nnext line'
    assert labels[2] == '3: memcpy"\n\nstage0/copy'
    assert len(labels) == 3 and sum("->" in line for line in text) == 2  # 0 -> 1 -> 3


# --- replay documents -----------------------------------------------------------------------


R = "replay.json"
V1_HINT = (
    " (a version-1 replay document from before rounds were timed over builds: re-run "
    "`graph-harness replay` for a version-2 one)"
)
REPLAY_KEYS = (
    "schema, schema_version, env, created, params, options, chain_trials, fits, round_trials, "
    "savings, host_trials, host_fits"
)

BAD_REPLAYS = [
    (
        "version 4",
        edit("schema_version", 4),
        f"{R}: replay schema version 4 is not the supported 3 (or 1, 2); re-run `graph-harness "
        "replay`",
    ),
    (
        "version true",
        edit("schema_version", True),
        f"{R}: replay schema version true is not the supported 3 (or 1, 2); re-run "
        "`graph-harness replay`",
    ),
    (
        "version 2.0",
        edit("schema_version", 2.0),
        f"{R}: replay schema version 2.0 is not the supported 3 (or 1, 2); re-run "
        "`graph-harness replay`",
    ),
    (
        "not an object",
        lambda doc: [],
        f"{R}: not a graph-harness replay document: expected an object, got a list of 0",
    ),
    (
        "schema wrong",
        edit("schema", "x"),
        f"{R}: not a graph-harness replay document (schema \"x\", expected 'graph-harness/replay')",
    ),
    (
        "v2 without builds",
        edit("round_trials.0.build", delete=True),
        f"{R}: round_trials[0]: missing key 'build'",
    ),
    (
        "v1 without builds",
        lambda doc: edit("schema_version", 1)(edit("round_trials.0.build", delete=True)(doc)),
        f"{R}: round_trials[0]: missing key 'build'" + V1_HINT,
    ),
    (
        "v1 without saving intervals",
        lambda doc: edit("schema_version", 1)(edit("savings.0.measured_lo", delete=True)(doc)),
        f"{R}: savings[0]: missing key 'measured_lo'" + V1_HINT,
    ),
    (
        "us a str",
        edit("chain_trials.0.us", "fast"),
        f'{R}: chain_trials[0].us: expected a number, got "fast"',
    ),
    (
        "us a 5000-digit int",
        edit("chain_trials.0.us", BIG),
        f"{R}: chain_trials[0].us: expected a number in float range, got an integer of "
        f"{BIG_BITS} bits",
    ),
    (
        "calls zero",
        edit("chain_trials.1.calls", 0),
        f"{R}: chain_trials[1].calls: expected an int >= 1, got 0",
    ),
    (
        "build a float",
        edit("round_trials.2.build", 1.0),
        f"{R}: round_trials[2].build: expected an int >= 0, got 1.0",
    ),
    (
        "slope a bool",
        edit("fits.0.slope", True),
        f"{R}: fits[0].slope: expected a number, got true",
    ),
    (
        "variant null",
        edit("round_trials.0.variant"),
        f"{R}: round_trials[0].variant: expected a str, got null",
    ),
    (
        "removed_by_type not JSON",
        edit("savings.0.removed_by_type", "{"),
        f"{R}: savings[0].removed_by_type: expected a JSON object of node type -> int (e.g. "
        f'{{"kernel": 216}}), got "{{"',
    ),
    (
        "removed_by_type of floats",
        edit("savings.0.removed_by_type", '{"kernel": 1.5}'),
        f"{R}: savings[0].removed_by_type: expected a JSON object of node type -> int (e.g. "
        f'{{"kernel": 216}}), got "{{\\"kernel\\": 1.5}}"',
    ),
    ("fits missing", edit("fits", delete=True), f"{R}: missing key 'fits'"),
    ("unknown key", edit("x", 1), f'{R}: unknown key "x" (expected keys: {REPLAY_KEYS})'),
    (
        "unknown column",
        edit("fits.0.slop", 1.0),
        f'{R}: fits[0]: unknown key "slop" (expected keys: kind, slope, intercept, slope_lo, '
        "slope_hi, intercept_lo, intercept_hi, r2, points)",
    ),
    ("chain_trials null", edit("chain_trials"), f"{R}: chain_trials: expected a list, got null"),
    (
        "round_trials of ints",
        edit("round_trials", [1]),
        f"{R}: round_trials[0]: expected an object, got 1",
    ),
    (
        "options nested",
        edit("options.pdl", [1]),
        f"{R}: options.pdl: expected a str, number, bool or null, got a list of 1",
    ),
    ("env null", edit("env"), f"{R}: env: expected an object, got null"),
    ("params a str", edit("params", "x"), f'{R}: params: expected an object or null, got "x"'),
]


@pytest.mark.parametrize("case,change,message", BAD_REPLAYS, ids=[c[0] for c in BAD_REPLAYS])
def test_bad_replay_documents(case, change, message):
    doc = change(replay_doc())
    with pytest.raises(ReplayDocumentError) as info:
        ReplayResult.from_dict(doc, where=R)
    assert str(info.value) == message
    assert isinstance(info.value, ExportError), "the CLI maps the whole family to exit 2"


def test_replay_documents_read():
    r = ReplayResult.from_dict(replay_doc())
    assert list(r.round_trials.columns) == ["variant", "build", "trial", "us"]
    assert r.savings.ratio_shapes.isna().all() and r.fits.slope[0] == 0.9
    # A version-1 file with version 2's content (every one written since builds) is read;
    # version 1 called the savings' removed nodes delta_nodes and delta_by_type.
    old = {"removed_nodes": "delta_nodes", "removed_by_type": "delta_by_type"}
    doc = replay_doc()
    doc = dict(
        doc,
        schema_version=1,
        savings=[{old.get(k, k): v for k, v in r.items()} for r in doc["savings"]],
    )
    v1 = ReplayResult.from_dict(doc)
    pd.testing.assert_frame_equal(v1.round_trials, r.round_trials)
    pd.testing.assert_frame_equal(v1.savings, r.savings)
    # Empty tables keep their columns; absent rounds stay absent.
    empty = ReplayResult.from_dict(
        dict(replay_doc(), chain_trials=[], round_trials=None, savings=None)
    )
    assert list(empty.chain_trials.columns) == ["kind", "calls", "nodes", "trial", "us"]
    assert empty.round_trials is None and empty.savings is None


def test_replay_round_trip_through_a_file(tmp_path):
    r = ReplayResult.from_dict(replay_doc())
    path = r.write_json(tmp_path / "replay.json")
    assert json.loads(path.read_text())["schema_version"] == 3
    back = ReplayResult.read_json(path)
    for name in ("chain_trials", "fits", "round_trials", "savings"):
        pd.testing.assert_frame_equal(getattr(back, name), getattr(r, name))


def test_replay_file_errors(tmp_path):
    path = tmp_path / "replay.json"
    path.write_bytes(b"\xc3\x28")
    with pytest.raises(ReplayDocumentError) as info:
        ReplayResult.read_json(path)
    assert (
        str(info.value)
        == f"cannot read replay document {path}: not UTF-8 text (byte 0xc3 at offset 0)"
    )
    path.write_text(json.dumps(edit("fits.0.r2", "x")(replay_doc())))
    with pytest.raises(ReplayDocumentError) as info:
        ReplayResult.read_json(path)
    assert str(info.value) == f'{path}: fits[0].r2: expected a number, got "x"'


def test_shipped_replay_document_reads():
    # The version-1 document in docs/data was written after builds: it reads as it is.
    r = ReplayResult.read_json("docs/data/replay-2026-11-30-builds.json")
    assert set(r.round_trials.build) == {0, 1, 2, 3, 4} and len(r.savings) == 4
    assert (r.savings.removed_nodes > 0).all()  # shipped -> fused and co. remove nodes


def test_documents_with_python_values():
    # from_dict also sees Python objects (a gathered export): a copy is not shared.
    doc = export_doc()
    e = NodeExport.from_dict(copy.deepcopy(doc))
    e.nodes[1]["deps"].append(2)
    assert doc["nodes"][1]["deps"] == [0]
    with pytest.raises(ExportError) as info:
        NodeExport.from_dict(edit("env.device", object())(doc), where=X)
    assert str(info.value) == f"{X}: env.device: expected a str, number, bool or null, got a object"


def test_not_measured_is_null_in_the_file_and_nan_in_the_frame(tmp_path):
    # A saving the real-shape chains did not price is NaN in the frame; the file must stay
    # JSON every parser reads (bare NaN is not), so it is written as null and read back.
    r = ReplayResult.from_dict(replay_doc())
    assert r.savings.predicted_shapes_us.isna().all()
    path = r.write_json(tmp_path / "replay.json")
    text = path.read_text()
    assert "NaN" not in text and '"predicted_shapes_us": null' in text
    back = ReplayResult.read_json(path)
    assert back.savings.predicted_shapes_us.isna().all()
    assert back.savings.measured_us.tolist() == r.savings.measured_us.tolist()


def test_tables_go_out_as_plain_json_one_way():
    """Every document's tables (exports' deltas, replays, profiles) are written through
    one converter: numpy scalars at full precision, lists and tuples as lists, and each
    kind of missing value (NaN from numpy or Python, an infinity, pandas' NA, None) as
    null: bare NaN is not JSON."""
    import numpy as np
    import pandas as pd

    from graph_harness.capture.export.documents import frame_records

    third = 0.1 + 0.2  # 0.30000000000000004: to_json would round it away
    frame = pd.DataFrame(
        {
            "x": [np.float64(third), np.float64("nan"), float("inf")],
            "n": pd.array([1, None, 3], dtype="Int64"),
            "path": [["layers", "0"], ("a", np.int64(2)), []],
            "name": ["k", None, "m"],
        }
    )
    rows = frame_records(frame)
    assert rows == [
        {"x": third, "n": 1, "path": ["layers", "0"], "name": "k"},
        {"x": None, "n": None, "path": ["a", 2], "name": None},
        {"x": None, "n": 3, "path": [], "name": "m"},
    ]
    assert type(rows[0]["x"]) is float and type(rows[1]["path"][1]) is int
    assert json.loads(json.dumps(rows, allow_nan=False)) == rows
    assert frame_records(None) is None


def test_a_stage_at_the_end_of_int64_frames_as_itself():
    # A column of ints and Nones is float64 in pandas; through it 2**63 - 1, which every
    # check takes, is no int (hypothesis found `delta` failing there, exit 1).
    doc = export_doc()
    doc["nodes"][0]["stage"] = 2**63 - 1
    doc["nodes"][1]["stage"] = None
    frame = NodeExport.from_dict(doc).frame()
    assert frame["stage"].iloc[0] == 2**63 - 1 and frame["stage"].isna().iloc[1]
