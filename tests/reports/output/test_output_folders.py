"""Output folders under attack: planted leftovers, concurrent replaces, read-only earlier
outputs, long names, links and `..`. Each case runs in a sacrificial tree under tmp_path
(the non-root one in a folder of its own that another user can reach) and, where a real
process is needed, in real processes."""

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

import pytest

from graph_harness.capture.files import write_output
from graph_harness.reports.output import commit as committing
from graph_harness.reports.output import folder as output
from graph_harness.reports.output import leftovers
from graph_harness.reports.output.manifest import MANIFEST, read_manifest

REPO = Path(__file__).resolve().parents[3]


def listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def commit(out, text="x", *, force=True, notes=None, name="a.txt"):
    with output.staged_output(
        out, force, command="test", say=None if notes is None else notes.append
    ) as t:
        write_output(t / name, text)


def plant(beside: Path, name: str, *, complete: bool, files=(), extra=()) -> Path:
    """A hidden folder as a killed run would leave it, with what `extra` adds by hand."""
    d = beside / name
    d.mkdir()
    doc = {
        "schema": "graph-harness/output",
        "schema_version": 1,
        "tool": "graph-harness",
        "command": "graph-harness count --out o",
        "created": "2026-12-01T00:00:00+0000",
        "host": "h",
        "pid": 1,
        "complete": complete,
        "files": list(files),
    }
    (d / MANIFEST).write_text(json.dumps(doc))
    for f in (*files, *extra):
        (d / f).write_text(f"{f} content")
    return d


# --- our hidden folders hold only what we put there ------------------------------------------


@pytest.mark.parametrize("complete", [False, True])
def test_cleanup_removes_only_listed_files(tmp_path, complete):
    out = tmp_path / "o"
    left = plant(
        tmp_path,
        ".o.abc123.gh-partial",
        complete=complete,
        files=["nodes-x.json"],
        extra=["notes.txt"],
    )
    notes = []
    commit(out, notes=notes)
    assert listing(left) == [MANIFEST, "notes.txt"], "the user's file stays; ours went"
    assert (left / "notes.txt").read_text() == "notes.txt content"
    assert len(notes) == 1 and "left it: it holds notes.txt" in notes[0], notes
    # every later run says so again, and leaves it
    notes.clear()
    commit(out, notes=notes)
    assert listing(left) == [MANIFEST, "notes.txt"] and "notes.txt" in notes[0]


def test_a_listed_leftover_goes_whole_and_an_empty_one_too(tmp_path):
    out = tmp_path / "o"
    listed = plant(tmp_path, ".o.abc123.gh-partial", complete=False, files=["a.json", "b.dot"])
    bare = tmp_path / ".o.empty1.gh-partial"
    bare.mkdir()  # a run killed the instant after mkdtemp ...
    fresh = tmp_path / ".o.fresh2.gh-partial"
    fresh.mkdir()  # ... and one a live run has just made and is about to lock
    old = time.time() - 2 * leftovers.FRESH_S
    os.utime(bare, (old, old))
    notes = []
    commit(out, notes=notes)
    assert listing(tmp_path) == [fresh.name, "o"], "both leftovers removed, the new one left"
    assert len(notes) == 2 and all("removed it" in n for n in notes), notes
    assert not listed.exists()


def test_a_hidden_folder_committed_before_the_cleanup_locks_it_is_left_whole(tmp_path, monkeypatch):
    # The bug behind CI's "incomplete: []" (test_concurrent_force_runs_...): a cleanup
    # opened another run's hidden folder by its name, that run committed it to the output
    # path and let go of its lock, and the cleanup then locked it and removed what its
    # manifest lists, emptying the output. Here the run's commit lands in that instant.
    out = tmp_path / "o"
    hidden = plant(tmp_path, ".o.live42.gh-partial", complete=True, files=["a.json"])
    opened = leftovers.lock_folder

    def commit_between_open_and_lock(folder):
        fd = opened(folder)  # open and lock, as the cleanup does ...
        if folder == hidden:
            os.rename(hidden, out)  # ... with the run's commit taking the moment between
        return fd

    monkeypatch.setattr(leftovers, "lock_folder", commit_between_open_and_lock)
    notes = []
    leftovers.clean_leftovers(out, notes.append, str(out))
    assert listing(out) == [MANIFEST, "a.json"] and notes == []
    assert read_manifest(out).complete
    # Not vacuous: a true leftover beside it still goes.
    plant(tmp_path, ".o.dead7.gh-partial", complete=True, files=["b.json"])
    leftovers.clean_leftovers(out, notes.append, str(out))
    assert listing(tmp_path) == ["o"] and len(notes) == 1 and "removed it" in notes[0]


