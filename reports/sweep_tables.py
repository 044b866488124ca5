"""Rich tables of a sweep (capture/sweep/document.py): the sizes, the shared pool, the
interleaved check, the updated-executable check's costs, memory by module, and each
request distribution's ladders. Renders; never measures."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table

if TYPE_CHECKING:
    from graph_harness.capture.sweep.document import SweepResult
    from graph_harness.capture.sweep.tables import SizeRow


STATUS_COLUMNS = ("check", "interleaved", "updated")  # SizeRow's statuses, in this order


def mib(n: int | None) -> str:
    """Bytes as MiB in a table's cell (also the forecast's tables)."""
    return "-" if n is None else f"{n / 2**20:,.1f}"


def _s(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def _us(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def sizes_table(result: SweepResult) -> Table:
    measured = result.measured
    where = "CUDA graph nodes" if measured else "CPU dispatch count (not graph nodes)"
    t = Table(title=f"{result.name}: one graph per batch size - {where}")
    for c in ("batch", "nodes"):
        t.add_column(c, justify="right")
    types = sorted({k for r in result.rows for k in r.by_type})
    for ty in types:
        t.add_column(ty, justify="right")
    t.add_column("warm-up + capture s", justify="right")
    hosts = measured and any(r.host_launch_us is not None for r in result.rows)
    execs = measured and any(r.exec_bytes is not None for r in result.rows)
    if measured:
        _measured_columns(t, hosts=hosts, execs=execs)
    # each check's status: "check" on the CPU too (its eager part's verdict); the shared
    # pool's checks replay graphs (a GPU)
    marks = [c for c in STATUS_COLUMNS if (measured or c == "check")
             and any(getattr(r, c) for r in result.rows)]  # fmt: skip
    for c in marks:
        t.add_column(c)
    for r in result.rows:
        cells = [str(r.batch), str(r.nodes), *(str(r.by_type.get(ty, 0)) for ty in types)]
        cells.append(_s(r.capture_s))
        if measured:
            cells += _measured_cells(r, hosts=hosts, execs=execs)
        cells += [getattr(r, c) or "-" for c in marks]
        t.add_row(*cells)
    t.caption = _sizes_caption(result)
    return t


def _measured_columns(t: Table, *, hosts: bool, execs: bool) -> None:
    """The columns only a GPU measures: compile, replay, throughput, host launch (where
    any was timed), pool, executable (where any was read), leak."""
    t.add_column("compile s", justify="right")
    t.add_column("replay us [95%]", justify="right")
    t.add_column("rows/s", justify="right")
    if hosts:
        t.add_column("host launch us", justify="right")
    t.add_column("pool MiB (in use)", justify="right")
    if execs:
        t.add_column("executable MiB", justify="right")
    t.add_column("leak B (device)", justify="right")


def _measured_cells(r: SizeRow, *, hosts: bool, execs: bool) -> list[str]:
    """A size's cells of the columns only a GPU measures (_measured_columns)."""
    return [
        _s(r.compile_s),
        f"{r.replay_us:.1f} [{r.replay_lo:.1f}, {r.replay_hi:.1f}]",
        f"{r.rows_per_s:,.0f}",
        *([_us(r.host_launch_us)] if hosts else []),
        f"{mib(r.reserved)} ({mib(r.allocated)})",
        *([mib(r.exec_bytes)] if execs else []),
        f"{r.leak} ({r.leak_device})",
    ]


def _sizes_caption(result: SweepResult) -> str | None:
    """What the sizes table's figures are: on the CPU, why none are measured; else how
    each column was measured, a step's own Inductor graphs or graphs of ours."""
    if not result.measured:
        return result.why_not
    if result.options.get("cudagraphs") == "inductor":
        caption = (
            "each size's own graphs, recorded as Inductor captured them (mode="
            "'reduce-overhead'); replay: a call of the step, which replays them; pool: none "
            "of its own (Inductor's one pool, below); leak: what that pool (and the "
            "device's memory in use) grew by over the leak check's calls from the reset; "
            "compile: the first warm-up call over the others"
        )
    else:
        caption = (
            "warm-up + capture: as graph-harness captures (its fingerprints, node read and "
            "allocator history included; the first size captured, the largest, also carries "
            "the process's one-time costs); pool: the graph's own pool just after capture "
            "(reserved, and in use); leak: what the pool (and the device's memory in use) "
            "grew by over the leak check's replays from the reset; compile: a compiled "
            "step's first warm-up call over the others"
        )
    if any(r.host_launch_us is not None for r in result.rows):
        caption += (
            "; host launch: the CPU time of one replay() call from an idle device, median "
            "(inductor's: a call of the step)"
        )
    return caption


