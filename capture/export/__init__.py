"""The node export: the versioned document every analysis reads (and its words for the
work it counts), reading checked documents back, the delta between two, and DOT.

- sources.py: the registry of where an export is read from (SOURCES: a graph dump, a
  node export, count's output, a sweep, a recording; each a `Source` its module
  defines); a new node-count source is one module and one line there
- kinds.py: what a graph-harness document is, read by what it holds (`read_export`,
  `load_document`)
- count_output.py, sweep_output.py, recording_output.py: count's output, a sweep and a
  recording as sources (their envelopes checked; a recording's graphs read when taken)
- dump.py: a graph dump (capture/graph/dot_reader.py) as a source
- nodes.py: NodeExport (JSON document and DataFrame), its group-bys; read, checked and
  written without pandas or torch
- node_check.py: one node and the options of an export checked
- workload.py: what an export says about its work (the round's steps, the unit)
- documents.py: reading versioned JSON documents, checked field by field; plain JSON values
- delta.py: node deltas between two exports
- families.py: kernel families (GEMM libraries, attention, Triton, ATen, NCCL, copies):
  the rules, a user's in front
- dot.py: Graphviz DOT of an export

May import: capture.attribution, capture.graph (node kinds, demangled names),
capture.scopes. Never the built-in round: its knowledge reaches the export's readers
through workload.py.
"""
