"""Output folders when things fail: a disk that fills at any write (the first manifest's
included), hidden folders that such a run or a killed one left, and --out naming a stream.
Each case works in a sacrificial tree under tmp_path; the full disk is injected, in this
process, only for files under tmp_path."""

import errno
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from graph_harness.capture.files import write_output
from graph_harness.reports.cli import program as cli
from graph_harness.reports.output import folder as output
from graph_harness.reports.output.manifest import (
    MANIFEST,
    MANIFEST_NEW,
    Manifest,
    write_manifest,
)
from tests.command_line import SMALL, _env
from tests.full_disk import FullDisk
from tests.snapshot import snapshot

COUNT = ["count", *SMALL, "--variant", "fused"]
ENOSPC = "OSError: [Errno 28] No space left on device"


def listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@pytest.fixture
def disk(tmp_path, monkeypatch):
    return FullDisk(monkeypatch, tmp_path)


def one_error_line(err: str) -> str:
    errors = [line for line in err.splitlines() if ": error: " in line]
    assert len(errors) == 1 and err.splitlines()[-1] == errors[0], err
    assert "gh-partial" not in err and "leftover" not in err, err
    return errors[0]


def the_manifest_bytes(tmp_path: Path) -> bytes:
    """A first manifest as the writer writes it (no file listed yet)."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    write_manifest(scratch, Manifest("graph-harness count --out o", "t", "h", 1, False, ()))
    data = (scratch / MANIFEST).read_bytes()
    (scratch / MANIFEST).unlink()
    scratch.rmdir()
    return data


# --- a full disk, in-process through the CLI's main ---------------------------------------------


# The first manifest write (the bug: its empty .new file kept the hidden folder for good),
# with nothing written, a few bytes, and past the part every manifest begins with.
@pytest.mark.parametrize("keep", [0, 20, 200])
def test_a_full_disk_at_the_first_manifest_leaves_nothing(tmp_path, disk, capsys, keep):
    out = tmp_path / "new" / "sub" / "o"  # two parent folders this run makes
    disk.fill_at(re.escape(MANIFEST_NEW), keep=keep)
    assert cli.main([*COUNT, "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert one_error_line(err).startswith(f"graph-harness count: error: {ENOSPC}"), err
    assert err.count("\n") == 1, "it failed before any work (the banner): the line alone"
    assert disk.hits == 1 and listing(tmp_path) == [], "no hidden folder, no parent left"
    disk.free()
    assert cli.main([*COUNT, "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "leftover" not in err and listing(out.parent) == ["o"], err
    assert "nodes-fused.json" in listing(out)


def test_a_full_disk_at_any_write_keeps_the_earlier_output(tmp_path, disk, capsys):
    out = tmp_path / "o"
    assert cli.main([*COUNT, "--out", str(out)]) == 0
    before, first = snapshot(tmp_path), out.stat().st_ino
    capsys.readouterr()
    for pattern, nth, named in [
        (re.escape(MANIFEST_NEW), 1, MANIFEST),  # the first manifest
        (re.escape(MANIFEST_NEW), 3, MANIFEST),  # a later listing, once files were claimed
        (r"\.nodes-fused\.json\.[0-9a-f]+\.tmp", 1, "nodes-fused.json"),  # a file's bytes
    ]:
        disk.fill_at(pattern, nth)
        assert cli.main([*COUNT, "--out", str(out), "--force"]) == 1, pattern
        line = one_error_line(capsys.readouterr().err)
        assert line.startswith(f"graph-harness count: error: {ENOSPC}"), (pattern, line)
        assert f"'{out / named}'" in line, "the file, as the user named the folder"
        assert disk.hits == nth, (pattern, disk.hits)
        assert snapshot(tmp_path) == before, f"{pattern}: the earlier output as it was, alone"
        assert out.stat().st_ino == first, f"{pattern}: the very folder, never swapped"
    disk.free()
    assert cli.main([*COUNT, "--out", str(out), "--force"]) == 0
    assert "leftover" not in capsys.readouterr().err and listing(tmp_path) == ["o"]
    assert out.stat().st_ino != first, "replaced, by the folder this run built"


def test_a_full_disk_names_the_file_it_could_not_take(tmp_path, disk, capsys):
    # os.write knows only its descriptor: the error names the file, or a user cannot
    # tell which disk filled
    disk.fill_at(r"\.a\.json\.[0-9a-f]+\.tmp")
    with pytest.raises(OSError, match=re.escape(str(tmp_path / "a.json"))):
        write_output(tmp_path / "a.json", "{}")
    disk.fill_at(re.escape(MANIFEST_NEW))
    with pytest.raises(OSError, match=re.escape(str(tmp_path / MANIFEST))):
        write_manifest(tmp_path, Manifest("c", "t", "h", 1, False, ()))
    full = Path("/dev/full")
    if full.exists():  # a device that is always full: written as a stream
        with pytest.raises(OSError, match="/dev/full"):
            write_output(full, "x")


def test_a_parent_folder_failing_midway_leaves_none_made(tmp_path, monkeypatch):
    real_mkdir = Path.mkdir

    def mkdir(self, *args, **kwargs):
        if self.name == "sub":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))
        return real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", mkdir)
    with (
        pytest.raises(OSError, match="No space left"),
        output.staged_output(tmp_path / "new" / "sub" / "o", False),
    ):
        pytest.fail("the body must not run")
    assert listing(tmp_path) == [], "`new`, made before `sub` failed, removed"


def test_a_hidden_folder_that_cannot_be_opened_is_removed(tmp_path, monkeypatch):
    real_open = os.open

    def no_descriptors_left(path, flags, *args, **kwargs):
        if str(path).endswith(".gh-partial") and flags & os.O_DIRECTORY:
            raise OSError(errno.EMFILE, os.strerror(errno.EMFILE), str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", no_descriptors_left)
    with (
        pytest.raises(OSError, match="Too many open files"),
        output.staged_output(tmp_path / "o", False),
    ):
        pytest.fail("the body must not run")
    assert listing(tmp_path) == []


def test_a_failing_run_removes_only_what_it_made_and_says_where_the_rest_is(tmp_path, disk):
    notes = []
    with (
        pytest.raises(OSError, match="No space left"),
        output.staged_output(tmp_path / "o", False, say=notes.append) as t,
    ):
        write_output(t / "a.json", "{}")
        (t / "theirs.txt").write_text("put there by hand")  # not through the helper
        disk.fill_at(r".*")
        write_output(t / "b.json", "{}")
    (left,) = [p for p in tmp_path.iterdir() if p.name.endswith(".gh-partial")]
    assert listing(tmp_path) == [left.name] and listing(left) == [MANIFEST, "theirs.txt"]
    assert (left / "theirs.txt").read_text() == "put there by hand"
    assert notes == [
        f"this run's unfinished folder is left at {left}: it holds theirs.txt, which "
        "graph-harness did not write"
    ], notes


# --- what a failed or killed run left, found by the next run ------------------------------------


def test_a_later_run_removes_unfinished_first_manifests_and_nothing_else(tmp_path):
    whole = the_manifest_bytes(tmp_path)
    theirs = tmp_path / "theirs.txt"
    theirs.write_text("")
    ours = {  # hidden folders holding nothing but a first manifest never renamed in
        ".o.empty0.gh-partial": b"",  # the disk was full at its first byte
        ".o.trunc1.gh-partial": whole[:30],  # full midway
        ".o.whole2.gh-partial": whole,  # killed between the write and the rename
    }
    not_ours = {  # each left, and said where
        ".o.user3.gh-partial": {MANIFEST_NEW: b"", "notes.txt": b"mine"},
        ".o.user4.gh-partial": {MANIFEST_NEW: b"my own notes"},
        ".o.user5.gh-partial": {MANIFEST_NEW: whole.replace(b"graph-harness/output", b"other")},
        ".o.user6.gh-partial": {"notes.txt": b"mine"},
    }
    for name, data in ours.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / MANIFEST_NEW).write_bytes(data)
    for name, files in not_ours.items():
        (tmp_path / name).mkdir()
        for f, data in files.items():
            (tmp_path / name / f).write_bytes(data)
    (tmp_path / ".o.user7.gh-partial").mkdir()  # a link to a user's (empty) file
    (tmp_path / ".o.user7.gh-partial" / MANIFEST_NEW).symlink_to(theirs)
    (tmp_path / ".o.user8.gh-partial").mkdir()  # a second name of a user's (empty) file
    os.link(theirs, tmp_path / ".o.user8.gh-partial" / MANIFEST_NEW)
    kept = snapshot(tmp_path)
    notes = []
    with output.staged_output(tmp_path / "o", False, say=notes.append) as t:
        write_output(t / "a.txt", "x")
    for name in ours:
        kept = {k: v for k, v in kept.items() if not k.startswith(name)}
    assert {k: v for k, v in snapshot(tmp_path).items() if not k.startswith("o")} == kept
    said = {n.split(": ")[1].split(" ")[0].rstrip(";"): n for n in notes}
    assert sorted(said) == sorted([*ours, *not_ours, ".o.user7.gh-partial", ".o.user8.gh-partial"])
    for name, note in said.items():
        if name in ours:
            assert note.endswith("; removed it"), note
        else:
            assert f"it is at {tmp_path / name}" in note, note
    # and every later run says so again, and leaves them
    notes.clear()
    with output.staged_output(tmp_path / "o", True, say=notes.append) as t:
        write_output(t / "a.txt", "y")
    assert len(notes) == 6 and not any("removed it" in n for n in notes), notes
    assert {k: v for k, v in snapshot(tmp_path).items() if not k.startswith("o")} == kept


# --- --out naming a stream -----------------------------------------------------------------------

NOT_A_FOLDER = (
    "not a folder: --out takes a folder (a new path, an empty folder, or an earlier "
    "graph-harness output) and writes its files in it; give a folder path"
)


@pytest.mark.parametrize("path", ["/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"])
def test_out_into_a_pipe_is_refused_before_any_work(tmp_path, path):
    # The bug: /dev/stdout -> /proc/PID/fd/pipe:[N], a name that is no file, was taken
    # for a new path; the run went on and failed making a folder in /proc/PID/fd (exit 1).
    # --target idle would fail the run if it got that far: refused first, it must not
    argv = ["count", "--target", "tests.targets:idle", "--out", path]
    r = subprocess.run(
        [sys.executable, "-m", "graph_harness", *argv],
        capture_output=True,  # stdout a pipe, as in `graph-harness ... | cat`
        text=True,
        timeout=600,
        env=_env(cpu=True),
        cwd=tmp_path,
    )
    assert r.returncode == 2, r.stderr
    assert r.stderr == (
        f"graph-harness count: error: --out {path} is a stream (descriptor 1), {NOT_A_FOLDER}"
        ", e.g. --out gh-out\n"
    )
    assert r.stdout == "" and listing(tmp_path) == [], "no work, nothing made"


def test_out_naming_a_fifo_or_a_descriptor_is_refused_before_any_work(tmp_path, capsys):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)  # open both ends: never blocks
    r, w = os.pipe()
    try:
        cases = {
            str(fifo): "a FIFO (named pipe)",
            f"/dev/fd/{reader}": f"a stream (descriptor {reader})",
            f"/proc/self/fd/{w}": f"a stream (descriptor {w})",
            "/dev/fd/999": "a file descriptor that is not open",
            "/dev/null": "a character device",
        }
        for path, what in cases.items():
            before = snapshot(tmp_path)
            argv = ["count", "--target", "tests.targets:idle", "--out", path]
            assert cli.main(argv) == 2, path
            got = capsys.readouterr()
            assert got.err == f"graph-harness count: error: --out {path} is {what}, " + (
                f"{NOT_A_FOLDER}, e.g. --out gh-out\n"
            ), got.err
            assert got.out == "" and snapshot(tmp_path) == before, path
        assert stat.S_ISFIFO(fifo.lstat().st_mode) and listing(tmp_path) == ["fifo"]
        for fd in (reader, r):
            os.set_blocking(fd, False)
            with pytest.raises(BlockingIOError):
                os.read(fd, 1)  # nothing was written into the FIFO or the pipe
    finally:
        for fd in (reader, r, w):
            os.close(fd)
