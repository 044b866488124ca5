"""Steps with state: the reset protocol and whether a step repeats, and a step's state
held exactly at one moment and compared with another.

- steps.py: step.reset, repeatability from the warm-ups (StateWatch), StepStateError
- rng.py: the default generators' states, set back, and which a call drew from
- fingerprint.py: every tensor and host value reachable from a step, by name
- digest.py: an exact digest of a tensor too large to clone
- changes.py: what changed between two fingerprints

May import: torch; nothing else of capture (the capture's warm-ups use it).
"""