def test_every_file_is_listed_before_it_is_made(tmp_path):
    # A run killed at any instant leaves a manifest that lists every file it made.
    out = tmp_path / "o"
    seen = []
    with output.staged_output(out, False) as t:
        for name in ("nodes.json", "graph.dot", "plot.png"):
            write_output(t / name, b"\x89PNG" if name.endswith("png") else "{}")
            on_disk = set(os.listdir(t)) - {MANIFEST}
            listed = set(read_manifest(t).files)
            assert on_disk <= listed, (on_disk, listed)
            seen.append(read_manifest(t).complete)
        (t / "unlisted.txt").write_text("made behind our back")  # not through the helper
    assert seen == [False] * 3
    m = read_manifest(out)
    assert m.complete and m.files == ("graph.dot", "nodes.json", "plot.png")
    # what it did not list is not its own: a replace refuses, and nothing is removed
    with pytest.raises(output.OutputRefused, match="unlisted.txt, which it did not write"):
        commit(out)
    assert "unlisted.txt" in listing(out)


def test_an_empty_folder_is_kept_and_written_into(tmp_path):
    # The bug (issue 44, 7): an empty --out folder was swapped out for a new one, losing
    # its inode, and with it what a user set on it (a group, a mode, an ACL, a mount).
    out = tmp_path / "o"
    out.mkdir(mode=0o750)
    before = os.stat(out)
    commit(out, "new", force=False)
    after = os.stat(out)
    assert (after.st_ino, after.st_mode, after.st_uid, after.st_gid) == (
        before.st_ino,
        before.st_mode,
        before.st_uid,
        before.st_gid,
    )
    assert (out / "a.txt").read_text() == "new" and read_manifest(out).complete
    assert listing(tmp_path) == ["o"], "the hidden folder went"


def test_a_name_taken_in_the_empty_folder_meanwhile_keeps_the_result_beside(tmp_path):
    out = tmp_path / "o"
    out.mkdir()
    conflict = pytest.raises(output.OutputConflict, match="this run's result is in")
    with conflict, output.staged_output(out, False, command="test") as t:
        write_output(t / "a.txt", "new")
        (out / "a.txt").write_text("theirs")  # a user's file, made while the run went
    assert listing(out) == ["a.txt"] and (out / "a.txt").read_text() == "theirs"
    (kept,) = [p for p in tmp_path.iterdir() if p.name.startswith("o.graph-harness-")]
    assert (kept / "a.txt").read_text() == "new"


# --- concurrent replaces ------------------------------------------------------------------------

# A writer process: imports the output code alone (capture's package __init__ would bring
# torch and take seconds per process; the modules used are the same files).
WRITER = r"""
import importlib.util, sys, types
root = sys.argv[1]
for name, sub in (("graph_harness", ""), ("graph_harness.capture", "/capture"),
                  ("graph_harness.reports", "/reports")):
    pkg = types.ModuleType(name)
    pkg.__path__ = [root + (sub or "/graph_harness")]
    sys.modules[name] = pkg
from graph_harness.capture.files import write_output
from graph_harness.reports.output.folder import staged_output
out, n, me = sys.argv[2], int(sys.argv[3]), sys.argv[4]
for i in range(n):
    with staged_output(out, True, command=me) as t:
        write_output(t / "who.txt", f"{me} {i}")
        write_output(t / "b.txt", "b" * 100)
"""


