"""Nodes attributed to scopes: node records from a graph or a dispatch count, compiled
kernels moved into the modules Inductor says they came from, and the scope tree (labels
rolled up by prefix, generalised across repeats, in natural order).

- records.py: node records with their scopes
- provenance_match.py: graph nodes matched to Inductor's provenance
- compiled.py: what a capture under module_scopes records (its options; compiled nodes
  placed in their modules, said in words)
- rollup.py: the scope tree: nodes per scope at any depth
- labels.py: the one meaning of a label generalised (`layers.*.attention`) and natural order

May import: capture.graph, capture.scopes; pandas (rollup).
"""
