"""`python -m graph_harness`: the graph-harness command line."""

import os
import sys

# `python -m` put the current folder first on sys.path; take it off, as the console script
# has it, before importing anything that imports more: a shlex.py or profile.py here must
# not stand in for the standard library's, nor a gmpy2.py answer sympy's optional import.
# `--target mod:fn` still finds `mod` here (reports/cli/user_imports.py), for the user's code.
if sys.path and sys.path[0] in ("", os.getcwd()):
    sys.path.pop(0)

from graph_harness.reports.cli import main

if __name__ == "__main__":
    sys.exit(main())