def test_concurrent_force_runs_take_turns_and_the_path_is_always_whole(tmp_path):
    out = tmp_path / "o"
    commit(out, name="who.txt")
    write_output(out / "b.txt", "b")  # not listed: a first replace must refuse ...
    with pytest.raises(output.OutputRefused):
        commit(out)
    os.unlink(out / "b.txt")  # ... and after the user moves it, replaces go on
    bad, polls, stop = [], [0], threading.Event()

    def poll():
        while not stop.is_set():
            polls[0] += 1
            try:
                fd = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
            except FileNotFoundError:
                bad.append("absent")
                continue
            try:
                names = sorted(os.listdir(fd))
                m = read_manifest(out, dir_fd=fd)
                here, there = os.stat(out), os.fstat(fd)
            finally:
                os.close(fd)
            if (here.st_ino, here.st_dev) != (there.st_ino, there.st_dev):
                continue  # swapped while we looked: what we saw is no longer at the path
            if m is None or not m.complete or names != sorted([MANIFEST, *m.files]):
                bad.append(f"incomplete: {names}")
            elif "who.txt" not in names:
                bad.append(f"not an output: {names}")

    poller = threading.Thread(target=poll)
    poller.start()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(REPO), str(out), "60", f"w{k}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for k in range(4)
    ]
    try:
        results = [(p.wait(timeout=120), p.stderr.read()) for p in procs]
    finally:
        stop.set()
        poller.join()
    assert all(code == 0 and err == "" for code, err in results), results
    assert bad == [], f"{len(bad)} of {polls[0]} polls: {bad[:5]}"
    assert polls[0] > 100, f"the poller looked {polls[0]} times: not enough to mean something"
    assert listing(tmp_path) == ["o"], "no hidden folder left"
    who = (out / "who.txt").read_text().split()
    assert who[0] in {f"w{k}" for k in range(4)} and who[1] == "59", who  # a last commit


def test_old_output_stays_locked_until_it_is_gone(tmp_path, monkeypatch):
    # The bug: after the swap the old output sat under its hidden name unlocked, and
    # another run's cleanup removed it mid-commit (a raw FileNotFoundError after commit).
    out = tmp_path / "o"
    commit(out, "old")
    real_remove = committing.remove_listed
    cleaned = []

    def remove_with_a_cleaner_racing(folder, fd):
        from graph_harness.reports.output.leftovers import clean_leftovers

        clean_leftovers(out, cleaned.append, str(out))  # another run starting right now
        return real_remove(folder, fd)

    monkeypatch.setattr(committing, "remove_listed", remove_with_a_cleaner_racing)
    commit(out, "new")
    assert cleaned == [], "the cleaner skipped the old output: it is a live run's"
    assert listing(tmp_path) == ["o"] and (out / "a.txt").read_text() == "new"


def test_a_ctrl_c_during_the_commit_says_what_the_commit_did(tmp_path, monkeypatch):
    # The bug (issue 44, 7): a Ctrl-C held off during the commit was raised once the new
    # output had replaced the old, and the run said "no partial output was left".
    import signal
    import types

    from graph_harness.reports.cli import program

    out = tmp_path / "o"
    commit(out, "old")
    real_exchange = committing.exchange

    def exchange_with_a_ctrl_c(a, b):
        signal.raise_signal(signal.SIGINT)  # held off until the commit is done
        return real_exchange(a, b)

    monkeypatch.setattr(committing, "exchange", exchange_with_a_ctrl_c)
    with pytest.raises(KeyboardInterrupt) as got:
        commit(out, "new")
    assert (out / "a.txt").read_text() == "new", "the commit was whole"
    notes: list[str] = []
    io = types.SimpleNamespace(note=notes.append)
    assert program._stopped(io, signal.SIGINT, got.value) == 130
    assert notes == [f"interrupted as the output was committed: {out} holds its output"]
    # before the commit, nothing of the run is left, and it says so
    notes.clear()
    program._stopped(io, signal.SIGINT, KeyboardInterrupt())
    assert notes == ["interrupted; no partial output was left"]


