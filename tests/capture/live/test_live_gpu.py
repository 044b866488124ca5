"""record --check on the GPU: the graphs real programs capture (an engine's `torch.cuda.graph`
blocks through an eager adapter, Inductor's cudagraph trees, make_graphed_callables),
each verdict set against what the program itself shows (its own account of acceptances,
captures and replays), and the program's output against a run without the recorder."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from graph_harness.capture import record_graphs
from graph_harness.capture.live.sample import Sample
from tests.llama_example import load_example

pytestmark = pytest.mark.gpu
REPO = Path(__file__).resolve().parents[3]
SPEC = REPO / "examples" / "spec_decode.py"


def _run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=600, **kw)


def _record_spec(variant: str, tmp_path: Path):
    out, stats = tmp_path / f"rec-{variant}", tmp_path / f"stats-{variant}.json"
    cmd = [
        sys.executable, "-m", "graph_harness", "record", "--check", "--out", str(out),
        "--eager", f"{SPEC}:eager_form", "--key", f"{SPEC}:record_key", "--",
        str(SPEC), "--variant", variant, "--tokens", "40", "--stats", str(stats),
    ]  # fmt: skip
    r = _run(cmd)
    alone = _run([sys.executable, str(SPEC), "--variant", variant, "--tokens", "40"])
    assert alone.returncode == 0, alone.stderr
    # checking never changes what the program prints
    assert r.stdout.startswith(alone.stdout), (r.stdout[:500], alone.stdout)
    doc = json.loads((out / "recording.json").read_text())
    return r, doc, json.loads(stats.read_text())


def _verdicts(doc) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for g in doc["graphs"]:
        out.setdefault(g["key"], []).append({**g["check"], "replays": g["replays"]})
    return out


def test_spec_decode_right_every_replayed_graph_agrees(tmp_path):
    r, doc, stats = _record_spec("right", tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert 3 in stats["accepted"], "no step accepted every draft: no catch-up to check"
    v = _verdicts(doc)
    assert set(v) == {"verify n=4", "draft n=1", "draft n=2"}, v.keys()
    for key, (g,) in v.items():
        assert g["replays"] == stats["replays"][key], (key, g, stats)
        assert g["status"] == "agrees" and g["source"] == "adapter", (key, g)
        assert g["compared_count"] >= min(8, g["replays"]), g
    assert "agree: 3 graphs" in r.stdout


def test_spec_decode_host_rollback_differs_at_the_first_step_after_a_rejection(tmp_path):
    r, doc, stats = _record_spec("host-rollback", tmp_path)
    assert r.returncode == 1, r.stderr[-3000:]
    # the program's own account: the first step that rejected a draft; the next verify is
    # the first whose rollback is not 0 (replay numbers count from 1)
    # replay r (from 1) is wrong when the step before it rejected a draft (its rollback
    # is then not 0): the first such r the default sample checks
    accepted = stats["accepted"]
    sample, n = Sample(), 1
    while not (n >= 2 and accepted[n - 2] < 3):
        n = sample.next_after(n)
    (g,) = _verdicts(doc)["verify n=4"]
    assert g["status"] == "differs", g
    first = g["differences"][0]
    assert first["replay"] == n, (g, accepted)
    (k,) = [d for d in g["differences"] if d["tensor"] == "target.k_cache"]
    # the node named is the one the program writes its KV with (index_copy_), found from
    # the nodes' addresses: a matmul reads k_cache too, after it
    assert k["node"] and "index" in k["node"], k
    for key in ("draft n=1", "draft n=2"):  # the drafts are right
        assert all(x["status"] in ("agrees", "unchecked") for x in _verdicts(doc)[key]), key
    assert "DIFFERS: main verify n=4: differs first at replay" in r.stdout, r.stdout[-2000:]


def test_spec_decode_shared_key_recaptures_counted_under_one_key(tmp_path):
    r, doc, stats = _record_spec("shared-key", tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert 3 in stats["accepted"], "no step accepted every draft: no catch-up shape"
    drafts = _verdicts(doc)["draft"]
    assert len(drafts) == stats["captures"]["draft"] > 2, (len(drafts), stats["captures"])
    assert sum(g["replays"] for g in drafts) == stats["replays"]["draft"]
    assert all(g["status"] in ("agrees", "unchecked") for g in drafts), drafts
    assert f"({len(drafts)} captures) share 'draft'" in r.stdout, r.stdout[-2000:]


def test_spec_decode_never_replayed_graph_named(tmp_path):
    r, doc, stats = _record_spec("never-replayed", tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    (g,) = _verdicts(doc)["draft n=3"]
    assert g["replays"] == 0 and g["status"] == "unchecked", g
    assert "draft n=3" not in stats["replays"]
    assert "captured, never replayed: 1 graph" in r.stdout and "draft n=3" in r.stdout


ASSERTS = r"""
import sys, torch

WINDOW = 6
cache = torch.zeros(WINDOW, 4, device="cuda")
pos = torch.zeros((), dtype=torch.long, device="cuda")
row = torch.ones(4, device="cuda")
host = {"pos": 0}

def step():
    # a sliding window: the slot is pos modulo the window once it is full (decided on the
    # host: a graph captured before the window filled keeps the unwrapped index)
    idx = pos.view(1) % WINDOW if host["pos"] >= WINDOW else pos.view(1)
    cache.index_copy_(0, idx, (row * (pos + 1)).view(1, 4))
    pos.add_(1)
    return cache.sum()

def eager_form(ctx):
    from graph_harness.capture import EagerForm
    return EagerForm(fn=step, state={"cache": cache, "pos": pos}, outputs=lambda: out)

