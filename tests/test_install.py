"""Installed, graph-harness lives under one name: `graph_harness`. A distribution that
installs its own top-level `kernels` (a widely installed one does) sits beside it, and each
imports as itself.

The wheel is built from a copy of this tree's sources with the environment's setuptools
(no network: the `test` extra pins one that builds wheels itself) and installed into a
folder of its own; it holds every module of the tree.
Installed, the `node_budget` fixture reaches pytest through the wheel's `pytest11` entry
point alone: a project with no conftest can use it.
"""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _run(*cmd, cwd, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=env, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r


# Not copied into the tree the wheel is built from: a build/ left by an earlier build
# would bring its modules (moved or deleted since) into the wheel.
_NOT_SOURCE = (".git", ".venv", "build", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis")


def test_wheel_beside_a_standin_kernels_package(tmp_path):
    wheels, site, src = tmp_path / "wheels", tmp_path / "site", tmp_path / "src"
    shutil.copytree(REPO, src, ignore=shutil.ignore_patterns(*_NOT_SOURCE), symlinks=True)
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
        str(src),
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
    # Every module of every package and sub-package, in the wheel (pyproject lists each).
    for top in ("pools", "kernels", "capture", "reports"):
        tree = {f.relative_to(REPO / top) for f in (REPO / top).rglob("*.py")}
        wheel_has = {
            f.relative_to(site / "graph_harness" / top)
            for f in (site / "graph_harness" / top).rglob("*.py")
        }
        assert tree == wheel_has, (top, sorted(map(str, tree ^ wheel_has)))
    # record's start-up folder, which is no package (a sitecustomize for other processes)
    assert (site / "graph_harness" / "_record_boot" / "sitecustomize.py").is_file()
    # Nothing of ours at the top level: only the namespace (and its metadata).
    tops = {p.name for p in site.iterdir() if not p.name.endswith(".dist-info")}
    assert tops == {"graph_harness", "bin"} or tops == {"graph_harness"}, tops
    # A stand-in for the other distribution's top-level `kernels`, installed beside ours.
    (site / "kernels").mkdir()
    (site / "kernels" / "__init__.py").write_text("STANDIN = 'the other kernels'\n")
    probe = (
        "import kernels, graph_harness, graph_harness.kernels as gk\n"
        "from graph_harness.capture import RoundParams\n"
        "from graph_harness.reports.cli.program import build_parser\n"
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

    # The plugin, through the entry point only: no conftest, no -p.
    (dist_info,) = site.glob("graph_harness-*.dist-info")
    assert "[pytest11]\ngraph_harness.pytest_plugin = graph_harness.pytest_plugin\n" in (
        (dist_info / "entry_points.txt").read_text()
    )
    project = tmp_path / "project"
    project.mkdir()
    (project / "pytest.ini").write_text("[pytest]\n")
    (project / "test_step.py").write_text(
        "import torch\n"
        "import graph_harness.pytest_plugin as plugin\n"
        f"assert plugin.__file__.startswith({str(site / 'graph_harness')!r}), plugin.__file__\n"
        "def test_step(node_budget):\n"
        "    a, out = torch.ones(4), torch.empty(4)\n"
        "    step = lambda: torch.add(a, a, out=out)\n"
        "    node_budget(step, total=1, device='cpu', warmup=1)\n"
        "def test_over(node_budget):\n"
        "    a, out = torch.ones(4), torch.empty(4)\n"
        "    step = lambda: (torch.add(a, a, out=out), torch.add(a, a, out=out))\n"
        "    node_budget(step, total=1, device='cpu', warmup=1)\n"
    )
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--update-node-budgets"],
        capture_output=True,
        text=True,
        cwd=project,
        env=env,
        timeout=300,
    )
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-3000:]  # one test fails
    assert "1 failed, 1 passed" in r.stdout, r.stdout[-3000:]
    assert "NodeBudgetExceeded: node budget exceeded in the total" in r.stdout, r.stdout[-3000:]
    # Named again, by -p and by a conftest (as this repository's own tests do, and the
    # pytester runs): the entry point's name is the module's, so it registers once.
    (project / "conftest.py").write_text('pytest_plugins = ["graph_harness.pytest_plugin"]\n')
    r = _run(
        *(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"),
        *("-p", "graph_harness.pytest_plugin", "test_step.py::test_step"),
        cwd=project,
        env=env,
    )
    assert "1 passed" in r.stdout, r.stdout[-3000:]


# --- a checkout's root on sys.path (issue 55) ---------------------------------------------

_PROBE_ROOT = (
    "import sys\n"
    "assert sys.path[0] in ('', {root!r}), sys.path[:3]\n"  # the checkout's root, first
    "import kernels, pools, capture, reports\n"
    "for m in (kernels, pools, capture, reports):\n"
    "    assert m.STANDIN == 'the other ' + m.__name__, (m.__name__, m.__path__)\n"
    "import graph_harness.kernels as gk, graph_harness.pools as gp\n"
    "from graph_harness.capture import RoundParams\n"
    "from graph_harness.reports.cli.program import build_parser\n"
    "assert callable(gk.pack_scores_ids) and gp.GraphBufferPool and RoundParams().stages == 24\n"
    "build_parser()\n"
    "print(gk.__file__)\n"
)


def _standins(site: Path) -> None:
    """Other distributions' top-level `kernels`, `pools`, `capture` and `reports` (Hugging
    Face's `kernels`, which transformers imports, is one), installed in `site`."""
    for name in ("kernels", "pools", "capture", "reports"):
        (site / name).mkdir(parents=True)
        (site / name / "__init__.py").write_text(f"STANDIN = 'the other {name}'\n")


def test_the_checkout_root_first_on_sys_path_hides_no_other_distribution(tmp_path):
    # `python -c` in the root (sys.path[0] == ''), as a user in a clone runs it, and the root
    # named on PYTHONPATH, as pytest's rootdir insertion and the tests' subprocesses put it:
    # in both the root comes before the site folder, and the other distribution still wins.
    site = tmp_path / "site"
    _standins(site)
    env = {"PATH": "/usr/bin:/bin", "CUDA_VISIBLE_DEVICES": "", "HOME": str(tmp_path)}
    for pythonpath in (str(site), f"{REPO}:{site}"):
        r = _run(
            sys.executable,
            "-c",
            _PROBE_ROOT.format(root=str(REPO)),
            cwd=REPO,
            env={**env, "PYTHONPATH": pythonpath},
        )
        # ... and graph_harness.kernels is still this checkout's
        assert Path(r.stdout.strip()).is_relative_to(REPO), r.stdout


def test_the_root_probe_is_not_vacuous(tmp_path):
    # A regular package at the root would win over the site folder: the probe sees it.
    root, site = tmp_path / "root", tmp_path / "site"
    _standins(site)
    (root / "kernels").mkdir(parents=True)
    (root / "kernels" / "__init__.py").write_text("STANDIN = 'the checkout'\n")
    r = subprocess.run(
        [sys.executable, "-c", "import kernels; print(kernels.STANDIN)"],
        capture_output=True,
        text=True,
        cwd=root,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(site)},
        timeout=60,
    )
    assert r.stdout.strip() == "the checkout", r.stdout + r.stderr


def test_a_transformers_model_class_loads_from_the_checkout_root(tmp_path):
    # transformers (5.25 and later) imports Hugging Face's `kernels` when a model class
    # loads; in the root, the checkout's kernels/ folder must not stand in for it.
    pytest.importorskip("transformers")
    probe = (
        "from transformers import LlamaConfig, LlamaForCausalLM\n"
        "cfg = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64,\n"
        "                  num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1)\n"
        "m = LlamaForCausalLM(cfg)\n"
        "import kernels\n"
        "print(sum(p.numel() for p in m.parameters()), kernels.__spec__.origin)\n"
    )
    env = {"PATH": "/usr/bin:/bin", "CUDA_VISIBLE_DEVICES": "", "HOME": str(tmp_path)}
    r = _run(sys.executable, "-c", probe, cwd=REPO, env={**env, "PYTHONPATH": str(REPO)})
    params, origin = r.stdout.split()
    assert int(params) > 0
    # Hugging Face's package where it is installed; otherwise no regular package at all
    # (the checkout's folder is only a namespace portion, whose origin is None)
    assert origin == "None" or not Path(origin).is_relative_to(REPO / "kernels"), origin
