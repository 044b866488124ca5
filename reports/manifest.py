"""The manifest that marks an output folder as graph-harness's own, and removing only what
it lists: graph-harness never deletes anything it did not write."""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from graph_harness.capture.files import write_atomic

MANIFEST = ".graph-harness-manifest.json"
MANIFEST_SCHEMA = "graph-harness/output"


@dataclass(frozen=True)
class Manifest:
    command: str
    created: str
    host: str
    pid: int
    complete: bool
    files: tuple[str, ...]

    def to_dict(self) -> dict:
        return {
            "schema": MANIFEST_SCHEMA,
            "schema_version": 1,
            "tool": "graph-harness",
            "command": self.command,
            "created": self.created,
            "host": self.host,
            "pid": self.pid,
            "complete": self.complete,
            "files": list(self.files),
        }


def read_manifest(folder: Path) -> Manifest | None:
    """The folder's manifest, or None when it has none graph-harness wrote."""
    p = folder / MANIFEST
    try:
        if p.is_symlink() or not p.is_file():
            return None
        doc = json.loads(p.read_text())
        if doc.get("schema") != MANIFEST_SCHEMA or doc.get("tool") != "graph-harness":
            return None
        files = doc["files"]
        # Only plain names of entries inside the folder: a listed "../x", "/x" or "a/b"
        # would point removal outside it.
        if not isinstance(files, list) or not all(_plain_name(f) for f in files):
            return None
        return Manifest(
            str(doc["command"]),
            str(doc["created"]),
            str(doc["host"]),
            int(doc["pid"]),
            bool(doc["complete"]),
            tuple(files),
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _plain_name(name: object) -> bool:
    return (
        isinstance(name, str)
        and name not in ("", ".", "..", MANIFEST)
        and os.path.basename(name) == name
        and "/" not in name
        and (os.altsep is None or os.altsep not in name)
    )


def write_manifest(folder: Path, m: Manifest) -> None:
    write_atomic(folder / MANIFEST, json.dumps(m.to_dict(), indent=1) + "\n")


def foreign_entries(folder: Path) -> list[str] | None:
    """What in `folder` graph-harness did not write: None when it has no manifest of ours,
    else the entries its manifest does not list (or that are not plain files)."""
    m = read_manifest(folder)
    if m is None:
        return None
    listed = set(m.files)
    out = []
    for e in os.scandir(folder):
        if e.name == MANIFEST:
            continue
        if e.name not in listed or not e.is_file(follow_symlinks=False):
            out.append(e.name)
    return sorted(out)


def remove_own(folder: Path) -> bool:
    """Remove a folder graph-harness wrote: the plain files its manifest lists, the
    manifest, then the (then empty) folder. Anything else stops it: the folder is left
    with what it holds, and False is returned."""
    m = read_manifest(folder)
    if m is None:
        return False
    listed = set(m.files)
    for e in os.scandir(folder):  # what is there, and listed: never a path built from text
        if e.name in listed and e.is_file(follow_symlinks=False):
            with contextlib.suppress(FileNotFoundError):  # a concurrent cleaner got it
                os.unlink(e.path)
    with contextlib.suppress(FileNotFoundError):
        (folder / MANIFEST).unlink()
    try:
        folder.rmdir()
    except OSError:
        return False
    return True


def remove_partial(folder: Path) -> bool:
    """Remove this run's own partial folder: made by this process under a hidden name;
    it holds only the plain files the run wrote (anything else stops it)."""
    for e in os.scandir(folder):
        if e.is_file(follow_symlinks=False):
            os.unlink(e.path)
    try:
        folder.rmdir()
    except OSError:
        return False
    return True
