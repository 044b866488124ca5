"""`python -m graph_harness`: the graph-harness command line."""

import os
import sys

from graph_harness.reports.cli import main

if __name__ == "__main__":
    # `python -m` put the current folder first on sys.path; move it last, where the console
    # script has it, so a profile.py here cannot stand in for the standard library's.
    if sys.path and sys.path[0] in ("", os.getcwd()):
        sys.path.append(sys.path.pop(0))
    sys.exit(main())
