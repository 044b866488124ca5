"""Labels put on the work while a step runs: `scope` (the user's, nested), `module_scopes`
(every submodule's forward by its qualified name), and Inductor's provenance of compiled
kernels, collected as it compiles under module scopes and kept for later captures.

- recorder.py: scopes and the recorder of their boundaries (scope, Recorder)
- names.py: ScopeKey, UNSCOPED, EVERY_LEVEL: plain values, read without torch
- modules.py: module_scopes, the model's repeated blocks
- provenance.py, provenance_cache.py: Inductor's provenance, collected and kept

May import: torch, and nothing else of graph_harness (the bottom of capture: model code
imports `scope`).
"""
