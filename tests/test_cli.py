"""The graph-harness console script, through the real entry point."""

import json
import os
import shutil
import subprocess
import sys

SMALL = ["--stages", "2", "--rows", "2", "--k", "32", "--world", "2", "--shard", "64"]


def run(*args):
    exe = shutil.which("graph-harness") or None
    cmd = [exe] if exe else [sys.executable, "-m", "reports.cli"]
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}  # output is piped
    return subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=600, env=env)


def test_count_writes_exports(tmp_path):
    out = tmp_path / "run"
    r = run("count", *SMALL, "--variant", "shipped", "--variant", "fused", "--out", str(out))
    assert r.returncode == 0, r.stderr + r.stdout
    assert "cpu-dispatch" in r.stdout and "NOT graph nodes" in r.stdout
    assert "shipped" in r.stdout and "fused" in r.stdout
    files = sorted(p.name for p in out.iterdir())
    assert files == [
        "graph-fused.dot",
        "graph-shipped.dot",
        "nodes-fused.json",
        "nodes-shipped.json",
    ]
    doc = json.loads((out / "nodes-fused.json").read_text())
    assert doc["source"] == "cpu-dispatch" and doc["params"]["stages"] == 2
    # an existing folder is refused without --force, and left as it was
    r = run("count", *SMALL, "--variant", "fused", "--out", str(out))
    assert r.returncode == 2 and "exists; pass --force" in r.stdout
    assert len(list(out.iterdir())) == 4
    r = run("count", *SMALL, "--variant", "fused", "--out", str(out), "--force")
    assert r.returncode == 0 and sorted(p.name for p in out.iterdir()) == [
        "graph-fused.dot",
        "nodes-fused.json",
    ]


def test_piped_tables_are_not_cut():
    # Piped into a log, rich would squeeze the five-variant table into 80 columns and cut
    # headers and figures to "...".
    r = run("count", *SMALL)
    assert r.returncode == 0, r.stderr + r.stdout
    assert "\u2026" not in r.stdout, r.stdout
    assert all(h in r.stdout for h in ("direct-compaction", "select", "compaction")), r.stdout


def test_count_usage_errors():
    r = run("count", "--variant", "fastest")
    assert r.returncode == 2 and "invalid choice" in r.stderr
    r = run("count", *SMALL[:-2], "--shard", "16")  # k=32 > shard=16
    assert r.returncode == 2 and "k=32 must be <= shard=16" in r.stdout
    assert "Traceback" not in r.stdout + r.stderr
    r = run("count", "--help")
    assert r.returncode == 0 and "--variant" in r.stdout


def test_delta_between_files_and_variants(tmp_path):
    out = tmp_path / "run"
    assert (
        run(
            "count", *SMALL, "--variant", "shipped", "--variant", "fused", "--out", str(out)
        ).returncode
        == 0
    )
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
    r = run("delta", "shipped", "fused", "--from", str(out), *SMALL)
    assert r.returncode == 0 and "-22 nodes/round" in r.stdout
    r = run("delta", "shipped", "direct-compaction", *SMALL)  # counted now
    assert r.returncode == 0 and "-4 nodes/round (copy -4)" in r.stdout


def test_delta_errors(tmp_path):
    out = tmp_path / "run"
    run("count", *SMALL, "--variant", "fused", "--out", str(out))
    r = run("delta", "nope.json", "fused")
    assert r.returncode == 2 and "neither an export file nor a variant" in r.stdout
    doc = json.loads((out / "nodes-fused.json").read_text())
    (tmp_path / "v9.json").write_text(json.dumps(dict(doc, schema_version=9)))
    r = run("delta", str(out / "nodes-fused.json"), str(tmp_path / "v9.json"))
    assert r.returncode == 2 and "schema version 9" in r.stdout
    other = dict(doc, params=dict(doc["params"], k=16))
    (tmp_path / "k16.json").write_text(json.dumps(other))
    r = run("delta", str(out / "nodes-fused.json"), str(tmp_path / "k16.json"))
    assert r.returncode == 2 and "different parameters" in r.stdout
    (tmp_path / "broken.json").write_text("{")
    r = run("delta", str(tmp_path / "broken.json"), "fused", "--from", str(out))
    assert r.returncode == 2 and "cannot read export" in r.stdout
    assert "Traceback" not in r.stdout + r.stderr


def test_target_callable(tmp_path):
    r = run("count", "--target", "tests.targets:small_mlp", "--out", str(tmp_path / "t"))
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads((tmp_path / "t" / "nodes-target.json").read_text())
    assert doc["workload"].startswith("callable:") and doc["total_nodes"] == 2
    assert sorted({n["step"] for n in doc["nodes"] if n["type"] == "aten"}) == ["act", "matmul"]
    r = run("count", "--target", "tests.targets:not_callable")
    assert r.returncode == 2 and "returned int, not a callable" in r.stdout
    r = run("count", "--target", "no_such_module:f")
    assert r.returncode == 2 and "does not import" in r.stdout
    r = run("count", "--target", "justaname")
    assert r.returncode == 2 and "MODULE:FUNCTION" in r.stdout


def test_interrupt_leaves_no_partial_output(tmp_path):
    out = tmp_path / "never"
    r = run("count", "--target", "tests.targets:interrupting", "--out", str(out))
    assert r.returncode == 130 and "interrupted" in r.stdout
    assert list(tmp_path.iterdir()) == [], "no output folder and no temporary one"


def test_replay_needs_cuda():
    r = run("replay", "--trials", "3")
    assert r.returncode == 1 and "needs a CUDA device" in r.stdout
    assert "Traceback" not in r.stdout + r.stderr
    r = run("--debug", "replay", "--trials", "3")
    assert r.returncode != 0 and "Traceback" in r.stderr
    r = run("replay", "--builds", "0")
    assert r.returncode == 2 and "expected a whole number >= 1, got '0'" in r.stderr


def test_report_on_cpu(tmp_path):
    out = tmp_path / "report"
    r = run("report", *SMALL, "--out", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    names = {p.name for p in out.iterdir()}
    assert {
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
    for png in ("nodes_per_stage.png", "waterfall_nodes.png"):
        data = (out / png).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    assert run("report", *SMALL, "--out", str(out)).returncode == 2  # exists, no --force
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")], "no temp folders"


def test_every_subcommand_has_help():
    for sub in ("count", "delta", "replay", "report"):
        r = run(sub, "--help")
        assert r.returncode == 0 and "usage: graph-harness" in r.stdout


def test_count_distributed_under_torchrun(tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "dist"
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc-per-node",
        "2",
        "--master-port",
        str(port),
        "-m",
        "reports.cli",
        "count",
        "--distributed",
        *SMALL[:-4],
        "--shard",
        "64",
        "--variant",
        "fused",
        "--out",
        str(out),
    ]
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "fused: nodes per rank {0: " in r.stdout and "same structure on every rank" in r.stdout
    assert sorted(p.name for p in out.iterdir()) == [
        "nodes-fused-rank0.json",
        "nodes-fused-rank1.json",
    ]
    doc = json.loads((out / "nodes-fused-rank1.json").read_text())
    assert doc["rank"] == 1 and doc["params"]["world"] == 2 and doc["options"]["distributed"]
