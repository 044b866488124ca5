"""Every input is data: names that look like rich markup, emoji codes or matplotlib math,
lone surrogates and huge integers print as text through every command that prints;
cost documents that would price with NaN, infinities or negative slopes are refused
naming the field. All in this process, through reports.cli.main."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.table import Table

from graph_harness.reports.cli.console import make_console
from graph_harness.reports.output.manifest import foreign_entries, read_manifest
from tests.capture.export.valid_documents import export_doc_v2, replay_doc
from tests.in_process import _run

REPO = Path(__file__).resolve().parents[3]
NAMES = ["[/]", "[bold]b[/bold]", "\udc80:smile:", "$x$ and $"]
SHOWN = ["[/]", "[bold]b[/bold]", "\\udc80:smile:", "$x$ and $"]  # as printed

MARKED = f"""
import torch
from graph_harness.capture import scope

def make():
    x = torch.ones(8)

    def step():
        y = x
        for name in {NAMES!r}:
            with scope(name):
                y = y + 1
        return y

    return step
"""


def test_names_print_as_text_through_every_command(tmp_path):
    (tmp_path / "marked.py").write_text(MARKED)
    code, out, err = _run(["count", "--target", "marked.py:make", "--out", "o"], tmp_path)
    assert code == 0, err
    for shown in SHOWN:
        assert shown in out, (shown, out)
    rows = [ln for ln in out.splitlines() if any(s in ln for s in SHOWN)]
    assert len({len(r) for r in rows}) == 1, "each row as wide as the table measured it"
    export = "./o/nodes-target.json"
    for argv in (
        ["delta", export, export],
        ["advise", export],
        ["delta", export, export, "--json"],
        ["advise", export, "--json"],
        ["count", "--target", "marked.py:make", "--json"],
    ):
        code, out, err = _run(argv, tmp_path)
        assert code == 0 and out, (argv, err)
        if "--json" in argv:
            json.loads(out)
        else:
            assert "[/]" in out or "nothing to fuse" in out, (argv, out)
    code, _, err = _run(
        ["report", "--target", "marked.py:make", "--target", "marked.py:make", "--out", "r"],
        tmp_path,
    )
    assert code == 0, err  # plots and markdown too: a surrogate or a `$` in a label
    md = (tmp_path / "r" / "report.md").read_text()
    assert "\\udc80:smile:" in md and "[/]" in md
    for folder in ("o", "r"):  # every file listed before it was made: nothing unlisted
        assert foreign_entries(tmp_path / folder) == [], folder
        assert (
            len(read_manifest(tmp_path / folder).files)
            == len(list((tmp_path / folder).iterdir())) - 1
        )


MODULES = """
import torch
from torch import nn

def make():
    model = nn.ModuleDict({"\\udc80a": nn.Linear(4, 4), "b": nn.Linear(4, 4)})
    x = torch.randn(2, 4)

    def step():
        return model["b"](model["\\udc80a"](x))

    step.module = model
    return step
"""


def _strings(v):
    if isinstance(v, str):
        yield v
    elif isinstance(v, list):
        for x in v:
            yield from _strings(x)
    elif isinstance(v, dict):
        for k, x in v.items():
            yield k
            yield from _strings(x)


def test_a_file_name_and_module_names_that_are_not_text_are_kept_as_escapes(tmp_path):
    """A file name with a byte that is not UTF-8 (Python holds it as a lone surrogate) and
    a module named with one: every export, table and report holds their backslash
    escapes, which any encoder takes (with pyarrow installed, pandas refused the raw ones
    and `report --target` exited 1 on the H200)."""
    name = os.fsdecode(b"st\xffp.py")  # "st\udcffp.py"
    (tmp_path / name).write_text(MODULES)
    spec = f"{name}:make"
    code, out, err = _run(
        ["count", "--target", spec, "--module-scopes", "all", "--out", "o"], tmp_path
    )
    assert code == 0, err
    assert "st\\udcffp.py:make" in out and "\\udc80a" in out
    raw = (tmp_path / "o" / "nodes-target.json").read_bytes()
    doc = json.loads(raw.decode("utf-8"))
    for s in _strings(doc):
        s.encode("utf-8")  # no lone surrogate anywhere in the document
    assert doc["workload"] == "st\\udcffp.py:make" and doc["options"]["target"] == doc["workload"]
    assert {n["scope"] for n in doc["nodes"]} == {"\\udc80a", "b"}
    for argv in (
        ["delta", "o/nodes-target.json", "o/nodes-target.json"],
        ["report", "--target", spec, "--module-scopes", "all", "--out", "r"],
    ):
        code, out, err = _run(argv, tmp_path)
        assert code == 0, (argv, err)
    assert "st\\udcffp.py:make" in (tmp_path / "r" / "report.md").read_text()


STATEFUL = """
import torch
from torch import nn

