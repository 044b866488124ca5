"""The check's document (`check.json`, `--json`): every check of a run by name, each
CheckResult as its to_dict gives it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from graph_harness.capture.check.findings import CheckResult
from graph_harness.capture.files import write_atomic

CHECK_SCHEMA = "graph-harness/check"
CHECK_SCHEMA_VERSION = 2  # 2: trajectories (steps, status, each finding's step)


def check_document(results: dict[str, CheckResult]) -> dict[str, Any]:
    return {
        "schema": CHECK_SCHEMA,
        "schema_version": CHECK_SCHEMA_VERSION,
        "checks": {name: r.to_dict() for name, r in results.items()},
    }


def write_checks(folder: Path, results: dict[str, CheckResult]) -> None:
    """`folder/check.json`, whole or not at all."""
    text = json.dumps(check_document(results), indent=1, allow_nan=False) + "\n"
    write_atomic(folder / "check.json", text)