def checks_line(result: SweepResult) -> str | None:
    """The sizes' checks in one line (through the CLI, a check that did not pass stopped
    the sweep with its findings): which passed and, where no graph was replayed (the
    CPU), how far that goes."""
    checks = list(result.checks.values())
    if not checks:
        return None
    if not all(r.passed for r in checks):
        return "; ".join(r.headline() for r in checks)
    sizes = ", ".join(str(r.batch) for r in sorted(result.rows, key=lambda r: r.batch) if r.check)
    lead = f"check passed for every batch size ({sizes})"
    eager = next((r for r in checks if not r.compared), None)
    return lead if eager is None else f"{lead} as far as the CPU goes; {eager.why_not}"


def shared_pool_table(result: SweepResult) -> Table:
    t = Table(title="Every size in one shared pool, captured largest first")
    execs = any(row.exec_bytes is not None for row in result.shared or [])
    cols = ["batch", "pool MiB after it", "it adds MiB", "in use MiB"]
    for c in cols + (["executable MiB"] if execs else []):
        t.add_column(c, justify="right")
    for row in result.shared or []:
        cells = [str(row.batch), mib(row.total_reserved), mib(row.adds),
                 mib(row.total_allocated)]  # fmt: skip
        t.add_row(*cells, *([mib(row.exec_bytes)] if execs else []))
    total = result.shared[-1].total_reserved if result.shared else 0
    if result.options.get("cudagraphs") == "inductor":
        t.title = "Inductor's one pool (every size's graphs), read as each was recorded"
        t.caption = (
            f"pool total {mib(total)} MiB; a step compiled with mode='reduce-overhead' "
            "records its graphs into the pool Inductor keeps for every cudagraph tree of "
            "the device, so no size has a pool of its own; each size adds what its "
            "recording took (under module scopes, the one outside them), the first size's "
            "unknown (-: the pool may hold graphs recorded before the sweep)"
        )
        return t
    own = sum(r.reserved or 0 for r in result.rows)
    t.caption = f"shared total {mib(total)} MiB against {mib(own)} MiB in own pools"
    return t


def memory_truth_table(result: SweepResult) -> Table | None:
    """The graphs' true memory (the shared pool plus every executable) against what the
    common estimators give from the sizes captured alone (capture/sweep/estimate.py);
    None where the sweep did not read both."""
    df = result.estimate_table()
    if df.empty:
        return None
    t = Table(title="Graph memory, all sizes: the truth against the estimators", min_width=88)
    for c in ("estimator", "MiB", "true MiB", "error"):
        t.add_column(c, justify="left" if c == "estimator" else "right")
    for r in df.itertuples():
        err = "-" if r.error is None or r.error != r.error else f"{100 * r.error:+.1f}%"
        t.add_row(r.estimator, mib(r.bytes), mib(r.true_bytes), err)
    back = result.returned
    true = int(df.true_bytes.iloc[0])
    t.caption = (
        "true: the shared pool after its last size plus every size's executable (device "
        "memory outside the allocator, read to the driver's 2 MiB page); linear from two "
        "sizes: the smallest and largest size alone, a line through them summed over the "
        "sizes; sum of per-size deltas: every size alone, summed"
        + ("" if back is None else f"; freeing them gave back {mib(back)} of {mib(true)} MiB")
    )
    return t


def startup_table(result: SweepResult) -> Table | None:
    """Where the sweep's start-up (own pools) went: warm-ups and capture, compile,
    instantiate, upload; None where not measured."""
    df = result.startup_table()
    if df.empty:
        return None
    t = Table(title="Start-up, all sizes")
    for c in ("phase", "seconds", "share"):
        t.add_column(c, justify="left" if c == "phase" else "right")
    for r in df.itertuples():
        share = "-" if r.share is None or r.share != r.share else f"{100 * r.share:.1f}%"
        t.add_row(r.phase, f"{r.seconds:.3f}", share)
    return t


