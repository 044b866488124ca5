"""Recording the graphs a program captures itself: every CUDA graph made through PyTorch
(`torch.cuda.graph`, `make_graphed_callables`, Inductor's cudagraph trees, engines built on
them), in every process of a program run unchanged, each exported as `count` exports a
graph, with its capture site, key, pool and replays.

- hooks.py: torch.cuda.CUDAGraph's capture, replay and reset wrapped, once per process
- sites.py: where a capture was opened, and the key that tells a graph from its siblings
- keys.py: an engine's own key (the adapter), by name or entry point
- reads.py: what a captured region read and never wrote, the key it names a graph by
  (`reads [8] int64`); reads_mode.py: the dispatch mode that sees it during the capture;
  dormant.py: that mode put to sleep once it stops looking, and woken where it must be
- interrupts.py: a signal's exception told from an adapter's own
- graphs.py: GraphRecord, one recorded graph
- settings.py: the recorder's process-wide settings and capture order
- capturing.py: one capture in progress: read off the stack, set up, recorded
- kept.py: a recorded graph's node records kept out of the garbage collector's way
- process.py: one process's recorder (its session files, flushes, exit; RecordOptions,
  the one source of its defaults)
- compiled_scopes.py: a recorded capture's compiled code attributed to its modules
- module_hooks.py: --module-scopes in one process: the module hooks, and Inductor's
  provenance collected from the program's import of Inductor on
- after_import.py: a call made once a module's import completes
- boot.py: its start in every process of a recorded program, once torch is imported
- recording.py: Recording, every process's graphs as one document and folder (read and
  written without torch or pandas: `graph-harness record`'s own process imports neither)
- process_file.py: one process's session file read into a recording (ProcessInfo)
- program.py: run_program (a program under the recorder) and record_graphs() (a block of code)
- steps.py: a step that captures its own graphs (reduce-overhead) counted by recording

May import: capture.scopes, capture.graph, capture.attribution, capture.export.
"""
