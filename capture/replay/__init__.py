"""Replaying any captured graph: every replay loop's guard, timing, chains of one node
kind to price a node, and the replay document. Generic: the built-in round is one user
of it (capture/round/ registers its chain kinds and times its rounds).

- guard.py: replays in windows, after the step's reset; ReplayFailed
- progress.py: which replay trips a device-side assertion (the device's count of finished
  replays), and the assertion's text (stderr held for a window)
- settings.py: ReplaySettings (plain data)
- timing.py: replays timed as triton.testing does
- kinds.py: the registry of chain kinds, and the generic ones (plain data at import)
- chains.py: N nodes of one kind replayed, to price one node
- pricing.py: removed nodes priced at their type's per-node cost
- host.py: the host side of a launch: one replay() timed on the CPU, fitted by shape
- document.py: the replay document, ReplayResult

May import: capture.graph, capture.export (the documents' reader), capture.state (a
step's reset and repeatability, before its graph is replayed), kernels (an empty kernel's
chain).
"""
