"""The sweep's memory against the common estimators (capture/sweep/estimate.py), its
start-up shares, and a sweep document of the version before them still read for its
exports: on the CPU, from rows with known figures."""

import json
from dataclasses import replace

import pytest

from graph_harness.capture.sweep.estimate import estimates
from graph_harness.capture.sweep.truth import SharedRow, true_execs, true_total
from tests.capture.sweep.fake_sweep import _fake_sweep as fake_sweep

MIB = 1 << 20


def row(**kw) -> SharedRow:
    """A shared-pool row; what the test does not set, not read (None) or nothing in use."""
    return SharedRow(**{"adds": None, "total_allocated": 0, **kw})


def test_the_truth_is_the_shared_pool_after_its_last_size_plus_every_executable():
    shared = [
        row(batch=8, total_reserved=100 * MIB, adds=100 * MIB, exec_bytes=2 * MIB),
        row(batch=1, total_reserved=104 * MIB, adds=4 * MIB, exec_bytes=0),
    ]
    assert true_total(shared) == 106 * MIB
    assert true_total([replace(shared[0], exec_bytes=None)]) is None and true_total([]) is None


def test_executables_are_the_larger_of_the_two_phases_readings_so_far():
    # the shared pool's executables reuse the pages the own-pool ones left (readings of 0
    # on the H100): each phase's sum is at most the truth, so the larger is taken
    shared = [
        row(batch=8, total_reserved=100 * MIB, exec_bytes=0, own_exec_bytes=2 * MIB),
        row(batch=4, total_reserved=100 * MIB, exec_bytes=0, own_exec_bytes=0),
        row(batch=2, total_reserved=102 * MIB, exec_bytes=2 * MIB, own_exec_bytes=2 * MIB),
        row(batch=1, total_reserved=102 * MIB, exec_bytes=2 * MIB, own_exec_bytes=0),
    ]
    assert true_execs(shared) == [2 * MIB, 2 * MIB, 4 * MIB, 4 * MIB]
    assert true_total(shared) == 106 * MIB
    # without the own-pool readings (not read): the shared pool's own
    older = [replace(r, own_exec_bytes=None) for r in shared]
    assert true_execs(older) == [0, 0, 2 * MIB, 4 * MIB]


def test_each_estimator_against_the_truth():
    # sizes alone: 1 -> 10 MiB, 2 -> 14, 4 -> 30, 8 -> 38 (pool plus executable)
    own = {1: 10 * MIB, 2: 14 * MIB, 4: 30 * MIB, 8: 38 * MIB}
    rows = {r.estimator: r for r in estimates(own, 50 * MIB)}
    # the line through (1, 10) and (8, 38): 4 MiB per row, at 1, 2, 4, 8: 10+14+22+38
    assert rows["linear from two sizes"].bytes == 84 * MIB
    assert rows["sum of per-size deltas"].bytes == 92 * MIB
    assert rows["linear from two sizes"].error == pytest.approx(84 / 50 - 1)
    assert rows["sum of per-size deltas"].true_bytes == 50 * MIB
    (one,) = [r for r in estimates({4: 7}, 7) if r.estimator == "linear from two sizes"]
    assert one.bytes == 7 and one.error == 0


def test_the_sweep_sets_them_beside_its_truth_and_says_where_its_start_up_went(tmp_path):
    from dataclasses import replace

    base = fake_sweep()
    rows = [
        replace(r, reserved=(4 + i) * MIB, exec_bytes=0, instantiate_s=0.001 * (i + 1),
                upload_s=0.002, capture_s=0.5, compile_s=0.25)
        for i, r in enumerate(base.rows)
    ]  # fmt: skip
    shared = [SharedRow(batch=r.batch, total_reserved=(6 + i) * MIB, adds=MIB,
                        total_allocated=0, exec_bytes=0)
              for i, r in enumerate(reversed(rows))]  # fmt: skip
    result = replace(base, rows=rows, shared=shared, returned=(5 + len(rows)) * MIB)
    est = result.estimate_table().set_index("estimator")
    assert (est.true_bytes == (5 + len(rows)) * MIB).all()
    own = sum((4 + i) * MIB for i in range(len(rows)))
    assert est.loc["sum of per-size deltas", "bytes"] == own
    start = result.startup_table().set_index("phase")
    assert start.loc["compile", "seconds"] == pytest.approx(0.25 * len(rows))
    assert start.loc[
        "warm-ups and capture (graph-harness's reads in it)", "seconds"
    ] == pytest.approx(0.25 * len(rows))
    assert start.share.sum() == pytest.approx(1.0)
    written = result.write(tmp_path)
    assert {"sweep-memory-estimates.csv", "sweep-startup.csv"} <= set(written)
    doc = json.loads((tmp_path / "sweep.json").read_text())
    assert doc["returned"] == result.returned and len(doc["memory_estimates"]) == 2
    # a sweep without executables read (the CPU's, or an Inductor step's) has neither
    assert base.estimate_table().empty and base.startup_table().empty


def test_a_sweep_of_the_version_before_is_still_read_for_its_exports(tmp_path):
    from graph_harness.capture.export.kinds import read_export as load_export

    doc = fake_sweep().to_dict()
    doc["schema_version"] = 1
    for k in ("returned", "memory_estimates", "startup"):
        del doc[k]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(doc))
    name = next(iter(doc["exports"]))
    assert load_export(f"{path}#{name}").total == doc["exports"][name]["total_nodes"]
    doc["schema_version"] = 3
    path.write_text(json.dumps(doc))
    with pytest.raises(Exception, match="3 is not a version of a sweep this graph-harness reads"):
        load_export(f"{path}#{name}")