def interleaved_table(result: SweepResult) -> Table:
    """The interleaved check (capture/check/interleaved.py): per size, in capture order, its
    calls replayed and its status; the seed and the replays in the caption (the verdict is
    a line of its own: a table's caption wraps to its width)."""
    r = result.interleaved
    t = Table(title="Sizes interleaved in one pool", min_width=50)
    t.add_column("batch", justify="right")
    t.add_column("calls", justify="right")
    t.add_column("status")
    for b in r.sizes:
        t.add_row(str(b), str(r.steps), r.by_size.get(b, "-"))
    t.caption = f"{r.replays} replays in a serving order dealt with seed {r.seed}"
    return t


def updated_table(result: SweepResult) -> Table:
    """The updated-executable check (capture/check/updated.py): per size, in capture order,
    its nodes, the updates into it and their median host time (whole, and per node)
    beside capturing and instantiating its graph again, and its status."""
    r = result.updated
    t = Table(title="One executable updated between sizes", min_width=60)
    for c in ("batch", "nodes", "updates", "update us", "us/node", "re-capture + inst. us"):
        t.add_column(c, justify="right")
    t.add_column("status")
    costs = {c.batch: c for c in r.costs}
    for b in r.sizes:
        c = costs.get(b)
        if c is None:
            t.add_row(str(b), "-", "-", "-", "-", "-", r.by_size.get(b, "-"))
            continue
        per = "-" if c.per_node_us is None else f"{c.per_node_us:.3f}"
        t.add_row(str(b), str(c.nodes), str(c.updates), _us(c.update_us), per,
                  _us(c.recapture_us), r.by_size.get(b, "-"))  # fmt: skip
    refused = len(r.transitions) - 1 - r.updates
    t.caption = (
        f"{r.updates} updates ({refused} refused) in a walk through every transition, seed "
        f"{r.seed}; host times, medians; a refused update's size was instantiated anew"
    )
    return t


def memory_by_module_table(result: SweepResult, depth: int | None) -> Table | None:
    df = result.memory_by_module(depth)
    if df.empty:
        return None
    wide = df.pivot_table(index="scope", columns="batch", values="reserved", aggfunc="sum")
    wide = wide.fillna(0).astype(int)
    t = Table(title="Graph memory by module: pool segments each took, MiB")
    t.add_column("scope", no_wrap=True)
    for b in wide.columns:
        t.add_column(f"batch {b}", justify="right")
    for scope, row in wide.iterrows():
        t.add_row(str(scope), *(mib(int(v)) for v in row))
    t.caption = (
        "the segments the pool took from the driver while each scope was open; a scope "
        "whose work fit in segments already taken shows 0 (sweep-memory-by-scope.csv has "
        "every allocation's bytes)"
    )
    return t


def ladders_tables(result: SweepResult) -> list[Table]:
    """Per request distribution, its ladders; with no replay times (the CPU), their
    padded rows alone (capture/sweep/document.py `_by_rows`)."""
    out = []
    timed = result.measured
    for p in result.padding:
        what = "time per step" if timed else "padded rows"
        t = Table(title=f"Requests {p.requests}: {what} by ladder")
        cols = ["ladder", "sizes", "graphs"]
        cols += ["own pools MiB", "us/step", "exact us", "lost to padding us"] * timed
        for c in (*cols, "padding rows"):
            t.add_column(c, justify="right" if c not in ("ladder", "sizes") else "left")
        for c in p.ladders:
            cells = [c.name + (" *" if c.interpolated else ""), " ".join(map(str, c.sizes))]
            cells.append(str(c.graphs))
            if timed:
                cells += [mib(c.memory), f"{c.expected_us:.1f}", f"{c.exact_us:.1f}"]
                cells.append(f"{c.lost_us:.1f}")
            cells.append(f"{100 * c.padding_share:.1f}%")
            t.add_row(*cells)
        t.caption = (
            f"chosen: {list(p.chosen)} ({p.how}); * rests on a size not swept (times and "
            "memory interpolated between the sizes swept, the smallest's below it)"
            if timed
            else f"chosen: {list(p.chosen)} ({p.how}); padding rows: the share of the rows "
            "replayed that are padding"
        )
        out.append(t)
    return out
