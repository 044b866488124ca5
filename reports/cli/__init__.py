"""The graph-harness command line: the program (parser, main, exit codes, signals), its
subcommands, the flags and console they share, and loading a user's --target.

- program.py: build_parser, main (`graph_harness.reports.cli:main`, the console script)
- commands/: one module per subcommand, its flags beside what it does
- args.py, console.py: the flags several subcommands share; streams, banner, usage errors
- target.py, user_imports.py, user_stdout.py: --target loaded, its imports, its stdout
- targets.py: what every --target command shares (capture, refusals, check, profile)
- sweeps.py: a --target swept over batch sizes (sweep, report --sizes)
- refs.py: what an export argument names (a variant, or an export file)
- prefetch.py: modules a command needs later, imported while it waits (record's program)
- early.py, target_source.py, module_source.py: what is refused before torch's import (an
  --out held, a command's flags, no GPU for replay and profile, a target's missing factory
  or dotted MODULE, its files read and not run)

May import: all of capture and reports. Building the parser imports no torch, pandas,
matplotlib or Triton: what a command needs is imported when it runs (`record` runs a
program and shows its recording without torch or Triton: `RUNS_WITHOUT_TORCH`).
"""

from graph_harness.reports.cli.program import main

__all__ = ["main"]
