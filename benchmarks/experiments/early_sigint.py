"""Ctrl-C in a command's first milliseconds (issue 31, item 5): what a SIGINT sent 0-60 ms
after spawn does, for the console script and for `python -m graph_harness`, and how long
the interpreter takes from spawn until graph-harness's handler is in place.

    python benchmarks/experiments/early_sigint.py [--trials 8] [--out FILE.csv]

(from the checkout's venv; about a minute on 2 cores). Four sweeps of signalled runs and one
of unsignalled ones, every run a fresh process with CUDA hidden (CUDA_VISIBLE_DEVICES=""),
stdin on /dev/null, in an empty folder, each sweep's runs shuffled (fixed seed) so that
drift in the machine's load does not line up with the delay:

  baseline  no signal, with the probe (below): the window itself, for each entry point.
  plain  `--version` (exits 0 in ~0.1 s, so exit 0 means "ran to completion"), console
         script and `python -m`, 0-60 ms in 1 ms steps; no PYTHONPATH, as a user runs it.
         The outcome distribution to quote.
  probe  the same every 2 ms, with a sitecustomize (the only entry on PYTHONPATH) that
         writes CLOCK_MONOTONIC to stderr at three instants: the end of `site` (.pth
         files done), the first lookup of `graph_harness`, and the first lookup of a
         `graph_harness.` submodule (the package's __init__ has run: our handler is in
         place; it writes which SIGINT handler is). perf_counter is CLOCK_MONOTONIC on
         Linux, so each run says whether its signal came before or after our handler.
  bare   the probe sweep, 0-30 ms, in a bare venv made for the run, whose one .pth lists
         paths only (the checkout, this venv's site-packages), the console script copied
         with that venv's shebang: a wheel install's start-up, without the editable
         install's finder (which `site` runs from this venv's .pth).
  count  `count --target tests.targets:small_mlp` (PYTHONPATH=the checkout, for
         tests.targets), every 4 ms: the same first milliseconds as --version, in a
         command that goes on to import torch. (`tests.targets:idle` exits 1, "no work".)

Each signalled run: spawn (perf_counter just before Popen), sleep to the delay (the last
millisecond spun), os.kill(SIGINT) (not Popen.send_signal, which skips the kill once the
child has exited); the time it was sent is recorded, and the summary buckets by it (5 ms),
not by the delay asked for. Rows go to the CSV with full precision, each with its session
(the start time); --append adds a session to an earlier file, as the load of a shared
machine moves every figure here (the window is CPU time: it stretches with contention).

Outcomes: ours-start (130, "stopped by SIGINT while starting"), ours-interrupted (130,
"interrupted; no partial output was left"), python-1 (1 and Python's report of a
KeyboardInterrupt, mostly a traceback: `site` failed, "Fatal Python error:
init_import_site", or `-m`'s "Could not import runpy module"; rarely the name alone),
traceback-sigint (an uncaught KeyboardInterrupt's traceback, then killed by SIGINT: a shell
shows 130), killed-sigint (killed by SIGINT with no output: Python's own handler was not
installed yet, or ours was reset after the command), completed (0: the signal was lost;
first_line says where: "Exception ignored in", "Failed checking if argv[0] is an import
path entry", "Error processing line 1 of ....pth"), other.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OURS = ("capture", "reports", "kernels", "pools", "graph_harness")  # our code's folders
OUTCOMES = (
    "ours-start",
    "ours-interrupted",
    "python-1",
    "traceback-sigint",
    "killed-sigint",
    "completed",
    "other",
)
BUCKET_MS = 5.0
# the rare outcomes keep their whole stderr (where the signal was lost, which frames it
# crossed); python-1, hundreds of site tracebacks, keeps its first and innermost lines
KEEP_STDERR = ("traceback-sigint", "completed", "other")
SESSION = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
ENTRY_ORDER = ("console", "module", "console-bare", "module-bare")

# sitecustomize for the probe sweep: builtins only (time, _signal; os and sys are loaded
# already), so it adds no import of its own to the start-up it times.
PROBE = r"""
import _signal, os, sys, time

_now = time.clock_gettime_ns
_MONO = time.CLOCK_MONOTONIC
os.write(2, b"probe site-end %d\n" % _now(_MONO))


