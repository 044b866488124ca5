"""The tiny llama compiled with `reduce-overhead`, recorded with --check, with one output
of its tree's eager form changed after the first recorded replay (what a stale buffer
would do); prints each graph's verdict as JSON. Run in a process of its own by
test_live_gpu.py, so that the compile and the trees are this program's alone. The
Recording is filled when the block ends: inside it, the graphs are the process
recorder's own records (capture/record/process.py), reached here as a test may.

    python -m tests.capture.live.bent_inductor
"""

from __future__ import annotations

import json

import torch

from graph_harness.capture import record_graphs
from graph_harness.capture.record import process
from tests.llama_example import load_example


def bend(form) -> None:
    """`form`'s outputs, the first floating one plus 1 after each eager run."""
    real = form.outputs

    def bent():
        got = real()
        for t in got.values():
            if t.is_floating_point():
                t.add_(1)
                break
        return got

    form.outputs = bent


def main() -> None:
    step = load_example("llama").make_step(compiled="reduce-overhead", preset="tiny")
    seen, calls, live = [], 0, []
    with record_graphs(children=False, check=True) as rec:
        (recorder,) = list(process._LIVE)
        # as many calls as the tree takes to record this function's graphs
        for n in range(1, 13):
            calls = n
            step()
            torch.cuda.synchronize()
            live = [g for g in recorder.records if g.live is not None and g.replays]
            if live:
                break
        for g in live:
            bend(g.live.form)
            g.live.next = g.replays + 1
        for _ in range(2):
            step()
        torch.cuda.synchronize()
    bent_keys = {g.key for g in live}
    for g in rec.graphs:  # copies of the records, taken as the block ended
        seen.append(dict(key=g.key, replays=g.replays, bent=g.key in bent_keys,
                         check=None if g.check is None else g.check.status,
                         line=None if g.check is None else g.check.line()))  # fmt: skip
    print(json.dumps({"calls_to_record": calls, "graphs": seen}))


if __name__ == "__main__":
    main()
