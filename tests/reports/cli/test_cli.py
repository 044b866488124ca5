"""The graph-harness console script, through the real entry point.

Every test here runs the CPU path (CUDA_VISIBLE_DEVICES="" in the child), so the suite
means the same on a GPU machine; the GPU paths are in the gpu-marked tests at the end.
Every --out case works in a sacrificial tree under tmp_path.
"""

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from graph_harness.capture.files import write_output
from tests.command_line import REPO, SMALL, _cmd, _env, run
from tests.snapshot import snapshot

MANIFEST = ".graph-harness-manifest.json"


def listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


# --- counting, streams, exit codes --------------------------------------------------------


@pytest.mark.smoke
def test_count_writes_exports(tmp_path):
    out = tmp_path / "run"
    r = run("count", *SMALL, "--variant", "shipped", "--variant", "fused", "--out", str(out))
    assert r.returncode == 0, r.stderr + r.stdout
    assert "cpu-dispatch" in r.stderr and "NOT graph nodes" in r.stderr  # the banner
    assert "CPU dispatch count" in r.stdout  # the table says what it counts too
    assert "shipped" in r.stdout and "fused" in r.stdout
    assert listing(out) == [
        MANIFEST,
        "graph-fused.dot",
        "graph-shipped.dot",
        "nodes-fused.json",
        "nodes-shipped.json",
    ]
    doc = json.loads((out / "nodes-fused.json").read_text())
    assert doc["source"] == "cpu-dispatch" and doc["params"]["stages"] == 2
    manifest = json.loads((out / MANIFEST).read_text())
    assert manifest["tool"] == "graph-harness" and manifest["complete"] is True
    assert manifest["files"] == [p for p in listing(out) if p != MANIFEST]
    assert "count" in manifest["command"] and "--out" in manifest["command"]


def test_replace_needs_force_and_replaces_only_ours(tmp_path):
    out = tmp_path / "run"
    assert run("count", *SMALL, "--variant", "shipped", "--out", str(out)).returncode == 0
    before = snapshot(tmp_path)
    r = run("count", *SMALL, "--variant", "fused", "--out", str(out))
    assert r.returncode == 2 and "pass --force to replace it" in r.stderr, r.stderr
    assert snapshot(tmp_path) == before
    r = run("count", *SMALL, "--variant", "fused", "--out", str(out), "--force")
    assert r.returncode == 0, r.stderr
    assert listing(out) == [MANIFEST, "graph-fused.dot", "nodes-fused.json"]
    assert listing(tmp_path) == ["run"], "no temporary or old folder left beside it"
    # a file the user put into our folder stops --force, and stays
    (out / "notes.txt").write_text("mine")
    before = snapshot(tmp_path)
    r = run("count", *SMALL, "--variant", "fused", "--out", str(out), "--force")
    assert r.returncode == 2 and "notes.txt, which it did not write" in r.stderr, r.stderr
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize(
    "where, why",
    [
        (".", "is the current folder"),
        ("..", "is a folder above the current one"),
        ("sub/..", "is the current folder"),
        ("HOME", "is your home folder"),
    ],
)
def test_force_never_touches_current_parent_or_home(tmp_path, where, why):
    # A sacrificial tree: tmp_path/home is $HOME, tmp_path/home/proj/work the current folder.
    home = tmp_path / "home"
    work = home / "proj" / "work"
    (work / "sub").mkdir(parents=True)
    (work / "data.txt").write_text("precious")
    (home / "other.txt").write_text("precious too")
    before = snapshot(tmp_path)
    target = str(home) if where == "HOME" else where
    r = run(
        "count", *SMALL, "--variant", "fused", "--out", target, "--force", cwd=work, HOME=str(home)
    )
    assert r.returncode == 2, r.stderr
    assert why in r.stderr and "--force" not in r.stderr.split(why)[1].split("give")[0]
    assert "PosixPath" not in r.stderr and "Errno" not in r.stderr
    assert snapshot(tmp_path) == before


def test_root_and_protected_paths_are_refused_without_touching_them(tmp_path, monkeypatch):
    from graph_harness.reports.output.folder import OutputRefused, plan_output

    monkeypatch.chdir(tmp_path)
    # `/` is only stat-ed by the check, which refuses before anything is written
    with pytest.raises(OutputRefused, match="is the root folder"):
        plan_output(Path("/"), force=True)


def test_foreign_folder_refused_even_with_force(tmp_path):
    foreign = tmp_path / "theirs"
    foreign.mkdir()
    (foreign / "thesis.tex").write_text("years of work")
    before = snapshot(tmp_path)
    for extra in ([], ["--force"]):
        r = run("count", *SMALL, "--variant", "fused", "--out", str(foreign), *extra)
        assert r.returncode == 2 and "did not write" in r.stderr, r.stderr
        assert "pass --force" not in r.stderr  # never invites --force where it would be refused
    assert snapshot(tmp_path) == before