class _Probe:
    seen_package = False
    seen_sub = False

    def find_spec(self, name, path=None, target=None):
        if name == "graph_harness" and not _Probe.seen_package:
            _Probe.seen_package = True
            os.write(2, b"probe gh-import %d\n" % _now(_MONO))
        elif name.startswith("graph_harness.") and not _Probe.seen_sub:
            _Probe.seen_sub = True
            t = _now(_MONO)
            h = _signal.getsignal(_signal.SIGINT)
            os.write(2, b"probe handler %d %s\n" % (t, getattr(h, "__name__", repr(h)).encode()))
        return None


sys.meta_path.insert(0, _Probe())
"""
PROBE_LINE = re.compile(r"^probe (site-end|gh-import|handler) (\d+)(?: (\S+))?$")
FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+)')


@dataclasses.dataclass(kw_only=True)
class Row:
    session: str  # when this invocation started (UTC): --append keeps several apart
    sweep: str  # baseline | plain | probe | bare | count
    entry: str  # console | module | console-bare | module-bare
    command: str
    trial: int
    target_ms: float | None  # the delay asked for; None: no signal sent
    sent_ms: float | None  # os.kill called, after spawn (perf_counter before Popen)
    popen_ms: float  # Popen returned (the child has exec'd)
    ended_ms: float  # communicate returned
    rc: int
    ran_to_completion: bool  # rc 0: the Ctrl-C was lost
    outcome: str
    traceback: bool
    fatal_site: bool  # "Fatal Python error": start-up failed (site, or the std streams)
    ignored_race: bool  # CPython's "Signal 2 ignored due to race condition"
    our_line: str  # start | interrupted | none
    through_ours: bool  # a traceback frame in one of our folders
    innermost: str  # the traceback's innermost frame, file:line
    first_line: str  # Python's own words ("Fatal Python error: init_import_site: ...")
    last_line: str
    stdout_head: str  # what the command printed (--version: its one line)
    stderr: str  # all of it (probe lines out) for KEEP_STDERR or a frame of ours, else ""
    site_end_ms: float | None  # probe: end of site, after spawn
    gh_import_ms: float | None  # probe: first lookup of graph_harness
    handler_ms: float | None  # probe: __init__ has run (first submodule lookup)
    handler_name: str
    signal_vs_handler: str  # probe: before | after | n/a
    load1: float


def _entries(bare: Path) -> dict[str, list[str]]:
    """The two ways in, in this venv (editable: its .pth runs the install's finder in
    `site`) and in a bare venv, which finds graph-harness and its dependencies through a
    .pth of paths only (no import line: what a wheel install's start-up costs)."""
    script = Path(sys.executable).parent / "graph-harness"
    if not script.exists():
        sys.exit(f"no console script at {script}: activate the checkout's venv first")
    bare_python = bare / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(bare_python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    deps = [str(REPO), *(p for p in sys.path if p.endswith("site-packages"))]
    (site / "early-sigint-paths.pth").write_text("".join(f"{d}\n" for d in deps))
    bare_script = bare / "bin" / "graph-harness"  # the same script, the bare venv's shebang
    body = script.read_text().split("\n", 1)[1]
    bare_script.write_text(f"#!{bare_python}\n{body}")
    bare_script.chmod(0o755)
    return {
        "console": [str(script)],
        "module": [sys.executable, "-m", "graph_harness"],
        "console-bare": [str(bare_script)],
        "module-bare": [str(bare_python), "-m", "graph_harness"],
    }


def _env(*pythonpath: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "PYTHONPATH")}
    env = {k: v for k, v in env.items() if not k.startswith("PYTHONSTARTUP")}
    env["CUDA_VISIBLE_DEVICES"] = ""
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(pythonpath)
    return env


def _wait_until(t: float) -> None:
    while True:
        left = t - time.perf_counter()
        if left <= 0:
            return
        if left > 0.0015:
            time.sleep(left - 0.001)  # sleep overshoots by ~0.1 ms: spin the last one


def _classify(rc: int, err: str) -> dict:
    traceback = "Traceback (most recent call last)" in err
    fatal = "Fatal Python error" in err
    start = "stopped by SIGINT while starting" in err
    interrupted = "interrupted; no partial output was left" in err
    frames = [m for m in (FRAME.match(ln) for ln in err.splitlines()) if m]
    ours = any(m.group(1).startswith(f"{REPO}/{d}/") for m in frames for d in OURS)
    if rc == 130 and start and not traceback:
        outcome = "ours-start"
    elif rc == 130 and interrupted and not traceback:
        outcome = "ours-interrupted"
    elif rc == 1 and "KeyboardInterrupt" in err:
        outcome = "python-1"
    elif rc == -signal.SIGINT and traceback:
        outcome = "traceback-sigint"
    elif rc == -signal.SIGINT and not err.strip():
        outcome = "killed-sigint"
    elif rc == 0:
        outcome = "completed"
    else:
        outcome = "other"
    inner = frames[-1] if frames else None
    lines = [ln for ln in err.splitlines() if ln.strip()]
    return dict(
        outcome=outcome,
        traceback=traceback,
        fatal_site=fatal,
        ignored_race="ignored due to race condition" in err,
        our_line="start" if start else "interrupted" if interrupted else "none",
        through_ours=ours,
        innermost=f"{inner.group(1)}:{inner.group(2)}" if inner else "",
        first_line=lines[0][:200] if lines else "",
        last_line=lines[-1][:200] if lines else "",
        stderr=err[:4000] if outcome in KEEP_STDERR or ours else "",
    )


def _probe_times(err: str, spawn_ns: int) -> tuple[dict, str]:
    """The probe's instants (ms after spawn) and the stderr without its lines."""
    seen: dict = {"site-end": None, "gh-import": None, "handler": None, "name": ""}
    rest = []
    for ln in err.splitlines(keepends=True):
        m = PROBE_LINE.match(ln.rstrip("\n"))
        if not m:
            rest.append(ln)
            continue
        seen[m.group(1)] = (int(m.group(2)) - spawn_ns) / 1e6
        if m.group(1) == "handler":
            seen["name"] = m.group(3) or ""
    return seen, "".join(rest)


def _one(
    *,
    sweep: str,
    entry: str,
    argv: list[str],
    env: dict,
    cwd: str,
    trial: int,
    delay_ms: float | None,
    probe: bool,
) -> Row:
    spawn_ns = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    t0 = time.perf_counter()
    p = subprocess.Popen(
        argv,
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="backslashreplace",
    )
    popen = time.perf_counter() - t0
    sent = None
    if delay_ms is not None:
        _wait_until(t0 + delay_ms / 1e3)
        sent = time.perf_counter() - t0
        os.kill(p.pid, signal.SIGINT)  # not reaped yet: the pid is still this child's
    try:
        out, err = p.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
    ended = time.perf_counter() - t0
    seen, err = _probe_times(err, spawn_ns) if probe else ({}, err)
    handler = seen.get("handler")
    if not probe or sent is None:
        vs = "n/a"
    else:
        vs = "after" if handler is not None and sent * 1e3 > handler else "before"
    return Row(
        session=SESSION,
        sweep=sweep,
        entry=entry,
        command=" ".join(argv[-3:] if sweep == "count" else argv[-1:]),
        trial=trial,
        target_ms=delay_ms,
        sent_ms=None if sent is None else sent * 1e3,
        popen_ms=popen * 1e3,
        ended_ms=ended * 1e3,
        rc=p.returncode,
        ran_to_completion=p.returncode == 0,
        site_end_ms=seen.get("site-end"),
        gh_import_ms=seen.get("gh-import"),
        handler_ms=handler,
        handler_name=seen.get("name", ""),
        signal_vs_handler=vs,
        load1=os.getloadavg()[0],
        stdout_head=out[:200],
        **_classify(p.returncode, err),
    )


def _sweep(
    name: str,
    entries: dict[str, list[str]],
    extra: list[str],
    delays: list[float],
    trials: int,
    cwd: str,
    probe_dir: str | None,
    rng: random.Random,
    path: list[str] = (),
) -> list[Row]:
    plan = [(e, d, t) for e in entries for d in delays for t in range(trials)]
    rng.shuffle(plan)
    rows = []
    t_start = time.perf_counter()
    for i, (entry, delay, trial) in enumerate(plan):
        env = _env(*([probe_dir] if probe_dir else []), *path)
        rows.append(
            _one(
                sweep=name,
                entry=entry,
                argv=entries[entry] + extra,
                env=env,
                cwd=cwd,
                trial=trial,
                delay_ms=delay,
                probe=probe_dir is not None,
            )
        )
        if (i + 1) % 200 == 0:
            print(
                f"  {name}: {i + 1}/{len(plan)} runs, {time.perf_counter() - t_start:.0f} s",
                file=sys.stderr,
            )
    return rows


def _reference(cwd: str, bare: Path, runs: int) -> list[tuple[str, float, float, float]]:
    """Spawn to the first statement of `-c` (median, min, max ms): this venv (its .pth
    files run) and the bare one, with site and without."""
    code = "import os, time; os.write(1, b'%d' % time.clock_gettime_ns(time.CLOCK_MONOTONIC))"
    out = []
    bare_python = str(bare / "bin" / "python")
    for label, argv in (
        ("venv python -c", [sys.executable]),
        ("venv python -S -c", [sys.executable, "-S"]),
        ("bare venv python -c", [bare_python]),
        ("bare venv python -c 'import re'", [bare_python]),
    ):
        stmt = ("import re; " + code) if "re'" in label else code
        ms = []
        for _ in range(runs):
            t = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
            r = subprocess.run(
                [*argv, "-c", stmt], env=_env(), cwd=cwd, capture_output=True, text=True, check=True
            )
            ms.append((int(r.stdout) - t) / 1e6)
        out.append((label, statistics.median(ms), min(ms), max(ms)))
    return out


def _stats(xs: list[float]) -> str:
    if not xs:
        return "n/a"
    xs = sorted(xs)
    return (
        f"median {statistics.median(xs):6.2f}  min {xs[0]:6.2f}  max {xs[-1]:6.2f}  (n={len(xs)})"
    )


def _summary(rows: list[Row], sweep: str) -> None:
    rows = [r for r in rows if r.sweep == sweep]
    if not rows:
        return
    short = {
        "ours-start": "130:start",
        "ours-interrupted": "130:intr",
        "python-1": "1:py",
        "traceback-sigint": "-2:tb",
        "killed-sigint": "-2:bare",
        "completed": "0:done",
        "other": "other",
    }
    print(f"\n== {sweep}: {rows[0].command}  (buckets of the actual send time, ms after spawn)")
    for entry in [e for e in ENTRY_ORDER if any(r.entry == e for r in rows)]:
        mine = [r for r in rows if r.entry == entry]
        print(
            f"\n{entry:<8} {'bucket':>11} "
            + " ".join(f"{short[o]:>10}" for o in OUTCOMES)
            + "      n"
        )
        top = max(r.sent_ms for r in mine)
        b = 0.0
        while b <= top:
            got = Counter(r.outcome for r in mine if b <= r.sent_ms < b + BUCKET_MS)
            if got:
                cells = " ".join(f"{got.get(o, 0):>10}" for o in OUTCOMES)
                print(
                    f"{'':<8} {f'{b:.0f}-{b + BUCKET_MS:.0f}':>11} {cells} {sum(got.values()):>6}"
                )
            b += BUCKET_MS
        total = Counter(r.outcome for r in mine)
        cells = " ".join(f"{total.get(o, 0):>10}" for o in OUTCOMES)
        print(f"{'':<8} {'all':>11} {cells} {len(mine):>6}")
        bad = [r for r in mine if not r.outcome.startswith("ours")]
        if bad:
            last = max(bad, key=lambda r: r.sent_ms)
            print(
                f"{'':<8} latest not-ours: {last.outcome} at {last.sent_ms:.2f} ms "
                f"(rc {last.rc}; {last.last_line[:90]!r})"
            )
        odd = Counter((r.outcome, r.first_line[:60], r.ignored_race, r.through_ours) for r in bad)
        for (o, first, race, ours), n in sorted(odd.items()):
            print(
                f"{'':<8} {n:>4} {o}: {first!r}"
                + (", race-ignored message" if race else "")
                + (", traceback through our files" if ours else "")
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=8, help="runs per delay and entry (plain)")
    ap.add_argument("--max-ms", type=float, default=60.0)
    ap.add_argument("--step-ms", type=float, default=1.0, help="delay step (plain)")
    ap.add_argument("--probe-trials", type=int, default=4, help="every 2 steps")
    ap.add_argument("--bare-trials", type=int, default=3, help="every step, to half --max-ms")
    ap.add_argument("--count-trials", type=int, default=2, help="every 4 steps")
    ap.add_argument("--baseline", type=int, default=30, help="unsignalled probe runs per entry")
    ap.add_argument("--seed", type=int, default=31)
    ap.add_argument("--out", type=Path, default=REPO / "docs/data/early-sigint-2026-12-01.csv")
    ap.add_argument(
        "--append", action="store_true", help="add this session's rows to --out's (same columns)"
    )
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="early-sigint-") as work:
        _measure(args, Path(work))


