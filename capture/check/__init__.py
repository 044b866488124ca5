"""`check`: does the captured graph compute what the step computes? Eager against replay,
bit for bit, with free memory poisoned; host copies in the graph; the findings.

- rules.py: the registry of check's rules (RULES: each finds what one kind of evidence
  shows) and of the revisions made to their findings (REVISIONS); a new rule is one
  module and one line there
- evidence.py: what one check saw, as every rule reads it (Evidence)
- step.py: check_step, check_captured, the gate of `--check`
- fixture.py: a check's outcome as the `graph_check` fixture's test (pass, fail, skip)
- settings.py: CheckSettings, the trajectory's length and the soak (no torch: the
  parser reads it)
- sample.py: the calls a long trajectory compares (`--steps to-end`), and its length
- soak.py: many more replays along the trajectory, under a watchdog (`--soak N`)
- trajectory.py: the step's calls, eager and replayed, fingerprinted after each
- judge.py: what differs, from which step, and why
- messages.py: the words of each finding
- findings.py: Finding, CheckResult, CheckFailed, CheckUnverified (plain data)
- document.py: the check's document (check.json), every check of a run by name
- warmups.py: what the warm-ups (and, on the CPU, the counted operations) show
- library_hosts.py: host values a library keeps, and those a step accepts
- host_copies.py: memcpy nodes from or to host memory
- interleaved.py: several sizes' graphs from one shared pool replayed in turns, in a
  seeded serving order, each replay against its size's eager call
- interleaved_verdict.py: one replayed call judged, and the interleaved check's result
- size_runs.py: one size of a shared pool as those checks run it: its start, its calls
  fed, its eager reference
- updated.py: one executable switched between every size by cudaGraphExecUpdate, in a
  seeded walk through every transition, against each size's own executable and eager step
- updated_judge.py: that walk judged, visit by visit, and each update's launches
- updated_launches.py: what an update may not carry: functions and launch attributes,
  the executable's origin against the graph it was updated to (plain data)
- updated_verdict.py: its findings' words, each update and its cost, its result
- poison.py: free memory filled with a pattern around replays

May import: capture.count, capture.state, capture.graph, capture.replay (its guard),
capture.export (the export a check reads, in annotations); nothing of the built-in round.
"""
