"""The graph-harness command run in this process: reports.cli.main in a folder, its
streams captured, for tests that feed it many documents faster than a child process could."""

import contextlib
import io
import os
from pathlib import Path

from graph_harness.reports.cli.program import main


def _run(argv, folder: Path):
    """main(argv) in this process: (exit code, stdout, stderr), stdout a strict UTF-8
    stream as a terminal's or a pipe's would be."""
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="utf-8", errors="strict", write_through=True)
    err = io.StringIO()
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    finally:
        os.chdir(cwd)
    out.flush()
    return code, raw.getvalue().decode("utf-8"), err.getvalue()
