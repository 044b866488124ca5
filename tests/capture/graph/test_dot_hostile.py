"""A graph dump that is not one, on the CPU (capture/graph/dot_syntax.py, dot_reader.py):
truncated, garbled, nested past any stack, expanding past any memory, holding itself,
naming with control characters. Each is refused in one line naming the file (exit 2 on
the command line), never read in part; a name is text. Real dumps read back against live
counts are test_dot_reader.py's."""

from __future__ import annotations

import pytest

from graph_harness.capture.export.documents import ExportError
from graph_harness.capture.export.kinds import read_export
from graph_harness.capture.graph import dot_reader
from graph_harness.capture.graph.dot_labels import record_fields
from graph_harness.capture.graph.dot_reader import MAX_NODES, dump_of
from graph_harness.capture.graph.dot_syntax import DotSyntaxError
from graph_harness.reports.cli.program import main


def kernel(graph: int, k: int, name: str, geometry: str = "1,128,0") -> str:
    """A kernel node as a verbose dump writes one."""
    return (
        f'"graph_{graph}_node_{k}"[style="bold" shape="record" label="{{KERNEL\n'
        f"| {{ID | {k} (topoId: {k}) | {name}\\<\\<\\<{geometry}\\>\\>\\>}}\n"
        f'| {{priority | 0}}\n}}"];\n'
    )


def child(graph: int, k: int, held: int) -> str:
    """A child graph node as a dump writes one (any flags)."""
    label = f"{k}\ngraph_{held}\n"
    return f'"graph_{graph}_node_{k}"[style="solid" shape="rectangle" label="{label}"];\n'


def cluster(graph: int, body: str) -> str:
    return f'subgraph cluster_{graph} {{\nlabel="graph_{graph}" graph[style="dashed"];\n{body}}}\n'


def dump(*clusters: str) -> str:
    return "digraph dot {\n" + "".join(clusters) + "}\n"


GOOD = dump(
    cluster(
        1,
        kernel(1, 0, "_Z3addPf")
        + kernel(1, 1, "triton_poi_fused_0", "\\{2,3,4\\},\\{32,4\\},0")
        + '"graph_1_node_0" -> "graph_1_node_1" [headlabel=0];\n',
    )
)


def test_a_good_dump_reads_and_every_cut_of_it_is_refused(tmp_path):
    d = dump_of(GOOD)
    assert [(n.kind, n.kernel, n.grid, n.block) for n in d.nodes] == [
        ("kernel", "_Z3addPf", (1, 1, 1), (128, 1, 1)),
        ("kernel", "triton_poi_fused_0", (2, 3, 4), (32, 4, 1)),
    ]
    assert d.nodes[1].deps == [d.nodes[0].handle]
    # no proper prefix of a dump is a dump: the last '}' closes it
    for cut in range(0, len(GOOD.rstrip()), 7):
        with pytest.raises(DotSyntaxError):
            dump_of(GOOD[:cut])


