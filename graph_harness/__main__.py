"""`python -m graph_harness`: the graph-harness command line."""

import os
import sys

# `python -m` put the current folder first on sys.path; move it last, where the console
# script has it, before importing anything that imports more: a shlex.py or profile.py
# here must not stand in for the standard library's.
if sys.path and sys.path[0] in ("", os.getcwd()):
    sys.path.append(sys.path.pop(0))

from graph_harness.reports.cli import main

if __name__ == "__main__":
    sys.exit(main())
