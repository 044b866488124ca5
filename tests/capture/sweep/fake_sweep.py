"""A GPU sweep's result made by hand (replay time 100 + 10 * batch us, own pools 2 MiB x
batch), for the tests of what is computed and drawn from a sweep without a GPU."""


def _fake_sweep(sizes=(1, 2, 4, 8)):
    """A GPU sweep's result made by hand, for what is computed and drawn from it: replay
    time 100 + 10 * batch us, own pools 2 MiB x batch."""
    from graph_harness.capture.export.nodes import NodeExport
    from graph_harness.capture.sweep.document import SweepResult, size_name
    from graph_harness.capture.sweep.tables import SizeRow
    from graph_harness.capture.sweep.truth import SharedRow

    node = dict(index=0, type="kernel", kernel="k", grid=None, block=None, stage=None,
                step="unscoped", scope="unscoped", scope_path=[], deps=[], parent=None)  # fmt: skip
    rows, exports = [], {}
    for b in sizes:
        us = 100.0 + 10 * b
        rows.append(SizeRow(batch=b, nodes=1, by_type={"kernel": 1}, capture_s=0.1,
                            replay_us=us, replay_lo=us - 1, replay_hi=us + 1,
                            trials=(us - 1, us, us + 1), reserved=b << 21,
                            allocated=b << 10, leak=0, leak_device=0))  # fmt: skip
        exports[size_name(b)] = NodeExport(
            source="cuda-graph", workload="callable:f", variant=None, params=None,
            nodes=[dict(node)],
        )  # fmt: skip
    shared = [SharedRow(batch=8, total_reserved=16 << 20, adds=16 << 20, total_allocated=8 << 10)]
    return SweepResult(rows=rows, exports=exports, name="f", shared=shared)
