"""`record --check`: the graphs a program captures, checked while it runs. At a sample of
each graph's replays, what the replay computes is compared with what the captured code
computes eagerly from the same inputs and state, and the program is left exactly the state
the replay left.

- forms.py: a graph's eager form (Inductor's cudagraph trees, make_graphed_callables'
  forward graphs, an engine's `--eager` adapter), found as its capture begins
- sample.py: which replays are checked (every one up to 8, then geometrically)
- (the verdict, as the recording keeps it: capture/record/verdict.py)
- compare.py: eager twice (non-determinism measured) against the replay, tensor by tensor
- checked.py: one checked replay (snapshot, eager, restore, replay, compare), and the
  process's checker that record's hooks call
- writers.py: the node that writes a tensor that differs (its addresses, in words)
- lost.py: an error that loses the GPU context, and the process ended in one line on it
- unfinished.py: which replay did not finish, when a device-side assertion surfaces
  after it (every checked graph's replays counted by the device)

May import: capture.record, capture.state, capture.replay (its marks: progress.py),
capture.graph (node addresses: pointers.py), capture.scopes, kernels (byte_range).
"""

from __future__ import annotations

from typing import Any


def checker(sample: str, eager: str | None) -> Any:
    """The checker of one recorded process: `sample` as `--check-sample` takes it, `eager`
    an adapter's MODULE:FUNCTION (loaded at its first capture) or None."""
    from graph_harness.capture.live.checked import Checker
    from graph_harness.capture.live.sample import Sample
    from graph_harness.capture.record.keys import named_adapter

    adapters = [named_adapter(eager, flag="--eager")] if eager else []
    return Checker(Sample.parse(sample), adapters)
