"""Installed, graph-harness lives under one name: `graph_harness`. A distribution that
installs its own top-level `kernels` (a widely installed one does) sits beside it, and each
imports as itself.

The wheel is built from this tree with the environment's setuptools (no network: the
`test` extra pins one that builds wheels itself) and installed into a folder of its own.
"""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _run(*cmd, cwd, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=env, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r


def test_wheel_beside_a_standin_kernels_package(tmp_path):
    wheels, site = tmp_path / "wheels", tmp_path / "site"
    _run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "-q",
        "-w",
        str(wheels),
        str(REPO),
        cwd=tmp_path,
    )
    (wheel,) = wheels.glob("graph_harness-*.whl")
    _run(
        sys.executable,
        "-m",
        "pip",
        "install",
        "-q",
        "--no-deps",
        "--no-index",
        "--target",
        str(site),
        str(wheel),
        cwd=tmp_path,
    )
    # Nothing of ours at the top level: only the namespace (and its metadata).
    tops = {p.name for p in site.iterdir() if not p.name.endswith(".dist-info")}
    assert tops == {"graph_harness", "bin"} or tops == {"graph_harness"}, tops
    # A stand-in for the other distribution's top-level `kernels`, installed beside ours.
    (site / "kernels").mkdir()
    (site / "kernels" / "__init__.py").write_text("STANDIN = 'the other kernels'\n")
    probe = (
        "import kernels, graph_harness, graph_harness.kernels as gk\n"
        "from graph_harness.capture import RoundParams\n"
        "from graph_harness.reports.cli import build_parser\n"
        "assert kernels.STANDIN == 'the other kernels', kernels.__file__\n"
        "assert callable(gk.pack_scores_ids) and RoundParams().stages == 24\n"
        "build_parser()\n"
        "print(gk.__file__)\n"
    )
    env = {"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin", "CUDA_VISIBLE_DEVICES": ""}
    r = _run(sys.executable, "-c", probe, cwd=tmp_path, env=env)
    assert Path(r.stdout.strip()).is_relative_to(site / "graph_harness"), r.stdout
    r = _run(sys.executable, "-m", "graph_harness", "--version", cwd=tmp_path, env=env)
    assert r.stdout.startswith("graph-harness ")