def test_a_ctrl_c_during_a_commit_that_kept_the_result_beside_says_where(tmp_path, monkeypatch):
    out = tmp_path / "o"
    real_rename = committing.rename_noreplace

    def rename_after_a_folder_appeared(a, b):
        import signal

        if b == out:
            b.mkdir()  # another run's folder, made an instant before
            signal.raise_signal(signal.SIGINT)
        return real_rename(a, b)

    monkeypatch.setattr(committing, "rename_noreplace", rename_after_a_folder_appeared)
    with pytest.raises(KeyboardInterrupt) as got:
        commit(out, "new")
    said = output.committed_before_stop(got.value)
    assert said and said.startswith(f"output folder {out} appeared while this run was going")
    assert "this run's result is in" in said


# --- permissions ------------------------------------------------------------------------------


def test_removal_failing_after_the_commit_is_a_note_not_an_error(tmp_path, monkeypatch):
    # Runs as root too: the failure is injected where a non-root user meets it.
    out = tmp_path / "o"
    commit(out, "old")
    real_unlink = os.unlink

    def unlink(path, *, dir_fd=None):
        if dir_fd is not None and path == "a.txt":
            raise PermissionError(13, "Permission denied")
        return real_unlink(path, dir_fd=dir_fd)

    monkeypatch.setattr(os, "unlink", unlink)
    notes = []
    commit(out, "new", notes=notes)  # committed: no raise
    assert (out / "a.txt").read_text() == "new"
    assert len(notes) == 1 and "could not be removed (permission denied)" in notes[0], notes
    notes.clear()
    commit(out, "newer", notes=notes)  # the next run reports the leftover and goes on
    assert (out / "a.txt").read_text() == "newer"
    assert any("could not remove it (permission denied)" in n for n in notes), notes
    monkeypatch.undo()
    commit(out, "last", notes=notes)
    assert listing(tmp_path) == ["o"]


NOBODY = 65534