def test_empty_folder_is_used(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    r = run("count", *SMALL, "--variant", "fused", "--out", str(empty))
    assert r.returncode == 0, r.stderr
    assert "nodes-fused.json" in listing(empty)


@pytest.mark.parametrize("kind", ["file", "link-to-file", "broken-link", "fifo"])
def test_non_folders_at_out_are_refused_before_any_work(tmp_path, kind):
    path = tmp_path / "out"
    if kind == "file":
        path.write_text("mine")
    elif kind == "link-to-file":
        (tmp_path / "f.txt").write_text("mine")
        path.symlink_to(tmp_path / "f.txt")
    elif kind == "broken-link":
        path.symlink_to(tmp_path / "nowhere")
    else:
        os.mkfifo(path)
    before = snapshot(tmp_path)
    # --target idle would fail the run if it got that far: refused first, it must not
    r = run("count", "--target", "tests.targets:idle", "--out", str(path), "--force")
    assert r.returncode == 2, r.stderr
    assert "capturing" not in r.stderr and "graph-harness |" not in r.stderr  # no work done
    assert str(path) in r.stderr and "PosixPath" not in r.stderr
    assert snapshot(tmp_path) == before


def test_link_to_folder_is_written_through(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    r = run("count", *SMALL, "--variant", "fused", "--out", str(link))
    assert r.returncode == 0, r.stderr
    assert link.is_symlink() and "nodes-fused.json" in listing(real)
    r = run("count", *SMALL, "--variant", "shipped", "--out", str(link), "--force")
    assert r.returncode == 0, r.stderr
    assert link.is_symlink() and "nodes-shipped.json" in listing(real)
    assert sorted(listing(tmp_path)) == ["link", "real"]


@pytest.mark.smoke
def test_stdout_is_results_stderr_is_the_rest():
    r = run("count", *SMALL, "--variant", "fused", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)  # nothing but the document on stdout
    assert doc["schema"] == "graph-harness/count"
    assert doc["exports"]["fused"]["variant"] == "fused"
    assert doc["exports"]["fused"]["total_nodes"] > 0
    assert "graph-harness |" in r.stderr and "capturing fused" in r.stderr


def test_json_is_the_same_as_the_files(tmp_path):
    r = run("count", *SMALL, "--variant", "fused", "--json", "--out", str(tmp_path / "o"))
    assert r.returncode == 0, r.stderr
    printed = json.loads(r.stdout)["exports"]["fused"]
    written = json.loads((tmp_path / "o" / "nodes-fused.json").read_text())
    assert printed == written


def test_piped_tables_are_not_cut():
    # Piped into a log, rich would squeeze the five-variant table into 80 columns and cut
    # headers and figures to "...".
    r = run("count", *SMALL)
    assert r.returncode == 0, r.stderr + r.stdout
    assert "\u2026" not in r.stdout, r.stdout
    assert all(h in r.stdout for h in ("direct-compaction", "select", "compaction")), r.stdout


def test_version_and_debug_anywhere():
    from importlib.metadata import version

    r = run("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"graph-harness {version('graph-harness')}"
    for args in (
        ["--debug", "count", "--target", "tests.targets:raising"],
        ["count", "--target", "tests.targets:raising", "--debug"],
    ):
        r = run(*args)
        assert r.returncode == 1 and "Traceback" in r.stderr, r.stderr


def test_count_usage_errors():
    r = run("count", "--variant", "fastest")
    assert r.returncode == 2 and "invalid choice" in r.stderr
    r = run("count", *SMALL[:-2], "--shard", "16")  # k=32 > shard=16
    assert r.returncode == 2 and "k=32 must be <= shard=16" in r.stderr
    assert "Traceback" not in r.stdout + r.stderr
    r = run("count", "--help")
    assert r.returncode == 0 and "--variant" in r.stdout and "IMPORTS AND RUNS" in r.stdout


@pytest.mark.parametrize(
    "flags, named",
    [
        (["--variant", "fused"], "--variant applies to the built-in round"),
        (["--stages", "2"], "--stages applies to the built-in round"),
        (["--pdl", "--world", "8"], "--world, --pdl apply to the built-in round"),
    ],
)
def test_flags_that_do_not_combine_are_refused(flags, named):
    r = run("count", "--target", "tests.targets:small_mlp", *flags)
    assert r.returncode == 2 and named in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_delta_between_files_and_variants(tmp_path):
    out = tmp_path / "run"
    r = run("count", *SMALL, "--variant", "shipped", "--variant", "fused", "--out", str(out))
    assert r.returncode == 0, r.stderr
    r = run(
        "delta",
        str(out / "nodes-shipped.json"),
        str(out / "nodes-fused.json"),
        "--csv",
        str(tmp_path / "d.csv"),
    )
    assert r.returncode == 0, r.stdout + r.stderr
    # two stages: the shipped pack's 10 dispatches become 1, the 2 copies go
    assert "shipped -> fused: -22 nodes/round (pack -18, copy -4)" in r.stdout
    assert "_pack_flat_kernel" in (tmp_path / "d.csv").read_text()
    r = run("delta", "shipped", "fused", "--from", str(out))
    assert r.returncode == 0 and "-22 nodes/round" in r.stdout, r.stderr
    r = run("delta", "shipped", "direct-compaction", *SMALL)  # counted now
    assert r.returncode == 0 and "-4 nodes/round (copy -4)" in r.stdout
    r = run("delta", "shipped", "fused", "--from", str(out), "--json")
    doc = json.loads(r.stdout)
    assert doc["total_delta"] == -22 and doc["sign"] == "b - a"
    assert {s["step"]: s["delta"] for s in doc["by_step"]}["pack"] == -18


def test_delta_names_and_paths(tmp_path):
    out = tmp_path / "run"
    assert run("count", *SMALL, "--variant", "fused", "--out", str(out)).returncode == 0
    # a file named like a variant, in the current folder: by name it is the variant
    shutil.copy(out / "nodes-fused.json", tmp_path / "shipped")
    r = run("delta", "shipped", "./shipped", *SMALL, cwd=tmp_path)
    assert r.returncode == 0 and "shipped -> fused: -22" in r.stdout, r.stderr
    r = run("delta", "nope", "fused")
    assert r.returncode == 2 and "neither a variant" in r.stderr and "./nope" in r.stderr
    r = run("delta", str(out / "nodes-fused.json"), str(out / "nodes-fused.json"), "--k", "8")
    assert r.returncode == 2 and "--k applies to variants only" in r.stderr
    r = run("delta", "fused", "fused", "--from", str(out), "--k", "8")
    assert r.returncode == 2 and "--k applies to counting" in r.stderr


def test_delta_errors(tmp_path):
    out = tmp_path / "run"
    run("count", *SMALL, "--variant", "fused", "--out", str(out))
    r = run("delta", "nope.json", "fused")
    assert r.returncode == 2 and "nope.json" in r.stderr
    doc = json.loads((out / "nodes-fused.json").read_text())
    (tmp_path / "v9.json").write_text(json.dumps(dict(doc, schema_version=9)))
    r = run("delta", str(out / "nodes-fused.json"), str(tmp_path / "v9.json"))
    assert r.returncode == 2 and "schema version 9" in r.stderr
    other = dict(doc, params=dict(doc["params"], k=16))
    (tmp_path / "k16.json").write_text(json.dumps(other))
    r = run("delta", str(out / "nodes-fused.json"), str(tmp_path / "k16.json"))
    assert r.returncode == 2 and "different parameters" in r.stderr
    (tmp_path / "broken.json").write_text("{")
    r = run("delta", str(tmp_path / "broken.json"), "fused", "--from", str(out))
    assert r.returncode == 2 and "broken.json" in r.stderr
    assert "Traceback" not in r.stdout + r.stderr


# --- single-file outputs -------------------------------------------------------------------


def test_csv_special_paths(tmp_path):
    r = run("delta", "shipped", "fused", *SMALL, "--csv", "-")
    assert r.returncode == 0 and "type,kernel,a,b,delta" in r.stdout, r.stderr
    assert not Path("-").exists()
    # a link is written through: the target gets the CSV, the link stays a link
    (tmp_path / "real.csv").write_text("old")
    (tmp_path / "link.csv").symlink_to(tmp_path / "real.csv")
    r = run("delta", "shipped", "fused", *SMALL, "--csv", str(tmp_path / "link.csv"))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "link.csv").is_symlink()
    assert (tmp_path / "real.csv").read_text().startswith("type,kernel")
    # a FIFO is written into, not replaced
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    r = run("delta", "shipped", "fused", *SMALL, "--csv", str(fifo))
    reader.join(timeout=60)
    assert r.returncode == 0 and got and got[0].startswith("type,kernel"), r.stderr
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    # a folder or a broken link is refused before any work
    for bad in (tmp_path, tmp_path / "dangling"):
        if bad != tmp_path:
            bad.symlink_to(tmp_path / "missing")
        r = run("delta", "shipped", "fused", *SMALL, "--csv", str(bad))
        assert r.returncode == 2 and str(bad) in r.stderr, r.stderr


def test_files_honour_the_umask(tmp_path):
    out = tmp_path / "o"
    r = run("count", *SMALL, "--variant", "fused", "--out", str(out), umask=0o027)
    assert r.returncode == 0, r.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o750
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in out.iterdir()}
    assert set(modes.values()) == {0o640}, modes
    r = run("delta", "shipped", "fused", *SMALL, "--csv", str(tmp_path / "d.csv"), umask=0o022)
    assert stat.S_IMODE((tmp_path / "d.csv").stat().st_mode) == 0o644


# --- --target --------------------------------------------------------------------------------


def test_target_callable(tmp_path):
    r = run("count", "--target", "tests.targets:small_mlp", "--out", str(tmp_path / "t"))
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads((tmp_path / "t" / "nodes-target.json").read_text())
    # named by its target, not by the closure the factory returned; the spec and the
    # warm-up it ran with recorded beside it
    assert doc["workload"] == "tests.targets:small_mlp" and doc["total_nodes"] == 2
    assert doc["options"]["target"] == "tests.targets:small_mlp" and doc["options"]["warmup"] == 3
    assert doc["options"]["module_depth"] is None  # no module scopes
    assert sorted({n["step"] for n in doc["nodes"] if n["type"] == "aten"}) == ["act", "matmul"]
    r = run("count", "--target", "tests.targets:not_callable")
    assert r.returncode == 2 and "returned int, not a callable" in r.stderr
    r = run("count", "--target", "no_such_module:f")
    assert r.returncode == 2 and "no module named 'no_such_module'" in r.stderr
    r = run("count", "--target", "justaname")
    assert r.returncode == 2 and "MODULE:FUNCTION" in r.stderr


LLAMA = str(REPO / "examples" / "llama_decode.py")


def test_target_with_module_scopes(tmp_path):
    # the example's tiny preset by module: every level recorded, the tables cut
    args = ["count", "--target", f"{LLAMA}:make_tiny_step", "--module-scopes"]
    r = run(*args, "2", "--json")
    assert r.returncode == 0, r.stderr
    (export,) = json.loads(r.stdout)["exports"].values()
    nodes = [n for n in export["nodes"] if n["type"] not in ("view", "alloc")]
    assert export["schema_version"] == 3 and len(nodes) == export["total_nodes"]
    assert export["workload"] == f"{LLAMA}:make_tiny_step"  # the target as typed (issue 44)
    opts = export["options"]
    assert opts["target"] == f"{LLAMA}:make_tiny_step" and opts["warmup"] == 3
    assert (opts["module_depth"], opts["blocks"], opts["block_depth"]) == (
        "every level",
        "layers",
        2,
    )
    scopes = {n["scope"] for n in nodes}
    assert {"layers.0", "layers.1.attention", "norm", "output", "tok_embeddings"} <= scopes
    # the ModuleList is a level of every eager path under it, as of a compiled one
    in_layers = [n["scope_path"] for n in nodes if n["scope"].startswith("layers.")]
    assert in_layers and all(
        p[0] == "layers" and p[1] in ("layers.0", "layers.1") for p in in_layers
    )
    unscoped = run("count", "--target", f"{LLAMA}:make_tiny_step", "--json")
    (plain,) = json.loads(unscoped.stdout)["exports"].values()
    assert plain["total_nodes"] == export["total_nodes"]  # scopes change no count
    # no DEPTH: one row per layer, and the table says how many nodes sit deeper
    deeper = sum(1 for n in nodes if len(n["scope_path"]) > 2)  # layers > layers.i > more
    r = run(*args, "--out", str(tmp_path / "deep"))
    assert r.returncode == 0, r.stderr
    assert "layers.1" in r.stdout and "layers.1.feed_forward" not in r.stdout
    assert f"{deeper} of {len(nodes)} nodes sit deeper than depth 2" in r.stdout
    assert "--module-scopes all shows every level" in r.stdout and deeper > 0
    assert "nodes by type and kernel" in r.stdout
    for absent in ("topk", "compaction", "vs None", "per round"):
        assert absent not in r.stdout, absent
    r = run(*args, "all")  # every level: nothing cut, nothing to say
    assert "layers.1.feed_forward" in r.stdout and "sit deeper" not in r.stdout
    # delta against the same step unscoped: the same total, every module on one side,
    # and one line on stderr that the two were scoped differently
    (tmp_path / "plain.json").write_text(json.dumps(plain))
    r = run("delta", str(tmp_path / "plain.json"), str(tmp_path / "deep" / "nodes-target.json"))
    assert r.returncode == 0, r.stderr
    assert "+0 nodes" in r.stdout and "by scope" in r.stdout and "(B)" in r.stdout
    # the two layers agree row for row: one row each, folded (capture/attribution/repeats.py)
    assert "layers.{0..1}.feed_forward.w2 (x2, each)" in r.stdout
    warned = [x for x in r.stderr.splitlines() if "scoped" in x]
    assert len(warned) == 1 and "without module scopes" in warned[0], r.stderr


def test_report_for_two_targets(tmp_path):
    out = tmp_path / "rep"
    r = run(
        "report",
        "--target",
        f"{LLAMA}:make_tiny_step",
        "--target",
        "tests.targets:tiny_llama_one_layer",
        "--module-scopes",
        "--out",
        str(out),
    )
    assert r.returncode == 0, r.stderr
    names = set(listing(out))
    for f in ("report.md", "totals.csv", "nodes_per_module.png", "delta_by_scope.csv"):
        assert f in names, names
    assert {"nodes-make_tiny_step.json", "nodes-tiny_llama_one_layer.json"} <= names
    md = (out / "report.md").read_text()
    assert "round parameters" not in md and "layers.1" in md and "## Delta" in md
    import csv

    rows = {r["scope"]: r for r in csv.DictReader((out / "delta_by_scope.csv").open())}
    assert int(rows["layers.1"]["b"]) == 0 and int(rows["layers.1"]["delta"]) < 0
    assert int(rows["layers.0"]["delta"]) == 0  # the layer both have is the same work
    # --force: an --out already held is said first, before torch's import (program.py)
    r = run("report", "--target", "tests.targets:small_mlp", "--trials", "3", "--out", str(out),
            "--force")  # fmt: skip
    assert r.returncode == 2 and "--trials applies to the built-in round" in r.stderr


def test_module_scopes_usage_errors():
    r = run("count", "--module-scopes", "2", *SMALL)
    assert r.returncode == 2 and "needs --target" in r.stderr
    r = run("count", "--target", "tests.targets:small_mlp", "--module-scopes", "0")
    assert r.returncode == 2 and "DEPTH must be an int >= 1" in r.stderr
    r = run("count", "--target", "tests.targets:small_mlp", "--module-scopes")
    assert r.returncode == 2 and "`step.module = model`" in r.stderr
    assert "Traceback" not in r.stderr


def test_compiled_target_on_the_cpu_is_refused_in_one_line():
    r = run("count", "--target", "tests.targets:compiled_mlp")
    assert r.returncode == 2, r.stdout + r.stderr
    lines = [x for x in r.stderr.splitlines() if "error" in x]
    assert len(lines) == 1 and "torch.compile" in lines[0] and "count it on a GPU" in lines[0]
    assert "Traceback" not in r.stderr and "non-infra" not in r.stderr
    assert "<closure" not in lines[0], lines[0]  # named as its reader would
    # with another target first, before that one runs at all (report --help's example)
    r = run(
        "report", "--target", "tests.targets:counting", "--target",
        "tests.targets:compiled_mlp", "--out", "never",
    )  # fmt: skip
    assert r.returncode == 2 and "count it on a GPU" in r.stderr, r.stderr
    assert "counting tests.targets:counting" not in r.stderr  # no progress: nothing ran


def test_target_from_a_file_path(tmp_path):
    f = tmp_path / "steps" / "mystep.py"
    f.parent.mkdir()
    f.write_text(
        "import torch\nfrom helper import N\n"
        "def make():\n    x = torch.ones(N)\n    return lambda: x.mul_(2)\n"
    )
    (tmp_path / "steps" / "helper.py").write_text("N = 8\n")  # a sibling import
    r = run("count", "--target", f"{f}:make")
    assert r.returncode == 0, r.stderr
    assert "mul" in r.stdout or json.loads(run("count", "--target", f"{f}:make", "--json").stdout)


def test_target_does_not_shadow_the_standard_library(tmp_path):
    # A profile.py in the current folder must not stand in for the standard library's.
    (tmp_path / "profile.py").write_text("raise SystemExit('the local profile.py ran')\n")
    (tmp_path / "mine.py").write_text(
        "import profile, torch\n"
        "assert hasattr(profile, 'Profile'), profile\n"
        "def make():\n    x = torch.ones(4)\n    return lambda: x.add_(1)\n"
    )
    r = run("count", "--target", "mine:make", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "local profile.py" not in r.stderr + r.stdout


def test_errors_in_the_users_code_exit_1_and_say_where():
    r = run("count", "--target", "tests.targets:raising")
    assert r.returncode == 1, r.stderr
    line = r.stderr.strip().splitlines()[-1]
    assert "ValueError: a bad shape in the user's step" in line
    assert "tests/targets.py:" in line and "--debug" in line and "Traceback" not in r.stderr
    r = run("count", "--target", "tests.targets:exiting")
    assert r.returncode == 1 and "called sys.exit(3)" in r.stderr, r.stderr
    r = run("count", "--target", "tests.targets:idle")
    assert r.returncode == 1 and "issued no work (0 nodes)" in r.stderr, r.stderr


@pytest.mark.parametrize("where", ["import", "factory"])
def test_a_target_that_closes_our_descriptors_is_said_and_leaves_nothing(tmp_path, where):
    # The bug (issue 44, 7): os.closerange(3, 1024) in a target closed the results' copy
    # of stdout and the output folder's lock: a raw traceback, and the hidden folder left.
    close = "    os.closerange(3, 1024)\n"
    (tmp_path / "closer.py").write_text(
        "import os\nimport torch\n"
        + (close.strip() + "\n" if where == "import" else "")
        + "def make():\n"
        + (close if where == "factory" else "")
        + "    x = torch.ones(4)\n    return lambda: x.add_(1)\n"
    )
    r = run("count", "--target", "closer.py:make", "--out", "o", cwd=tmp_path)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    (line,) = [x for x in r.stderr.splitlines() if ": error:" in x]
    assert "closed descriptors graph-harness holds" in line, line
    assert ("while importing" if where == "import" else "in its factory") in line, line
    assert set(listing(tmp_path)) <= {"__pycache__", "closer.py"}, listing(tmp_path)


# --- runs stopped, killed or raced ----------------------------------------------------


def _start_waiting(tmp_path, out, *extra):
    ready, go = tmp_path / "ready", tmp_path / "go"
    for p in (ready, go):
        p.unlink(missing_ok=True)
    proc = subprocess.Popen(
        [*_cmd(), "count", "--target", "tests.targets:waiting", "--out", str(out), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(GH_TEST_READY=str(ready), GH_TEST_GO=str(go)),
        # a suite run under nohup passes its ignored SIGHUP on, which graph-harness keeps
        # ignored (as it should): the run under test starts with the default
        preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 120
    while not ready.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the run never started its step"
        time.sleep(0.05)
    return proc, go


def test_a_keyboardinterrupt_the_step_raises_is_its_error_and_leaves_no_partial_output(tmp_path):
    # no Ctrl-C came: the step raised it (a real Ctrl-C is 130: tests/capture/graph/test_streams.py)
    out = tmp_path / "never"
    r = run("count", "--target", "tests.targets:interrupting", "--out", str(out))
    assert r.returncode == 1 and "interrupted" not in r.stderr, r.stderr
    (line,) = [x for x in r.stderr.splitlines() if ": error:" in x]
    assert "KeyboardInterrupt" in line and "targets.py" in line, line
    assert list(tmp_path.iterdir()) == [], "no output folder and no temporary one"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_signals_leave_nothing_partial_and_keep_the_old_output(tmp_path, sig):
    out = tmp_path / "o"
    assert run("count", *SMALL, "--variant", "fused", "--out", str(out)).returncode == 0
    before = snapshot(tmp_path)
    proc, _ = _start_waiting(tmp_path, out, "--force")
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + sig, err
    assert "no partial output" in err
    for p in ("ready",):
        (tmp_path / p).unlink()
    assert snapshot(tmp_path) == before


def test_a_killed_runs_leftover_is_reported_and_cleaned(tmp_path):
    out = tmp_path / "o"
    proc, _ = _start_waiting(tmp_path, out)
    proc.kill()
    proc.communicate(timeout=60)
    left = [p for p in tmp_path.iterdir() if p.name.endswith(".gh-partial")]
    assert len(left) == 1 and (left[0] / MANIFEST).is_file()
    # a folder that only looks like a leftover (no manifest) is reported, never removed
    lookalike = tmp_path / ".o.zzzz.gh-partial"
    lookalike.mkdir()
    (lookalike / "theirs.txt").write_text("keep")
    r = run("count", *SMALL, "--variant", "fused", "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert f"leftover of an interrupted run beside {out}: {left[0].name}" in r.stderr
    assert not left[0].exists()
    assert (lookalike / "theirs.txt").read_text() == "keep" and "not recognisably ours" in r.stderr


def test_a_folder_appearing_mid_run_is_never_replaced(tmp_path):
    out = tmp_path / "o"
    proc, go = _start_waiting(tmp_path, out)
    out.mkdir()
    (out / "theirs.txt").write_text("made while the run went on")
    go.touch()
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    assert "appeared while this run was going" in err
    assert listing(out) == ["theirs.txt"]
    kept = [p for p in tmp_path.iterdir() if p.name.startswith("o.graph-harness-")]
    assert len(kept) == 1 and str(kept[0]) in err
    assert "nodes-target.json" in listing(kept[0])


def test_two_concurrent_runs_never_overwrite_each_other(tmp_path):
    out = tmp_path / "o"
    proc, go = _start_waiting(tmp_path, out)
    r = run("count", "--target", "tests.targets:small_mlp", "--out", str(out))
    assert r.returncode == 0, r.stderr
    first = snapshot(out)
    go.touch()
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1 and "appeared while this run was going" in err, err
    assert snapshot(out) == first, "the first run's output is untouched"


def test_replace_is_a_swap_that_leaves_a_complete_output(tmp_path, monkeypatch):
    # Stop the process right after the swap, before the old output is removed: the path
    # holds the new complete output; the old sits in a hidden folder the next run cleans.
    from graph_harness.reports.output import commit as committing
    from graph_harness.reports.output import folder as output

    out = tmp_path / "o"
    with output.staged_output(out, False, command="first") as tmp:
        write_output(tmp / "a.txt", "old")
    monkeypatch.setattr(committing, "remove_listed", lambda *a: (_ for _ in ()).throw(SystemExit))
    with pytest.raises(SystemExit), output.staged_output(out, True, command="second") as tmp:
        write_output(tmp / "b.txt", "new")
    assert listing(out) == [MANIFEST, "b.txt"]
    monkeypatch.undo()
    notes = []
    with output.staged_output(out, True, command="third", say=notes.append) as tmp:
        write_output(tmp / "c.txt", "newer")
    assert listing(tmp_path) == ["o"] and listing(out) == [MANIFEST, "c.txt"]
    assert len(notes) == 1 and "removed it" in notes[0]


def test_renames_never_replace(tmp_path):
    from graph_harness.reports.output.renames import exchange, rename_noreplace

    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (b / "x").write_text("b's")
    with pytest.raises(FileExistsError):
        rename_noreplace(a, b)
    (tmp_path / "f").write_text("a file")
    with pytest.raises(FileExistsError):
        rename_noreplace(a, tmp_path / "f")
    exchange(a, b)
    assert listing(a) == ["x"] and listing(b) == []


# --- other commands ----------------------------------------------------------------------------


def test_replay_needs_cuda():
    r = run("--debug", "replay", "--trials", "3")
    assert r.returncode != 0 and "Traceback" in r.stderr and "NoGPU" in r.stderr
    r = run("replay", "--builds", "0")
    assert (
        r.returncode == 2
        and "expected a whole number from 1 to 100,000 in digits, got '0'" in r.stderr
    )


# Every command that measures what a GPU runs, on this machine without one: a usage error
# (exit 2) in one sentence saying what to use instead, before any work or output.
@pytest.mark.parametrize(
    "argv, why",
    [
        (["replay", "--trials", "3"], "replay times CUDA graph replays"),
        (["replay", "--variant", "fused", "--json"], "replay times CUDA graph replays"),
        (["profile"], "profile replays graphs under CUPTI"),
        (["profile", "--target", "tests.targets:small_mlp"], "profile replays graphs under CUPTI"),
    ],
)
def test_gpu_only_commands_without_a_gpu_are_usage_errors(tmp_path, argv, why):
    out = tmp_path / "out"
    r = run(*argv, "--out", str(out))
    assert r.returncode == 2, r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert line == (
        f"graph-harness {argv[0]}: error: no GPU here: {why}, which " + line.split(", which ", 1)[1]
    )
    assert line.endswith("(use `graph-harness count` for CPU dispatch counts)")
    assert r.stdout == "" and not out.exists()


def test_checks_replay_part_without_a_gpu_is_said_not_failed(tmp_path):
    """check on the CPU: the warm-ups' part runs and passes (exit 0), and the replay
    comparison, which needs a GPU, is said to, once, in the verdict."""
    r = run("check", "--target", "tests.targets:small_mlp", "--out", str(tmp_path / "c"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("the replay comparison needs a GPU") == 1
    (check,) = json.loads((tmp_path / "c" / "check.json").read_text())["checks"].values()
    assert check["passed"] is True and check["compared"] is False
    assert "the replay comparison needs a GPU" in check["why_not"]


def test_count_distributed_without_torchrun_is_a_usage_error():
    r = run("count", "--distributed", *SMALL[:2])
    assert r.returncode == 2, r.stderr
    line = r.stderr.strip().splitlines()[-1]
    assert line.startswith("graph-harness count: error: no process group: ")
    assert "torchrun --nproc-per-node N" in line and "--debug" not in line


def test_report_on_cpu(tmp_path):
    out = tmp_path / "report"
    r = run("report", *SMALL, "--out", str(out), "--trials", "5")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "--trials not used: without a CUDA device" in r.stderr
    names = set(listing(out))
    assert {
        MANIFEST,
        "report.md",
        "totals.csv",
        "nodes_per_stage.png",
        "waterfall_nodes.png",
        "nodes-shipped.json",
        "nodes-fused.json",
        "delta_by_kernel.csv",
    } <= names
    md = (out / "report.md").read_text()
    assert "cpu-dispatch" in md and "Not measured: no CUDA device" in md
    assert "`shipped -> fused: -22 nodes/round (pack -18, copy -4)`" in md
    assert "## The seed, side by side" in md  # its rows: tests/capture/round/test_seed.py
    assert "| shipped pack, kernels per call | 8 | " in md
    for png in ("nodes_per_stage.png", "waterfall_nodes.png"):
        data = (out / png).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    assert run("report", *SMALL, "--out", str(out)).returncode == 2  # exists, no --force
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")], "no temp folders"


def test_every_subcommand_has_help():
    for sub in ("count", "delta", "advise", "replay", "report"):
        r = run(sub, "--help")
        assert r.returncode == 0 and "usage: graph-harness" in r.stdout


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_count_distributed_under_torchrun(tmp_path):
    out = tmp_path / "dist"
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc-per-node",
        "2",
        "--master-port",
        str(_free_port()),
        "-m",
        "graph_harness",
        "count",
        "--distributed",
        *SMALL[:-4],
        "--shard",
        "64",
        "--variant",
        "fused",
        "--pdl",
        "--out",
        str(out),
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=_env())
    # every rank's whole stderr: a rank's own abort comes before torchrun's summary of it
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-12000:]
    assert "fused: nodes per rank {0: " in r.stdout and "same structure on every rank" in r.stdout
    assert listing(out) == [MANIFEST, "nodes-fused-rank0.json", "nodes-fused-rank1.json"]
    doc = json.loads((out / "nodes-fused-rank1.json").read_text())
    assert doc["rank"] == 1 and doc["params"]["world"] == 2 and doc["options"]["distributed"]
    assert doc["options"]["pdl"] is True  # honoured, not dropped
    cmd[cmd.index("--pdl")] = "--world"
    cmd.insert(cmd.index("--world") + 1, "8")
    cmd[cmd.index("--master-port") + 1] = str(_free_port())
    r = subprocess.run(cmd[:-2], capture_output=True, text=True, timeout=300, env=_env())
    assert r.returncode != 0 and "--world 8 but the process group says 2" in r.stderr


# --- the GPU paths ------------------------------------------------------------------------------


@pytest.mark.gpu
def test_count_and_replay_json_on_the_gpu(tmp_path):
    r = run("count", *SMALL, "--variant", "fused", "--json", cpu=False)
    assert r.returncode == 0, r.stderr
    printed = json.loads(r.stdout)
    doc = printed["exports"]["fused"]
    assert doc["source"] == "cuda-graph" and doc["total_nodes"] > 0
    # our own graph: its host launch timed (capture/replay/host.py captured_launch_us)
    assert printed["host_launch"]["fused"]["us"] > 0, printed["host_launch"]
    r = run(
        "replay",
        *SMALL,
        "--variant",
        "shipped",
        "--variant",
        "fused",
        "--kind",
        "triton-empty",
        "--lengths",
        "1",
        "16",
        "--trials",
        "3",
        "--builds",
        "1",
        "--json",
        "--out",
        str(tmp_path / "r"),
        cpu=False,
    )
    assert r.returncode == 0, r.stderr
    printed = json.loads(r.stdout)
    assert printed["schema"] == "graph-harness/replay"
    assert printed == json.loads((tmp_path / "r" / "replay.json").read_text())


# --- found in review: each fails on the code before its fix -----------------------------------


def test_a_manifest_never_points_removal_outside_its_folder(tmp_path, monkeypatch):
    from graph_harness.reports.output import folder as output

    monkeypatch.chdir(tmp_path)
    out = tmp_path / "o"
    with output.staged_output(out, False) as tmp:
        write_output(tmp / "a.txt", "ours")
    victim = tmp_path / "victim.txt"
    victim.write_text("theirs")
    doc = json.loads((out / MANIFEST).read_text())
    doc["files"] += ["../victim.txt", str(victim)]
    (out / MANIFEST).write_text(json.dumps(doc))
    before = snapshot(tmp_path)
    # such a manifest is not ours: the folder is refused as foreign, nothing is removed
    with (
        pytest.raises(output.OutputRefused, match="did not write"),
        output.staged_output(out, True),
    ):
        pass
    assert snapshot(tmp_path) == before and victim.read_text() == "theirs"


def test_signals_wait_for_the_commit(tmp_path, monkeypatch):
    # SIGTERM arriving between the swap and the old output's removal is held off until the
    # commit is done: the old output is removed, the new one in place, nothing hidden left.
    import threading

    from graph_harness.reports.output import commit as committing
    from graph_harness.reports.output import folder as output

    out = tmp_path / "o"
    with output.staged_output(out, False) as tmp:
        write_output(tmp / "a.txt", "old")
    threading.Thread(target=time.sleep, args=(5,), daemon=True).start()  # torch has threads
    real_remove = committing.remove_listed
    caught = []

    def remove_after_a_signal(folder, fd):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.2)  # a handler that ran now would raise here
        return real_remove(folder, fd)

    monkeypatch.setattr(committing, "remove_listed", remove_after_a_signal)
    old = signal.signal(
        signal.SIGTERM, lambda n, f: caught.append(n) or (_ for _ in ()).throw(KeyboardInterrupt)
    )
    try:
        with pytest.raises(KeyboardInterrupt), output.staged_output(out, True) as tmp:
            write_output(tmp / "b.txt", "new")
    finally:
        signal.signal(signal.SIGTERM, old)
    assert caught == [signal.SIGTERM]  # delivered, after the commit
    assert listing(tmp_path) == ["o"] and listing(out) == [MANIFEST, "b.txt"]


def test_python_m_does_not_run_lookalikes_of_the_standard_library(tmp_path):
    for name in ("shlex.py", "csv.py", "profile.py"):
        (tmp_path / name).write_text("raise SystemExit('the local module ran')\n")
    r = subprocess.run(
        [sys.executable, "-m", "graph_harness", "--version"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=_env(),
        timeout=120,
    )
    assert r.returncode == 0 and r.stdout.startswith("graph-harness "), r.stderr


def test_a_missing_import_in_the_users_module_is_theirs(tmp_path):
    # its factory there: a module that surely lacks it is refused before it runs
    # (reports/cli/target_source.py), its missing dependency said once that is fixed
    (tmp_path / "mystuff.py").write_text("import my_missing_dependency\n\n\ndef f():\n    pass\n")
    r = run("count", "--target", "mystuff:f", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    assert "No module named 'my_missing_dependency'" in r.stderr and "mystuff.py:1" in r.stderr


def test_out_under_a_file_is_a_usage_error(tmp_path):
    (tmp_path / "afile").write_text("x")
    r = run("count", *SMALL, "--variant", "fused", "--out", str(tmp_path / "afile" / "sub"))
    assert r.returncode == 2 and "not a directory" in r.stderr, r.stderr
    assert "raised at" not in r.stderr


def test_delta_refuses_its_outputs_and_inputs_before_counting(tmp_path):
    r = run("delta", "shipped", "fused", *SMALL, "--csv", str(tmp_path))
    assert r.returncode == 2 and "is a folder" in r.stderr and r.stdout == "", r.stderr
    assert "capturing" not in r.stderr
    r = run("delta", "shipped", "./nope.json", *SMALL, cwd=tmp_path)
    assert r.returncode == 2 and "export file ./nope.json does not exist" in r.stderr
    assert "capturing" not in r.stderr


def test_counts_are_whole_numbers_in_digits_within_a_ceiling():
    # int() takes ' 3', '1_0' and an Arabic-Indic three; 10**23 warm-ups ran until killed
    for bad in (" 3", "1_0", "\u0663", "+3", "-1", str(10**23), "3.0"):
        r = run("count", "--target", "tests.targets:small_mlp", "--warmup", bad)
        assert r.returncode == 2, (bad, r.stderr)
        assert "expected a whole number from 0 to 100,000 in digits" in r.stderr, r.stderr
        assert "graph-harness |" not in r.stderr  # refused before any start-up
    assert run("count", "--target", "tests.targets:small_mlp", "--warmup", "2").returncode == 0


def test_target_specs_refused_in_one_line_before_start_up(tmp_path):
    for spec, says in (
        (".:f", "MODULE must be a dotted module name"),
        ("a b:f", "MODULE must be a dotted module name"),
        ("nocolon", "must be MODULE:FUNCTION or path/to/file.py:FUNCTION"),
    ):
        r = run("count", "--target", spec)
        assert r.returncode == 2 and says in r.stderr, (spec, r.stderr)
        assert "graph-harness |" not in r.stderr and "Traceback" not in r.stderr, r.stderr
    (tmp_path / "mystep.py").write_text(
        "def make_a():\n    pass\n\n\ndef make_b():\n    pass\nX = 3\n"
    )
    r = run("count", "--target", f"{tmp_path / 'mystep.py'}:nope")
    assert r.returncode == 2 and "has no 'nope'; its functions: make_a, make_b" in r.stderr
    r = run("count", "--target", f"{tmp_path / 'mystep.py'}:X")
    assert r.returncode == 2 and "'X' is an int, not a function" in r.stderr, r.stderr


def test_an_unreadable_target_file_is_named(tmp_path, monkeypatch):
    from graph_harness.reports.cli.target import TargetUsageError, load_target

    f = tmp_path / "step.py"
    f.write_text("def make():\n    return lambda: None\n")
    real = open

    def refusing(path, *a, **k):  # as a file without read permission does (root reads all)
        if str(path) == str(f):
            raise PermissionError(13, "Permission denied", str(path))
        return real(path, *a, **k)

    monkeypatch.setattr("builtins.open", refusing)
    with pytest.raises(TargetUsageError, match=r"step\.py cannot be read: permission denied"):
        load_target(f"{f}:make")
