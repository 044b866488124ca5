"""The updated-executable check on real graphs (`check_updated`, `sweep --check updated`):
one executable switched by cudaGraphExecUpdate between every size of a ladder, each
launch against the size's own executable and its eager step. A right step passes; a
workspace re-allocated between captures fails, and is not blamed on the update; two
kernels of one name from two modules are told apart; the command passes the right step
and never fails the tiny llama. Factories: tests/capture/sweep/updated_steps.py.

Not yet run on a GPU when written: what only the device can confirm is said at each
assertion that depends on it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.capture.sweep import updated_steps as U

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parents[3]
RIGHT = "tests.capture.sweep.updated_steps:right"
FAST = ["--trials", "2", "--replays", "2", "--leak-replays", "2"]  # the timing is not tested here
PLACE = r"batch (\d+), call (\d+) \(visit (\d+) of (\d+), ([^)]*)\)"


@pytest.fixture(autouse=True)
def _fresh_plan():
    U.forget_plan()
    yield
    U.forget_plan()


def test_a_right_step_passes():
    """Elementwise kernels only: the same functions and launch attributes at every size.
    Before this check there was nothing to run; a check that compared an updated
    executable with nothing, or trusted the driver's "success", would pass it too: the
    counts below hold that every launch was compared, with both references."""
    from graph_harness.capture import check_updated

    r = check_updated(U.right, [1, 2, 4], steps=3, seed=0)
    assert r.status == "passed", r.verdict() + "\n" + "\n".join(f.message for f in r.findings)
    assert r.updates == 6 and len(r.transitions) == 7  # every transition, none refused
    assert r.compared == 7 and r.tensors > 0
    changed = [f.message for f in r.findings if f.kind == "attribute-unreadable"]
    assert r.function_changes == 0, changed
    assert not [f for f in r.findings if f.severity in ("fail", "unverified", "warn")]
    for c in r.costs:  # each update timed, beside a re-capture + instantiate of its size
        assert c.updates == 2 and c.update_us > 0 and c.recapture_us > 0 and c.nodes > 0
    assert "Priority" in r.attributes and "ClusterDimension" in r.attributes
    json.dumps(r.to_dict(), allow_nan=False)


def test_a_workspace_reallocated_between_captures_fails_and_the_update_is_not_blamed():
    """`reallocated`: each size's graph reads the plan that was current at its capture,
    freed when the next size was built (updated_steps.py says how). An update takes the
    new graph's parameters, pointers included, so the updated executable reads what a
    fresh one reads: both differ from the eager step, which reads the live plan. Before
    this check, nothing switched one executable between the sizes against the eager step;
    a check against a fresh executable alone would pass it (the two agree)."""
    from graph_harness.capture import check_updated

    r = check_updated(U.reallocated, [1, 2, 4], steps=2, seed=0)
    assert r.status == "failed" and r.exit_code == 1, r.verdict()
    fails = [f for f in r.findings if f.severity == "fail"]
    assert {f.kind for f in fails} == {"serving"}, [f.message for f in fails]
    f = fails[0]
    m = re.match(PLACE, f.message)
    assert m, f.message
    size = int(m.group(1))
    # the last size built (1) reads the live plan; 2 and 4 read the freed ones
    assert size in (2, 4) and r.by_size[1] == "passed", r.by_size
    assert "updated from batch" in m.group(5) or "instantiated from batch" in m.group(5)
    assert f.tensor == "output" and "eager call" in f.message
    assert "not the update's doing" in f.message  # its own executable computes the same


def test_two_kernels_of_one_name_from_two_modules_are_told_apart():
    """`one_name`: batch 1 and 2 run `scale_rows` of module A, batch 4 of module B (another
    function, the same name). The driver may change a kernel node's function within one
    context (CUDA 11.2 on: docs of cudaGraphExecUpdate), so the updates succeed and the
    updated executable computes B's rows; a tool keyed on names takes the two for one
    kernel, and the check says they are not. Only the GPU confirms that the updates
    succeed (a refusal would be `ErrorUnsupportedFunctionChange`) and that Triton names
    both kernels alike."""
    from graph_harness.capture import check_updated
    from graph_harness.capture.count import capture_and_keep
    from graph_harness.capture.graph.attributes import graph_launches

    # the premise, read from the graphs: one name, two functions
    kept = [capture_and_keep(U.one_name(b), warmup=2).captured.graph for b in (1, 4)]
    a, b = (graph_launches(g.raw_cuda_graph()).kernels for g in kept)
    assert len(a) == len(b) == 1 and a[0].kernel == b[0].kernel, (a, b)
    assert a[0].function != b[0].function
    del kept

    r = check_updated(U.one_name, [1, 2, 4], steps=2, seed=0)
    across = [t for t in r.transitions[1:] if 4 in (t.before, t.after)]
    assert len(across) == 4 and all(t.result == "success" for t in across), across
    one = [f for f in r.findings if f.kind == "one-name"]
    assert one and all(f.severity == "warn" and f.kernel == a[0].kernel for f in one), one
    # counted against the executable's origin (the size it was instantiated from, whose
    # values it keeps for what an update does not carry): each update into the other module
    origin = r.transitions[0].after
    into_other = [t for t in r.transitions[1:] if (t.after > 2) != (origin > 2)]
    assert r.function_changes == len(into_other) > 0
    # the updated executable computed B's rows (times 3): it agreed with batch 4's own
    # executable and its eager step
    assert not [f for f in r.findings if f.severity == "fail"], r.verdict()
    assert r.status == "passed", r.verdict()


def _cli(*argv):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("COLUMNS", None)
    return subprocess.run(
        [sys.executable, "-m", "graph_harness", *argv],
        capture_output=True, text=True, timeout=600, cwd=REPO, env=env,
    )  # fmt: skip


def test_the_command_passes_the_right_step(tmp_path):
    out = tmp_path / "right"
    r = _cli("sweep", "--target", RIGHT, "--sizes", "1", "2", "4", "--check", "updated",
             "--check-steps", "3", "--out", str(out), *FAST)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "One executable updated between sizes" in r.stdout
    assert "updated-executable check passed" in r.stdout
    doc = json.loads((out / "sweep.json").read_text())
    u = doc["updated"]
    assert u["status"] == "passed" and u["updates"] == 6 and len(u["costs"]) == 3
    assert [s["updated"] for s in doc["sizes"]] == ["passed"] * 3
    assert sorted(doc["checks"]) == ["batch1", "batch2", "batch4"]  # each alone first


def test_the_tiny_llama_is_never_failed():
    """A GEMM library may pick another kernel by batch size: an update the driver refuses
    is said (info), a launch attribute that differs is a doubt (exit 3); a right step is
    never failed, and every launch agrees with its own executable and eager step."""
    spec = f"{REPO / 'examples' / 'llama_decode.py'}:make_tiny_step"
    r = _cli("sweep", "--target", spec, "--sizes", "1", "2", "4", "--check", "updated",
             "--check-steps", "2", "--json", *FAST)  # fmt: skip
    assert r.returncode in (0, 3), r.stderr + r.stdout[-3000:]
    if r.returncode == 3:  # the doubt's findings, printed with the check's document
        doc = json.loads(r.stdout)["checks"]["updated"]
    else:
        doc = json.loads(r.stdout)["updated"]
    kinds = {f["kind"] for f in doc["findings"] if f["severity"] in ("fail", "unverified")}
    assert kinds <= {"attribute-differs", "unpaired", "none-updated"}, doc["findings"]
    assert len(doc["transitions"]) == 7 and doc["compared"] == 7