def make():
    model = nn.Sequential()
    model.add_module("l\\udc80", nn.Linear(4, 4))
    model.register_buffer("b\\udc85", torch.zeros(4))
    state = {"k\\udc81": torch.zeros(4)}
    x = torch.randn(2, 4)

    def step():
        state["k\\udc81"].add_(1)
        getattr(model, "b\\udc85").add_(1)
        return model(x)

    def reset():
        state["k\\udc81"].zero_()
        getattr(model, "b\\udc85").zero_()

    step.module, step.reset = model, reset
    return step

globals()["m\\udc86"] = make  # a FUNCTION no identifier spells, named from argv
"""


def test_every_document_written_holds_only_text(tmp_path, monkeypatch):
    """Names with lone surrogates from every side at once: the file's name, the FUNCTION,
    the output folder and the costs file (argv, as Python decodes non-UTF-8 bytes), a
    module's and a buffer's name, a dict key of the step's state. Every JSON document
    written or printed holds them as escapes (before: check.json's state names and
    check's name, the manifest's command and advise's costs source kept them raw), and
    `report` of that FUNCTION writes its report (before: exit 1 from pandas' Arrow)."""
    name = os.fsdecode(b"s\xfft.py")
    (tmp_path / name).write_text(STATEFUL)
    spec = f"{name}:" + "m\udc86"
    costs = os.fsdecode(b"c\xff.json")
    (tmp_path / costs).write_text(json.dumps(replay_doc()))
    out = os.fsdecode(b"o\xff")
    runs = [
        ["count", "--target", spec, "--module-scopes", "all", "--check", "--out", out],
        ["check", "--target", spec, "--json"],
        ["advise", f"{out}/nodes-target.json", "--costs", costs, "--json"],
        ["report", "--target", spec, "--module-scopes", "--out", "r"],
    ]
    printed = {}
    for argv in runs:
        monkeypatch.setattr("sys.argv", ["graph-harness", *argv])  # what the manifest records
        code, printed[argv[0]], err = _run(argv, tmp_path)
        assert code == 0, (argv, err)
        if "--json" in argv:
            docs = [json.loads(printed[argv[0]])]
        else:
            folder = tmp_path / argv[argv.index("--out") + 1]
            docs = [json.loads(p.read_bytes()) for p in folder.glob("*.json")]
            docs.append(json.loads((folder / ".graph-harness-manifest.json").read_bytes()))
        for doc in docs:
            for s in _strings(doc):
                s.encode("utf-8")  # raised UnicodeEncodeError: a lone surrogate
    check = json.loads((tmp_path / out / "check.json").read_text())["checks"]["target"]
    assert check["name"] == "s\\udcfft.py:m\\udc86"
    changed = {c["name"] for c in check["repeatability"]["in_a_call"]}
    assert changed == {"module buffer b\\udc85", "closure state.k\\udc81"}
    assert json.loads(printed["advise"])["costs"]["source"].startswith("costs from c\\udcff.json")
    report = tmp_path / "r"
    assert {"nodes-m\\udc86.json", "nodes-m\\udc86.csv"} <= {p.name for p in report.iterdir()}
    assert "l\\udc80" in (report / "report.md").read_text()


def test_a_lone_surrogate_in_a_document_reads_as_its_escape(tmp_path):
    """A JSON escape can make a str no encoder takes (\\udc80): read, it is its backslash
    escape, so every table, CSV and Arrow-backed pandas column can hold it (with pyarrow
    installed, pandas refused the raw one and `delta` failed with exit 1)."""
    from graph_harness.capture import NodeExport

    doc = export_doc_v2()
    for n in doc["nodes"]:
        n["kernel"] = "k\udc80" if n["kernel"] else None
    doc["workload"] = "w\ud800x"
    (tmp_path / "b.json").write_text(json.dumps(doc))
    assert "\\udc80" in (tmp_path / "b.json").read_text()  # the escape, as JSON holds it
    export = NodeExport.read_json(tmp_path / "b.json")
    kernels = {n["kernel"] for n in export.nodes if n["kernel"] is not None}
    assert kernels == {"k\\udc80"}  # backslash, u, d, c, 8, 0: six characters
    assert export.workload == "w\\ud800x"
    for name in (*kernels, export.workload):
        name.encode("utf-8")  # raised UnicodeEncodeError before


def test_documents_with_odd_names_and_huge_ints(tmp_path):
    doc = export_doc_v2()
    doc["workload"] = "[/]"
    doc["variant"] = None
    for n in doc["nodes"]:
        n["kernel"] = "[/]\udc80" if n["kernel"] else None
        n["stage"] = 2**63 - 1
    (tmp_path / "a.json").write_text(json.dumps(export_doc_v2()))
    (tmp_path / "b.json").write_text(json.dumps(doc))
    for argv in (
        ["delta", "./a.json", "./b.json"],
        ["delta", "./b.json", "./b.json", "--json"],
        ["delta", "./a.json", "./b.json", "--csv", "d.csv"],
        ["advise", "./b.json"],
        ["advise", "./b.json", "--json"],
    ):
        code, out, err = _run(argv, tmp_path)
        assert code == 0 and out, (argv, err)
    assert "[/]\\udc80" in (tmp_path / "d.csv").read_text()


def test_the_console_prints_cells_and_titles_as_text():
    console = make_console(width=80, file=__import__("io").StringIO())
    t = Table(title="[red]title[/red] [/]")
    t.add_column("[bold]col")
    t.add_row(":smile: [/] \udc80")
    console.print(t)
    console.print("[/] plain")
    text = console.file.getvalue()
    assert "[red]title[/red] [/]" in text and "[bold]col" in text
    assert ":smile: [/] \\udc80" in text and "[/] plain" in text


BAD_SLOPES = [
    ("NaN", float("nan")),
    ("inf", float("inf")),
    ("-inf", float("-inf")),
    ("null", None),
    ("1e308", 1e308),
    ("negative", -0.5),
    ("zero", 0.0),
]


@pytest.mark.parametrize("case,slope", BAD_SLOPES, ids=[c for c, _ in BAD_SLOPES])
def test_cost_documents_that_cannot_price(tmp_path, case, slope):
    doc = replay_doc()
    doc["fits"][0]["slope"] = slope
    (tmp_path / "costs.json").write_text(json.dumps(doc))  # NaN and inf as Python writes them
    (tmp_path / "nodes.json").write_text(json.dumps(export_doc_v2()))
    for flags in ([], ["--json"]):
        code, out, err = _run(["advise", "./nodes.json", "--costs", "costs.json", *flags], tmp_path)
        assert code == 2 and out == "" and err.count("\n") == 1, (case, err)
        assert re.search(r"fits\[0\]\.slope: expected a", err), err


def test_cost_documents_with_odd_measurements(tmp_path):
    (tmp_path / "nodes.json").write_text(json.dumps(export_doc_v2()))
    for field, value, says in (
        ("savings.0.measured_us", 1e308, "savings[0].measured_us: expected us per round"),
        ("env.torch", float("nan"), "env.torch: expected a finite number"),
    ):
        doc = replay_doc()
        where, key = doc, field.split(".")
        for k in key[:-1]:
            where = where[int(k) if k.isdigit() else k]
        where[key[-1]] = value
        (tmp_path / "costs.json").write_text(json.dumps(doc))
        code, out, err = _run(["advise", "./nodes.json", "--costs", "costs.json"], tmp_path)
        assert code == 2 and says in err and out == "", (field, err)


EVIL = "\x1b]0;TITLE\x07\x1b]52;c;ZWNobyBwd25lZA==\x07\x1b[2K\x1b[1A\x1b[2Kfake\u202egnp.exe"


def test_a_document_cannot_drive_the_terminal(tmp_path):
    """A kernel, step and workload name holding a window title, a clipboard write (OSC 52),
    erase-and-rewrite sequences and a bidirectional override, printed by `delta` and
    `advise` on a real terminal (a pseudo-terminal), and into a CSV: every one shows as its
    escape; no byte of it reaches the terminal raw (rich's own styles still do)."""
    from tests.command_line import _cmd, terminal_env

    doc = export_doc_v2()
    for n in doc["nodes"]:
        n["kernel"] = EVIL if n["kernel"] else None
    doc["nodes"][0]["step"] = EVIL
    doc["workload"] = EVIL
    evil = tmp_path / "evil.json"
    evil.write_text(json.dumps(doc))
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps(export_doc_v2()))
    for argv in (
        ["delta", str(evil), str(plain), "--csv", str(tmp_path / "d.csv")],
        ["advise", str(evil)],
    ):
        master, slave = os.openpty()
        try:
            p = subprocess.run(
                _cmd() + argv, stdin=slave, stdout=slave, stderr=slave, timeout=300,
                env=terminal_env(cpu=True),
            )  # fmt: skip
        finally:
            os.close(slave)
        got = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: nothing more
                break
            if not chunk:
                break
            got += chunk
        os.close(master)
        text = got.decode("utf-8", "replace")
        assert p.returncode == 0, text[-2000:]
        assert "\x1b[" in text  # a terminal: rich styled it
        for raw in ("\x1b]", "\x07", "\x1b[2K", "\x1b[1A", "\u202e"):
            assert raw not in text, (argv[0], raw, text[-1500:])
        assert "\\x1b]0;TITLE\\x07" in text and "\\u202e" in text, text[-1500:]
    csv = (tmp_path / "d.csv").read_text()
    assert "\x1b" not in csv and "\\x1b]52;c;" in csv


def test_a_cost_document_with_two_fits_of_one_kind_is_refused(tmp_path):
    # before: the second torch-add fit (500 us/node) silently priced every kernel node
    doc = replay_doc()
    doc["fits"].append(dict(doc["fits"][0], slope=500.0, slope_lo=499.0, slope_hi=501.0))
    (tmp_path / "costs.json").write_text(json.dumps(doc))
    (tmp_path / "nodes.json").write_text(json.dumps(export_doc_v2()))
    code, out, err = _run(["advise", "./nodes.json", "--costs", "costs.json"], tmp_path)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    kind = doc["fits"][0]["kind"]
    assert f"fits[{len(doc['fits']) - 1}].kind: expected each chain kind once" in err, err
    assert repr(kind) in err and "500 us/node" in err


def test_names_are_never_highlighted():
    # issue 44, 3: rich's default highlighter coloured parts of names (numbers, quotes,
    # addresses), and its repr rules are quadratic on a long word (26 s for 64,000
    # characters in `delta`'s tables)
    import io

    console = make_console(io.StringIO(), width=80)
    for name in ("layers.12 'attention' 0x1f True", "x" * 64_000):
        assert console.render_str(name).spans == [], name[:40]


def test_csv_never_replaces_an_input_or_a_manifest(tmp_path, capsys):
    # issue 44, 6: `delta A.json B.json --csv A.json` replaced the export with CSV
    from graph_harness.reports.cli.program import main
    from graph_harness.reports.output.manifest import MANIFEST

    dump = REPO / "docs" / "data" / "dot-2026-12-02" / "dumps" / "hf_decode-eager-none.dot"
    a, b = tmp_path / "a.dot", tmp_path / "b.dot"
    a.write_bytes(dump.read_bytes())
    b.write_bytes(dump.read_bytes())
    before = a.read_bytes()
    for target in (a, tmp_path / "." / "b.dot"):
        assert main(["delta", str(a), str(b), "--csv", str(target)]) == 2
        assert "which this run reads" in capsys.readouterr().err
    assert a.read_bytes() == before and b.read_bytes() == before
    assert main(["delta", str(a), str(b), "--csv", str(tmp_path / MANIFEST)]) == 2
    assert "manifest" in capsys.readouterr().err and not (tmp_path / MANIFEST).exists()
    assert main(["delta", str(a), str(b), "--csv", str(tmp_path / "d.csv")]) == 0
    # issue 60, 4: inside an output folder (its manifest), a file of its or a new one
    out = tmp_path / "round"
    (out / "plots").mkdir(parents=True)
    (out / MANIFEST).write_text("{}")
    (out / "nodes-fused.json").write_text("the export")
    link = tmp_path / "link.csv"
    link.symlink_to(out / "nodes-fused.json")
    for target in (out / "nodes-fused.json", out / "plots" / "new.csv", link):
        assert main(["delta", str(a), str(b), "--csv", str(target)]) == 2
        assert "a graph-harness output folder" in capsys.readouterr().err
    assert (out / "nodes-fused.json").read_text() == "the export"
    assert sorted(p.name for p in out.iterdir()) == [MANIFEST, "nodes-fused.json", "plots"]


def test_raw_c1_controls_in_a_document_never_reach_a_csv(tmp_path, capsys):
    # issue 44, 4: JSON allows U+0080-U+009F unescaped; U+009B is CSI to a terminal that
    # reads 8-bit controls, and `delta --csv -` wrote it raw
    import json

    from graph_harness.reports.cli.program import main

    doc = export_doc_v2()
    doc["nodes"][0]["kernel"] = "evil\u009b31mname\u009d0;t"  # no C0: its escape is caught
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    b.write_text(json.dumps(export_doc_v2()), encoding="utf-8")
    assert "\u009b" in a.read_text(encoding="utf-8")  # raw in the file, as JSON allows
    for where in ("-", str(tmp_path / "d.csv")):
        assert main(["delta", str(a), str(b), "--csv", where]) == 0
        out = capsys.readouterr().out if where == "-" else (tmp_path / "d.csv").read_text()
        assert "\u009b" not in out and "\u009d" not in out and "\\x9b31mname" in out, where


def test_a_rows_that_differ_table_with_none_says_so(capsys, monkeypatch):
    # issue 44, 14: an empty "rows that differ" table printed with no row at all
    from graph_harness.reports.cli.program import main

    monkeypatch.setenv("COLUMNS", "240")  # wide enough that no cell or title wraps

    dump = REPO / "docs" / "data" / "dot-2026-12-02" / "dumps" / "hf_decode-eager-none.dot"
    assert main(["delta", str(dump), str(dump)]) == 0
    out = capsys.readouterr().out
    assert "by kernel (rows that differ)" in out and "(none differs)" in out


def test_csv_to_a_descriptor_open_for_reading_is_refused_before_the_tables(tmp_path):
    # issue 60, 5: `delta --csv /dev/stdin` printed the tables, then a raw EBADF (stdin a
    # pipe: its read end)
    from tests.command_line import _cmd, _env

    dump = REPO / "docs" / "data" / "dot-2026-12-02" / "dumps" / "hf_decode-eager-none.dot"
    r = subprocess.run(
        [*_cmd(), "delta", str(dump), str(dump), "--csv", "/dev/stdin"],
        input="", capture_output=True, text=True, timeout=300, env=_env(),
    )  # fmt: skip
    assert r.returncode == 2 and r.stdout == "", (r.stdout[-300:], r.stderr)
    assert "/dev/stdin: descriptor 0 is open for reading only" in r.stderr, r.stderr


@pytest.mark.parametrize(
    "flags, says",
    [
        (["--seed", "99999999999999999999999"], "--seed: expected a whole number from 0 to"),
        (["--rows", "99999999999999999999999"], "--rows: expected a whole number from 1 to"),
        (["--world", "4611686018427387904"], "--world: expected a whole number from 1 to"),
        (["--stages", "1_0"], "--stages: expected a whole number"),
        (["--seed", " 3"], "--seed: expected a whole number"),
        (["--k", "\u0661"], "--k: expected a whole number"),
    ],
)
@pytest.mark.parametrize("command", [["count"], ["delta", "shipped", "fused"]])
def test_a_round_flag_past_its_range_is_refused_before_any_work(tmp_path, command, flags, says):
    # before: int() took them, and a seed past 64 bits or a 10**23-row round failed with
    # exit 1 after "capturing shipped ..."
    argv = [sys.executable, "-m", "graph_harness", *command, *flags]
    r = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stdout == "" and says in r.stderr, r.stderr
    assert "capturing" not in r.stderr and list(tmp_path.iterdir()) == []
