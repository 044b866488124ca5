"""Replaying captured graphs: every replay loop's guard, timing, chains of one node kind,
rounds timed over fresh builds, and the replay document with its pricing of savings.

- guard.py: replays in windows, after the step's reset; ReplayFailed
- settings.py: ReplaySettings and the chain kinds (plain data)
- timing.py: replays timed as triton.testing does
- chains.py: N nodes of one kind replayed, to price one node
- rounds.py: the round's variants timed, interleaved, over fresh builds
- pricing.py: node changes priced in time against what was measured
- document.py: the replay document and run_replays

May import: capture.round, capture.count, capture.export, capture.graph, kernels.
"""
