"""benchmarks/bench_predict.py keeps what a prediction is made from (traces.json), so that
the model can be refitted without a GPU: written from a sweep's result made by hand, read
back as JSON (session 28: a frozen-dataclass SharedRow stopped the compiled MoE's run
after its sweep, at this write)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from tests.capture.sweep.fake_sweep import _fake_sweep

BENCH = Path(__file__).resolve().parents[3] / "benchmarks" / "bench_predict.py"


def test_the_traces_are_written_whole_and_read_back(tmp_path):
    spec = importlib.util.spec_from_file_location("bench_predict_for_tests", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    result = _fake_sweep()
    path = tmp_path / "traces.json"
    bench.write_traces(result, path)
    data = json.loads(path.read_text())
    assert [p.name for p in tmp_path.iterdir()] == ["traces.json"], "no .part left"
    want = result.shared[0]
    assert data["shared"] == [{
        "batch": want.batch, "total_reserved": want.total_reserved, "adds": want.adds,
        "total_allocated": want.total_allocated, "exec_bytes": None,
        "own_exec_bytes": None, "free_drop": None,
    }]  # fmt: skip
    assert sorted(data["execs"], key=int) == [str(r.batch) for r in result.rows]
