"""Real graph dumps read back (capture/graph/dot_reader.py), on the CPU, against counts
made by other routes on the H200 (2026-12-02, driver 580.159.04, torch 2.11.0+cu130):

- tests/capture/graph/dumps/: benchmarks/experiments/dot_probe.py's graphs (kernels on 1-,
  2- and 3-D grids, every copy direction and a memset, events, stream-ordered allocation,
  a child graph held twice beside an empty node), each dumped under no flag, each flag
  alone and all of them; counts.json is an independent walk of each live graph
  (tests/independent.py's cuda-bindings calls);
- docs/data/dot-2026-12-02/: the HF example's step captured by graph-harness (its export)
  and that same capture dumped; the llama example, eager and compiled, captured by a plain
  torch.cuda.graph in a program `graph-harness record` ran (the recording) and dumped.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from graph_harness.capture.export.delta import node_delta
from graph_harness.capture.export.kinds import read_export
from graph_harness.capture.graph.dot_reader import read_dump
from graph_harness.reports.cli.program import main

REPO = Path(__file__).resolve().parents[3]
DUMPS = Path(__file__).parent / "dumps"
DATA = REPO / "docs" / "data" / "dot-2026-12-02"
WALKED = json.loads((DUMPS / "counts.json").read_text())
PROBES = sorted(DUMPS.glob("*.dot"))


def counters(nodes) -> tuple[Counter, Counter]:
    kinds = Counter(n["type"] for n in nodes)
    kernels = Counter(n["kernel"] for n in nodes if n["type"] == "kernel")
    return kinds, kernels


def test_every_probe_graph_was_dumped_under_every_flag():
    flags = json.loads((DUMPS / "flags.json").read_text())
    assert len(PROBES) == len(WALKED) * (len(flags) + 2)  # each flag, none and all


@pytest.mark.parametrize("path", PROBES, ids=[p.stem for p in PROBES])
def test_a_probe_dump_reads_as_the_independent_walk_counted(path):
    graph = path.stem.split("-", 1)[0]
    d = read_dump(path)
    kinds = Counter(n.kind for n in d.nodes)
    kernels = Counter(n.kernel for n in d.nodes if n.kind == "kernel")
    assert dict(kinds) == WALKED[graph]["kinds"]
    assert dict(kernels) == WALKED[graph]["kernels"]


def test_launch_geometry_where_the_dump_has_it():
    # grid3 was launched on a (2, 3, 4) grid of 128 threads; the 64x64 GEMM on (2, 2)
    for flags in ("all", "cudaGraphDebugDotFlagsKernelNodeParams"):
        d = read_dump(DUMPS / f"kernels-{flags}.dot")
        shapes = {n.kernel: (n.grid, n.block) for n in d.nodes}
        assert shapes["grid3"] == ((2, 3, 4), (128, 1, 1))
        gemm = next(k for k in shapes if "gemm" in k)
        assert shapes[gemm] == ((2, 2, 1), (64, 1, 1))
    assert all(n.grid is None for n in read_dump(DUMPS / "kernels-none.dot").nodes)


def test_a_child_held_twice_is_counted_twice_under_its_parent():
    d = read_dump(DUMPS / "children-none.dot")
    kinds = [n.kind for n in d.nodes]
    assert kinds == ["graph", "kernel", "kernel", "kernel"] * 2 + ["empty"]
    children = [n for n in d.nodes if n.kind == "graph"]
    assert all(n.parent in {c.handle for c in children} for n in d.nodes if n.kind == "kernel")
    empty = d.nodes[-1]
    assert sorted(empty.deps) == sorted(c.handle for c in children)  # joins both children


@pytest.mark.parametrize("flags", ["none", "verbose"])
def test_the_hf_steps_dump_reads_back_as_count_of_the_same_capture(flags):
    counted = read_export(DATA / "dumps" / "hf_decode-eager-export.json")
    dumped = read_export(DATA / "dumps" / f"hf_decode-eager-{flags}.dot")
    assert dumped.total == counted.total == 221
    assert counters(dumped.nodes) == counters(counted.nodes)
    # node for node: types, kernels and every edge; geometry where the dump has it
    assert [(t, k, d) for t, k, _, d in dumped.structure()] == [
        (t, k, d) for t, k, _, d in counted.structure()
    ]
    if flags == "verbose":
        assert [(n["grid"], n["block"]) for n in dumped.nodes] == [
            (n["grid"], n["block"]) for n in counted.nodes
        ]


def test_the_llama_examples_delta_is_the_same_from_dumps_and_from_recordings():
    plain = [DATA / "dumps" / f"llama_decode-{k}-plain-verbose.dot" for k in ("eager", "compiled")]
    dumps = [read_export(p) for p in plain]
    recorded = [read_export(DATA / r / "graph-0.json") for r in ("rec-llama", "rec-llama-compiled")]
    for d, r in zip(dumps, recorded):
        assert counters(d.nodes) == counters(r.nodes)
    by_dump, by_record = node_delta(*dumps), node_delta(*recorded)
    # the counts the two recordings hold: 436 nodes eager, 116 compiled
    assert [r.total for r in recorded] == [436, 116]
    assert by_dump.total_delta == by_record.total_delta == 116 - 436
    for table in ("by_type", "by_family"):
        assert getattr(by_dump, table).equals(getattr(by_record, table)), table
    cols = ["type", "kernel", "a", "b", "delta"]
    assert by_dump.by_kernel[cols].equals(by_record.by_kernel[cols])


@pytest.mark.smoke
def test_cli_count_of_a_dump_by_family(capsys):
    dump = DATA / "dumps" / "llama_decode-compiled-plain-none.dot"
    assert main(["count", str(dump), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (export,) = doc["exports"].values()
    assert export["total_nodes"] == 116 and export["options"]["dump_launch_geometry"] is False


def test_a_dumps_export_reads_back(tmp_path, capsys):
    dump = DATA / "dumps" / "hf_decode-eager-verbose.dot"
    assert main(["count", str(dump), "--out", str(tmp_path / "o")]) == 0
    (written,) = (tmp_path / "o").glob("nodes-*.json")
    back = read_export(written)  # what count wrote, read as any export
    assert back.to_dict()["nodes"] == read_export(dump).to_dict()["nodes"]
    assert back.options["dump_launch_geometry"] is True and back.options["dump_graphs"] == 1
    capsys.readouterr()
    assert main(["count", str(written)]) == 0  # and counted again from the file


def test_cli_report_of_two_dumps(tmp_path, capsys):
    eager = DATA / "dumps" / "llama_decode-eager-plain-none.dot"
    compiled = DATA / "dumps" / "llama_decode-compiled-plain-verbose.dot"
    out = tmp_path / "report"
    assert main(["report", "--graph", str(eager), "--graph", str(compiled), "--out", str(out)]) == 0
    md = (out / "report.md").read_text()
    assert "A block of 53 nodes repeats 8 times from node 3" in md
    assert "436" in md and "116" in md and "device: not recorded" in md
    fams = (out / "delta_by_family.csv").read_text()
    assert "ATen elementwise,351,0,-351" in fams
    # flags that capture are refused, nothing written
    assert (
        main(["report", "--graph", str(eager), "--target", "x:y", "--out", str(tmp_path / "n")])
        == 2
    )
    assert not (tmp_path / "n").exists()


def test_a_reports_rows_that_differ_with_none_says_so(tmp_path, capsys):
    # issue 44, 14: report.md printed a table's header over no row
    dump = DATA / "dumps" / "hf_decode-eager-none.dot"
    out = tmp_path / "report"
    assert main(["report", "--graph", str(dump), "--graph", str(dump), "--out", str(out)]) == 0
    md = (out / "report.md").read_text()
    assert "By kernel (rows that differ):\n\nNone differs.\n" in md


def test_cli_count_refuses_capture_flags_with_files(capsys):
    dump = str(DATA / "dumps" / "hf_decode-eager-none.dot")
    assert main(["count", dump, "--variant", "fused"]) == 2
    assert "--variant applies to a capture" in capsys.readouterr().err
    assert main(["count", dump, "--module-scopes"]) == 2


def test_a_byte_order_mark_is_read_and_an_empty_file_said(tmp_path):
    # issue 60, 5: a dump an editor saved with a UTF-8 BOM was refused; an empty one read
    # as "the file: not a DOT graph"
    from graph_harness.capture.graph.dot_reader import DotDumpError

    dump = PROBES[0]
    bom = tmp_path / "bom.dot"
    bom.write_bytes(b"\xef\xbb\xbf" + dump.read_bytes())
    assert len(read_dump(bom).nodes) == len(read_dump(dump).nodes)
    empty = tmp_path / "empty.dot"
    empty.write_bytes(b"\n")
    with pytest.raises(DotDumpError, match=r"empty.dot: the file is empty, not a DOT graph"):
        read_dump(empty)
