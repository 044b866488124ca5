"""The in-round profile: graphs replayed under CUPTI, every activity matched to its node,
each node's duration and the gap before it, rolled up and priced.

- settings.py: ProfileSettings (plain data)
- activities.py: what CUPTI recorded, read from the trace and split into replays
- match_plan.py: what each activity node waits for, the key it is matched by
- matching.py: activities matched to graph nodes (pure functions)
- windows.py: each sampled replay matched and costed, row by row
- nodes.py: one graph's profile, raw and net of the profiler
- node_stats.py: every node's statistics over the replays, and its group
- calibration.py: the profiler's own cost per node, measured on calibration chains
- fit.py: the same fitted to a graph's own event timing; which one a graph's net figures use
- rollup.py: node costs by scope and by group
- pairs.py: a change priced from two profiles
- breakdown.py: where a priced saving comes from, by group and kernel
- document.py: ProfileResult, the one document
- run.py: profiling on a GPU (the built-in round's variants: capture/round/profile.py)
- step.py: profile_step, a user's step captured, checked if asked, and profiled

May import: capture.step and capture.count (a user's step captured, or none),
capture.check (checked before its profile), capture.replay, capture.export,
capture.attribution, capture.graph, capture.scopes, capture.state, capture.record (a
reduce-overhead step's calls, profiled).
"""