def test_a_truncated_file_is_one_line_and_exit_2(tmp_path, capsys):
    f = tmp_path / "cut.dot"
    f.write_text(GOOD[: len(GOOD) // 2])
    with pytest.raises(ExportError, match=r"cannot read graph dump .*cut\.dot: line \d+"):
        read_export(f)
    assert main(["count", str(f)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cut.dot" in err[0], err
    assert main(["delta", str(f), str(f)]) == 2


def test_garbled_bytes_and_other_files_are_refused(tmp_path):
    cases = {
        "bytes.dot": b"digraph dot {\xff\xfe}",
        "empty.dot": b"",
        "json.dot": b'{"schema": "graph-harness/nodes"}',
        "html.dot": b'digraph d { subgraph cluster_1 { label="graph_1"; a [label=<b>]; } }',
        "two.dot": (GOOD + GOOD).encode(),
        "nocluster.dot": b'digraph d { a [label="{KERNEL | k}"]; }',
        "notype.dot": dump(cluster(1, '"graph_1_node_0"[label="0\nWHATEVER\n"];\n')).encode(),
        "record.dot": dump(
            cluster(1, '"graph_1_node_0"[shape="record" label="{WHATEVER | x}"];\n')
        ).encode(),
        "geometry.dot": dump(cluster(1, kernel(1, 0, "k", "1,2"))).encode(),
        "edge.dot": dump(cluster(1, kernel(1, 0, "k") + '"graph_1_node_0" -> "x";\n')).encode(),
        "quote.dot": b'digraph d { subgraph cluster_1 { label="graph_1 } }',
    }
    for name, data in cases.items():
        f = tmp_path / name
        f.write_bytes(data)
        with pytest.raises(ExportError) as e:
            read_export(f)
        assert name in str(e.value) and "\n" not in str(e.value), (name, e.value)


def test_nesting_past_any_stack_is_refused_not_a_crash():
    deep = "digraph d {" + "subgraph {" * 100_000 + "}" * 100_001
    with pytest.raises(DotSyntaxError, match="nested more than"):
        dump_of(deep)
    with pytest.raises(DotSyntaxError, match="nested more than"):
        record_fields("{" * 100_000 + "}" * 100_000)


def test_a_child_graph_expansion_past_the_bound_is_refused_before_it_is_built(monkeypatch):
    # graph_k holds graph_{k+1} twice: 2**40 nodes from 80 lines
    levels = 40
    parts = [cluster(k, child(k, 0, k + 1) + child(k, 1, k + 1)) for k in range(1, levels)] + [
        cluster(levels, kernel(levels, 0, "k"))
    ]

    def never(*args, **kwargs):
        raise AssertionError("expanded before it was counted")

    monkeypatch.setattr(dot_reader, "_expand", never)
    with pytest.raises(DotSyntaxError, match=f"past {MAX_NODES:,}"):
        dump_of(dump(*parts))


def test_a_graph_that_holds_itself_is_refused():
    loop = dump(cluster(1, child(1, 0, 2)), cluster(2, child(2, 0, 3)), cluster(3, child(3, 0, 2)))
    with pytest.raises(DotSyntaxError, match="every graph is held|holds itself"):
        dump_of(loop)


def test_a_child_held_twice_counts_twice_and_names_stay_text(tmp_path):
    text = dump(
        cluster(1, child(1, 0, 2) + child(1, 1, 2)),
        cluster(2, kernel(2, 0, "bad\x1b[31mname\u202e")),
    )
    d = dump_of(text)
    assert [n.kind for n in d.nodes] == ["graph", "kernel", "graph", "kernel"]
    assert d.nodes[1].parent == d.nodes[0].handle and d.nodes[3].parent == d.nodes[2].handle
    (name,) = {n.kernel for n in d.nodes if n.kind == "kernel"}
    assert name.isprintable(), name  # the escape and the override kept as text


@pytest.mark.parametrize(
    "body, message",
    [
        (kernel(1, 0, "k") + '"graph_1_node_0" -> "graph_1_node_0";\n', "depends on itself"),
        (kernel(1, 0, "k") + kernel(1, 0, "k2"), "stated twice"),
        (
            kernel(1, 0, "a")
            + kernel(1, 1, "b")
            + '"graph_1_node_0" -> "graph_1_node_1";\n"graph_1_node_1" -> "graph_1_node_0";\n',
            "loop",
        ),
    ],
    ids=["self-edge", "stated twice", "cycle"],
)
def test_a_graph_that_is_no_dag_or_states_a_node_twice_is_refused(body, message):
    with pytest.raises(DotSyntaxError, match=message):
        dump_of(dump(cluster(1, body)))


def test_edges_across_graphs_and_graphs_no_one_holds_are_refused():
    across = dump(
        cluster(1, kernel(1, 0, "a") + child(1, 1, 2)),
        cluster(2, kernel(2, 0, "b")),
        '"graph_1_node_0" -> "graph_2_node_0";\n',
    )
    with pytest.raises(DotSyntaxError, match="within one graph"):
        dump_of(across)
    orphans = dump(
        cluster(1, kernel(1, 0, "a")), cluster(2, child(2, 0, 3)), cluster(3, child(3, 0, 2))
    )
    with pytest.raises(DotSyntaxError, match="reached from none"):
        dump_of(orphans)
    # an edge written twice is one dependency
    twice = dump(
        cluster(
            1, kernel(1, 0, "a") + kernel(1, 1, "b") + '"graph_1_node_0" -> "graph_1_node_1";\n' * 2
        )
    )
    d = dump_of(twice)
    assert d.nodes[1].deps == [d.nodes[0].handle]