def _measure(args: argparse.Namespace, work: Path) -> None:
    rng = random.Random(args.seed)
    cwd = str(work / "cwd")  # empty: `python -m` puts it first on sys.path
    probe_dir = str(work / "probe")
    bare = work / "venv"
    os.mkdir(cwd)
    os.mkdir(probe_dir)
    Path(probe_dir, "sitecustomize.py").write_text(PROBE)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    entries = _entries(bare)
    installed = {k: v for k, v in entries.items() if not k.endswith("-bare")}
    bare_only = {k: v for k, v in entries.items() if k.endswith("-bare")}
    steps = round(args.max_ms / args.step_ms)
    delays = [i * args.step_ms for i in range(steps + 1)]

    print(
        f"python {sys.version.split()[0]} at {sys.executable}; {os.cpu_count()} CPUs; "
        f"load {os.getloadavg()[0]:.2f}; checkout {REPO}"
    )
    # warm the page cache and the .pyc files before anything is timed
    for argv in entries.values():
        for env in (_env(), _env(probe_dir)):
            r = subprocess.run([*argv, "--version"], env=env, cwd=cwd, capture_output=True)
            assert r.returncode == 0, r.stderr

    rows: list[Row] = []
    t_start = time.perf_counter()
    plan = [(entry, t) for entry in entries for t in range(args.baseline)]
    rng.shuffle(plan)  # interleaved, as the sweeps are
    for entry, t in plan:
        rows.append(
            _one(
                sweep="baseline",
                entry=entry,
                argv=entries[entry] + ["--version"],
                env=_env(probe_dir),
                cwd=cwd,
                trial=t,
                delay_ms=None,
                probe=True,
            )
        )
    rows += _sweep("plain", installed, ["--version"], delays, args.trials, cwd, None, rng)
    rows += _sweep(
        "probe", installed, ["--version"], delays[::2], args.probe_trials, cwd, probe_dir, rng
    )
    rows += _sweep(
        "bare",
        bare_only,
        ["--version"],
        delays[: steps // 2 + 1],
        args.bare_trials,
        cwd,
        probe_dir,
        rng,
    )
    count = ["count", "--target", "tests.targets:small_mlp"]
    rows += _sweep(
        "count", installed, count, delays[::4], args.count_trials, cwd, None, rng, path=[str(REPO)]
    )

    fields = [fl.name for fl in dataclasses.fields(Row)]
    earlier: list[dict] = []
    if args.append and args.out.exists():
        with args.out.open(newline="") as f:
            reader = csv.DictReader(f)
            if reader.fieldnames != fields:
                sys.exit(f"{args.out} has other columns than this script writes: not appended")
            earlier = list(reader)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_name(args.out.name + ".tmp")  # written beside, then renamed in
    with tmp.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(earlier)
        w.writerows(dataclasses.asdict(r) for r in rows)
    tmp.replace(args.out)
    print(
        f"session {SESSION}: wrote {len(rows)} rows to {args.out}"
        + (f" after {len(earlier)} earlier ones" if earlier else "")
        + f" ({time.perf_counter() - t_start:.0f} s)"
    )

    print("\n== spawn to the first statement of -c, no graph-harness (ms, 15 runs each)")
    for label, med, lo, hi in _reference(cwd, bare, 15):
        print(f"  {label:<30} median {med:6.2f}  min {lo:6.2f}  max {hi:6.2f}")
    print("\n== the window, unsignalled probe runs of --version (ms after spawn)")
    for entry in entries:
        base = [r for r in rows if r.sweep == "baseline" and r.entry == entry]
        names = Counter(r.handler_name for r in base)
        print(f"  {entry}:  SIGINT handler once the package's __init__ has run: {dict(names)}")
        print(f"    Popen returned   {_stats([r.popen_ms for r in base])}")
        print(f"    site done        {_stats([r.site_end_ms for r in base if r.site_end_ms])}")
        print(f"    graph_harness    {_stats([r.gh_import_ms for r in base if r.gh_import_ms])}")
        print(f"    handler in place {_stats([r.handler_ms for r in base if r.handler_ms])}")
        print(f"    process ended    {_stats([r.ended_ms for r in base])}")
    for sweep in ("plain", "probe", "bare", "count"):
        _summary(rows, sweep)
    print("\n== probe sweeps: outcome against the child's own instant of our handler")
    for entry in entries:
        for vs in ("before", "after"):
            got = Counter(
                r.outcome
                for r in rows
                if r.sweep in ("probe", "bare") and r.entry == entry and r.signal_vs_handler == vs
            )
            if got:
                print(f"  {entry:<13} signal {vs:<6} the handler: {dict(sorted(got.items()))}")


if __name__ == "__main__":
    main()