def _as_nobody(fn):
    """Run `fn` as an unprivileged user: in a forked child that drops to `nobody` when
    this process is root (everything it needs is imported already: the child cannot read
    the interpreter's files), or right here when it is not root."""
    if os.geteuid() != 0:
        return fn()
    r, w = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads: only os calls
        pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.close(r)
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            doc = {"result": fn()}
        except BaseException as e:
            doc = {"raised": f"{type(e).__name__}: {e}"}
        os.write(w, json.dumps(doc).encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        doc = json.loads(f.read() or b'{"raised": "the child died"}')
    os.waitpid(pid, 0)
    if "raised" in doc and doc["raised"].startswith("PermissionError: [Errno 1]"):
        pytest.skip("cannot drop privileges here (no CAP_SETUID)")
    return doc


@pytest.fixture
def shared_dir():
    """A folder another user can reach (tmp_path's parents are root's alone)."""
    d = Path(tempfile.mkdtemp(prefix="gh-nonroot-"))
    os.chmod(d, 0o777)
    yield d
    for p in sorted(d.rglob("*"), reverse=True):
        with contextlib.suppress(OSError):
            os.chmod(p, 0o777)
    import shutil

    shutil.rmtree(d, ignore_errors=True)


def test_read_only_outputs_and_parents_as_a_non_root_user(shared_dir):
    def scenario():
        seen = {"uid": os.geteuid()}
        # an earlier output this user cannot remove (its folder read-only)
        ro = shared_dir / "ro"
        commit(ro, "old")
        os.chmod(ro, 0o555)
        try:
            commit(ro, "new")
        except output.OutputRefused as e:
            seen["ro"] = str(e)
        seen["ro_after"] = (ro / "a.txt").read_text()
        # an earlier output in a read-only folder
        parent = shared_dir / "parent"
        parent.mkdir()
        commit(parent / "o", "old")
        os.chmod(parent, 0o555)
        for name in ("o", "new"):
            try:
                commit(parent / name, "new")
            except output.OutputRefused as e:
                seen[name] = str(e)
        seen["parent_after"] = sorted(os.listdir(parent))
        # an empty folder this user may not write in: the run writes into it, so it is
        # refused before any work (not kept beside after it)
        empty = shared_dir / "empty-ro"
        empty.mkdir(mode=0o555)
        try:
            commit(empty, "new", force=False)
        except output.OutputRefused as e:
            seen["empty"] = str(e)
        seen["shared_after"] = sorted(os.listdir(shared_dir))
        return seen

    got = _as_nobody(scenario)
    assert "raised" not in got, got
    seen = got.get("result", got)
    assert seen["uid"] != 0, "the scenario ran unprivileged"
    assert "may not remove" in seen["ro"] and "chmod u+w" in seen["ro"], seen
    assert seen["ro_after"] == "old"
    assert "no permission to write in" in seen["o"] and "no permission to write in" in seen["new"]
    assert seen["parent_after"] == ["o"] and seen["shared_after"] == ["empty-ro", "parent", "ro"]
    assert "empty folder you may not write in" in seen.get("empty", ""), seen


# --- names ------------------------------------------------------------------------------------


def test_long_names_work_and_too_long_ones_are_usage_errors(tmp_path):
    name = "n" * 250  # fits the file system; our hidden sibling's name must too
    commit(tmp_path / name, "x")
    commit(tmp_path / name, "y")
    assert (tmp_path / name / "a.txt").read_text() == "y" and listing(tmp_path) == [name]
    write_output(tmp_path / ("c" * 250), "csv")  # a file's temporary too
    assert (tmp_path / ("c" * 250)).read_text() == "csv"
    from graph_harness.capture.files import OutputPathError

    with pytest.raises(output.OutputRefused, match="longer than its file system allows"):
        commit(tmp_path / ("n" * 300))
    with pytest.raises(OutputPathError, match="longer than its file system allows"):
        write_output(tmp_path / ("c" * 300), "csv")
    assert sorted(listing(tmp_path)) == sorted([name, "c" * 250])


def test_dot_dot_after_a_link_is_where_the_os_puts_it(tmp_path, monkeypatch):
    (tmp_path / "deep" / "inner").mkdir(parents=True)
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "link").symlink_to(tmp_path / "deep" / "inner")
    monkeypatch.chdir(tmp_path / "work")
    commit(Path("link/../x"), "here")
    # the OS resolves link first: link/.. is deep, not work
    assert (tmp_path / "deep" / "x" / "a.txt").read_text() == "here"
    assert listing(tmp_path / "work") == ["link"] and listing(tmp_path / "deep") == ["inner", "x"]
    assert Path("link/../x/a.txt").read_text() == "here"  # the same place the OS finds


def test_a_path_that_becomes_a_link_to_a_folder_mid_run_keeps_the_result_beside(tmp_path):
    # The bug (issue 44, 1): the commit opened the path through the link and compared it
    # with the link itself; they never matched, and it spun at full CPU forever.
    out, elsewhere = tmp_path / "o", tmp_path / "users-folder"
    commit(out, "old")
    elsewhere.mkdir()
    (elsewhere / "theirs.txt").write_text("keep me")
    done: list = []

    def run():
        try:
            with output.staged_output(out, True, command="test") as t:
                write_output(t / "a.txt", "new")
                for p in out.iterdir():  # the old output goes, a link takes its place
                    p.unlink()
                out.rmdir()
                out.symlink_to(elsewhere, target_is_directory=True)
        except Exception as e:  # what the run says
            done.append(e)

    th = threading.Thread(target=run, daemon=True)
    th.start()
    th.join(30)
    assert not th.is_alive(), "the commit spun"
    (err,) = done
    assert "changed while this run was going" in str(err) and "this run's result is in" in str(err)
    assert out.is_symlink() and listing(elsewhere) == ["theirs.txt"]  # the user's, untouched
    kept = [p for p in tmp_path.iterdir() if p.name.startswith("o.graph-harness-")]
    assert len(kept) == 1 and (kept[0] / "a.txt").read_text() == "new"
