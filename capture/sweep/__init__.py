"""The capture-size ladder: a step captured at every batch size an engine captures, with
nodes, time, graph memory and padding per size, and the sizes worth capturing.

- settings.py: SweepSettings, the one source of its defaults, and the check modes (plain
  data: the parser reads it)
- run.py: sweep_step, the order of it all, and its document
- sizes.py: each size built and captured into a pool of its own, warm-ups timed, checked
- replays.py: every size's graph timed, trials interleaved, and its leak check
- shared.py: the sizes captured again into one shared pool, and the checks of its graphs
  by `--check` mode (SHARED_CHECKS: interleaved, updated)
- updated.py: check_updated, the updated-executable check of a factory as one call
- padding.py: request sizes padded up a ladder, and the ladder that minimizes the time
  per request (plain arithmetic)
- document.py: SweepResult, the `graph-harness/sweep` document, its tables and files
- tables.py: the rows of those tables (SizeRow, a row per size), their fields the columns
- ladders.py: a request distribution's padding section, each ladder costed
- alloc_trace.py: one capture's requests to its pool, read from the allocator's history
- allocator_model.py: the caching allocator's rules replayed for one graph pool
- predict.py: a ladder's shared pool predicted from two or three sizes' traces
- forecast.py: whole ladders' graph memory (pool plus executables) predicted from the
  sampled sizes, with an interval, against the truth, the KV cache left (`--predict-from`)
- vllm_method.py: vLLM's own estimate (profile_cudagraph_memory), implemented from its code
- truth.py: the shared pool's rows (SharedRow) and the graph memory the ladder truly
  took (its executables read in two phases)
- estimate.py: the common estimators against that truth, and the start-up's phases

May import: capture.count, capture.graph, capture.replay (timing and its guard),
capture.state, capture.check, capture.export, capture.attribution (the scope tree),
capture.record (a reduce-overhead step's calls).
"""
