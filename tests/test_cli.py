"""The graph-harness console script, through the real entry point."""

import json
import shutil
import subprocess
import sys

SMALL = ["--stages", "2", "--rows", "2", "--k", "32", "--world", "2", "--shard", "64"]


def run(*args):
    exe = shutil.which("graph-harness") or None
    cmd = [exe] if exe else [sys.executable, "-m", "reports.cli"]
    return subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=600)


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


def test_count_usage_errors():
    r = run("count", "--variant", "fastest")
    assert r.returncode == 2 and "invalid choice" in r.stderr
    r = run("count", *SMALL[:-2], "--shard", "16")  # k=32 > shard=16
    assert r.returncode == 2 and "k=32 must be <= shard=16" in r.stdout
    assert "Traceback" not in r.stdout + r.stderr
    r = run("count", "--help")
    assert r.returncode == 0 and "--variant" in r.stdout
