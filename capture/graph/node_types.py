"""The node types that launch no device work: the CPU's dispatch count keeps its views
and empty tensors made as nodes (capture/graph/dispatch.py), out of every total; a graph
has none. A plain value, apart from dispatch.py's torch: an export is read, checked and
counted without torch (`graph-harness record`'s own process never imports it)."""

NON_LAUNCHING = ("view", "alloc")
