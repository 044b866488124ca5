"""The graph-harness console script run as a user runs it: in a child process, through the
real entry point, on the CPU unless asked (CUDA_VISIBLE_DEVICES=""), with this tree on
PYTHONPATH so `tests.targets` resolves from any folder."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

SMALL = ["--stages", "2", "--rows", "2", "--k", "32", "--world", "2", "--shard", "64"]
REPO = Path(__file__).resolve().parents[1]


def _cmd():
    exe = shutil.which("graph-harness")
    return [exe] if exe else [sys.executable, "-m", "graph_harness"]


def _env(cpu=True, **extra):
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}  # output is piped
    env["PYTHONPATH"] = str(REPO)  # tests.targets, from any folder
    if cpu:
        env["CUDA_VISIBLE_DEVICES"] = ""
    env.update(extra)
    return env


def terminal_env(cpu=True):
    """The environment of a child whose output may go to a terminal: a colour terminal 120
    columns wide, no colour forced."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "FORCE_COLOR")}
    env.update(PYTHONPATH=str(REPO), TERM="xterm-256color", COLUMNS="120")
    if cpu:
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def run(*args, cpu=True, cwd=None, umask=None, **extra):
    return subprocess.run(
        _cmd() + list(args),
        capture_output=True,
        text=True,
        timeout=600,
        env=_env(cpu, **extra),
        cwd=cwd,
        preexec_fn=None if umask is None else (lambda: os.umask(umask)),
    )
