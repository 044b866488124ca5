"""Capturing a step: into a CUDA graph (warm-ups, capture, the failure named when it cannot
be captured) and reading the graph back; on the CPU, counting dispatched operations.

- capture.py: capture_graph and warm_up, as torch/cuda/graphs.py does; CaptureError
- settings.py: StepSettings (warm-ups), the one source of its defaults
- reader.py: the captured graph's nodes, kinds, kernels and edges (cuda-bindings)
- dot_syntax.py, dot_labels.py, dot_reader.py: the same nodes read from a DOT dump
  (cudaGraphDebugDotPrint's, any program's), executing nothing
- dispatch.py: the CPU's count of dispatched operations
- node_types.py: the node types that launch nothing (NON_LAUNCHING), without torch
- compiled.py: torch.compile'd code in a step, found and refused where it cannot be counted
- diagnose/: why a capture failed, in one line
- lifecycle.py: a graph's capture, instantiate, upload and update in place, and the
  device memory its executable holds outside the caching allocator
- pages.py: the driver's 2 MiB pages, without torch
- exec_size.py: one executable's device memory, resolved below the page from copies
- pointers.py: the addresses in each node's parameters, matched to a tensor's bytes
- attributes.py: each kernel node's function and launch attributes, read back
- shared_exec.py: one executable switched between kept graphs by update, and a graph's
  own executable launched the same way

May import: capture.scopes, kernels (Triton launches count as one), torch.
"""