if __name__ == "__main__":
    step(); torch.cuda.synchronize(); cache.zero_(); pos.zero_()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = step()
    for i in range(WINDOW + 2):
        g.replay()
        host["pos"] += 1
        print("replayed", i + 1, flush=True)
    torch.cuda.synchronize()
    print("done")
"""


def test_a_replay_that_trips_a_device_assertion_is_reported_not_dumped(tmp_path):
    prog = tmp_path / "window.py"
    prog.write_text(ASSERTS)
    out = tmp_path / "rec"
    cmd = [
        sys.executable, "-m", "graph_harness", "record", "--check", "--out", str(out),
        "--eager", f"{prog}:eager_form", "--", str(prog),
    ]  # fmt: skip
    r = _run(cmd)
    assert r.returncode == 1, (r.returncode, r.stderr[-3000:])
    # replay 7 indexes row 6 of a 6-row cache; its eager form wraps to row 0
    assert "replayed 6" in r.stdout and "replayed 7" not in r.stdout, r.stdout
    assert "graph-harness record --check: " in r.stderr and "replay 7" in r.stderr, r.stderr
    assert "core dumped" not in r.stderr and "terminate called" not in r.stderr, r.stderr
    doc = json.loads((out / "recording.json").read_text())
    (g,) = doc["graphs"]
    assert g["check"]["status"] == "assert", g["check"]
    assert g["check"]["assertion"].startswith("replay 7: the replay tripped it"), g["check"]
    assert "DEVICE ASSERT" in r.stdout or "device-side assertion" in r.stdout, r.stdout


def test_an_unchecked_replay_that_trips_an_assertion_is_named_by_the_devices_count(tmp_path):
    # compared replays 1, 2, 4, 8 (--check-sample 2): replay 7 is not one; the error
    # surfaces at replay 8's first sync, and the device's count of finished replays names 7
    prog = tmp_path / "window.py"
    prog.write_text(ASSERTS)
    out = tmp_path / "rec"
    cmd = [
        sys.executable, "-m", "graph_harness", "record", "--check", "--check-sample", "2",
        "--out", str(out), "--eager", f"{prog}:eager_form", "--", str(prog),
    ]  # fmt: skip
    r = _run(cmd)
    assert r.returncode == 1, (r.returncode, r.stderr[-3000:])
    assert "core dumped" not in r.stderr and "terminate called" not in r.stderr, r.stderr
    (g,) = json.loads((out / "recording.json").read_text())["graphs"]
    assert g["check"]["status"] == "assert", g["check"]
    assert g["check"]["assertion"].startswith("replay 7: the replay tripped it (not a compared"), g
    assert g["check"]["compared"] == [1, 2, 4], g["check"]


def _reduce_overhead_step():
    # a fresh compile and fresh trees: the graphs of this test are captured under its record
    torch._dynamo.reset()
    from torch._inductor.cudagraph_trees import reset_cudagraph_trees

    reset_cudagraph_trees()
    return load_example("llama").make_step(compiled="reduce-overhead", preset="tiny")


def test_inductor_trees_checked_without_help_and_the_outputs_unchanged():
    step = _reduce_overhead_step()
    outs = []
    with record_graphs(children=False, check=True) as rec:
        for _ in range(12):
            o = step()
            outs.append([t.clone() for t in (o if isinstance(o, (list, tuple)) else [o])])
        torch.cuda.synchronize()
    replayed = [g for g in rec.graphs if g.replays]
    assert replayed, [(g.key, g.replays) for g in rec.graphs]
    for g in replayed:
        assert g.check.source == "inductor" and g.check.status == "agrees", g.check.line()
        assert g.check.compared_count >= min(8, g.replays)
    # the same calls without the checker give the same outputs, bit for bit
    again = _reduce_overhead_step()
    for i in range(12):
        o = again()
        o = o if isinstance(o, (list, tuple)) else [o]
        assert all(torch.equal(a, b) for a, b in zip(outs[i], o)), i


def test_inductor_form_sees_a_replay_that_differs():
    # Not vacuous: the same tree, with one output of its eager form changed (what a stale
    # buffer would do), is found at the first checked replay after the change. In a
    # process of its own (tests/capture/live/bent_inductor.py says why).
    r = _run([sys.executable, "-m", "tests.capture.live.bent_inductor"])
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads(r.stdout.strip().splitlines()[-1])
    bent = [g for g in doc["graphs"] if g["bent"]]
    assert bent, doc
    assert all(g["check"] == "differs" for g in bent), doc
    # the same tree unbent agrees: test_inductor_trees_checked_without_help_...


def test_make_graphed_callables_forward_checked_backward_said_why():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    model = model.cuda()
    x = torch.randn(16, 32, device="cuda")
    losses = []
    with record_graphs(children=False, check=True) as rec:
        graphed = torch.cuda.make_graphed_callables(model, (x,))
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        for _i in range(5):
            loss = graphed(torch.randn(16, 32, device="cuda")).square().mean()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=False)
            losses.append(float(loss))
    fwd = [g for g in rec.graphs if g.check and g.check.source == "make_graphed_callables"]
    assert len(fwd) == 1 and fwd[0].check.status == "agrees", [g.check.line() for g in rec.graphs]
    bwd = [g for g in rec.graphs if g.check and g.check.status == "skipped"]
    assert len(bwd) == 1 and "backward graph" in bwd[0].check.reason
    assert fwd[0].replays == 5, "one replay per forward: the eager form never replays it"
    assert len(losses) == 5 and all(torch.isfinite(torch.tensor(losses)))
