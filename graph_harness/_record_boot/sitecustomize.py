"""graph-harness record's start-up hook, first on a recorded program's PYTHONPATH.

Python imports `sitecustomize` at start-up in every process that does not run with -S
or -I. This one loads the sitecustomize that was next on the path, the program's own or
its environment's, exactly as if this one were not there, then starts graph-harness's
recorder in the process (capture/record/boot.py, which imports nothing heavy: it
waits until torch is imported, and does nothing in processes that never import it).
"""

import os
import sys


def _start() -> None:
    if not os.environ.get("GRAPH_HARNESS_RECORD"):
        return
    try:
        from graph_harness.capture.record.boot import start_from_env

        start_from_env()
    except Exception as e:  # the program must run whatever happens here
        try:
            import json
            import secrets

            line = {"event": "failed", "pid": os.getpid(), "argv": sys.argv, "why": repr(e)}
            path = os.path.join(
                os.environ["GRAPH_HARNESS_RECORD"], f"{os.getpid()}-{secrets.token_hex(4)}.jsonl"
            )
            with open(path, "w") as f:
                f.write(json.dumps(line) + "\n")
        except Exception:
            pass


def _chain() -> None:
    """Import the next sitecustomize on sys.path, as Python would have without this one."""
    here = os.path.dirname(os.path.abspath(__file__))
    mine = sys.modules.pop("sitecustomize", None)
    saved = list(sys.path)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    try:
        import importlib

        importlib.import_module("sitecustomize")
    except ImportError as e:
        if getattr(e, "name", None) != "sitecustomize":
            raise  # their sitecustomize failed: as it would have without us
    finally:
        sys.path[:] = saved
        theirs = sys.modules.get("sitecustomize")
        if theirs is None and mine is not None:
            sys.modules["sitecustomize"] = mine


# The program's own sitecustomize first, as if this one were not there (it may set what
# the program's imports read); then the recorder, which only waits for torch's import
# (or starts at once, where that sitecustomize imported torch).
try:
    _chain()
finally:
    _start()
