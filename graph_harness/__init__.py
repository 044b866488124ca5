"""graph-harness: capture LLM decode rounds into CUDA graphs, count every node, price each.

Installed, the repository's four packages live under this one name, so they cannot collide
with other distributions' top-level `kernels`, `pools`, `capture` or `reports`:

    graph_harness.pools    GraphBufferPool: named, aligned views carved from device chunks
    graph_harness.kernels  the fused pack and the direct-write compaction, each beside its
                           reference
    graph_harness.capture  capture, node export, attribution, replays (all measurement)
    graph_harness.reports  the CLI, tables, files and plots (rendering only)

Data flows one way: pools -> kernels -> capture -> reports. `graph_harness.pytest_plugin`
(the `node_budget` fixture, registered through the pytest11 entry point) sits above them.
"""

import _signal  # built in: nothing is looked up on sys.path
import os as _os  # already imported by the interpreter: nothing is looked up on sys.path
import sys as _sys


def _exit_at_once(signum, frame):
    # While starting (imports, the parser) nothing has been made yet, and a signal raised
    # inside a library's import can surface as some other error: end here, at once.
    try:
        name = {2: "SIGINT", 15: "SIGTERM", 1: "SIGHUP"}.get(signum, f"signal {signum}")
        what = f"stopped by {name} while starting; nothing was written"
        _os.write(2, f"graph-harness: {what}\n".encode())
    except OSError:
        pass
    _os._exit(128 + signum)


def _started_as_the_cli() -> bool:
    """Whether this process is the graph-harness command (the console script, or
    `python -m graph_harness`), not a program that imports this package."""
    entry = _sys.modules.get("__main__")
    spec = getattr(entry, "__spec__", None)
    script = _os.path.basename(getattr(entry, "__file__", None) or "")
    # `python -m graph_harness` imports this package while it looks for __main__.py, before
    # __main__ is that module: then only the command line says so
    return (
        getattr(spec, "name", None) == "graph_harness.__main__"
        or script.startswith("graph-harness")
        or (_sys.argv[:1] == ["-m"] and _run_by_m(getattr(_sys, "orig_argv", [])))
    )


def _run_by_m(argv: list[str]) -> bool:
    """Whether the interpreter's own arguments run `-m graph_harness` (`-mgraph_harness`
    too): the first `-m` names the module; what follows it is the module's."""
    for i, a in enumerate(argv[1:], 1):
        if a == "-m":
            return argv[i + 1 : i + 2] == ["graph_harness"]
        if a.startswith("-m"):
            return a == "-mgraph_harness"
    return False


# The first of our code that the console script runs: from here on Ctrl-C (SIGTERM,
# SIGHUP) ends a start-up at once, in one line, before anything of ours is looked up
# (reports/cli/program.py keeps it so until the command runs).
try:
    _cli = _started_as_the_cli()
except KeyboardInterrupt:  # a Ctrl-C in the microseconds before: the same one line
    _exit_at_once(_signal.SIGINT, None)
if _cli:
    for _s in (_signal.SIGINT, _signal.SIGTERM, _signal.SIGHUP):
        # one ignored when graph-harness starts (nohup's SIGHUP, a background job's
        # SIGINT) stays ignored, here and in what it runs
        if _signal.getsignal(_s) != _signal.SIG_IGN:
            _signal.signal(_s, _exit_at_once)


def __getattr__(name: str):
    # Lazy: importlib.metadata imports more of the standard library, and `python -m
    # graph_harness` must first move the current folder to the end of sys.path.
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("graph-harness")
        except PackageNotFoundError:  # a source tree that was never installed
            return "0+unknown"
    raise AttributeError(f"module 'graph_harness' has no attribute {name!r}")


# A source tree run without installing (PYTHONPATH=.): the packages sit beside this
# folder, not inside it, so look there too. An installed copy has them inside.
_here = _os.path.dirname(_os.path.abspath(__file__))
if not _os.path.isdir(_os.path.join(_here, "kernels")):
    _root = _os.path.dirname(_here)
    if _os.path.isfile(_os.path.join(_root, "pyproject.toml")):
        __path__.append(_root)


def _folder(spec, name: str) -> list[str]:
    """The folder of `graph_harness.<name>`'s modules, made that module's package path.

    The four packages' own code (what an `__init__.py` would hold) is graph_harness/<name>.py,
    and their folders have no `__init__.py`: in a checkout, `kernels/` at the top level is
    then only a namespace portion, which any regular `kernels` elsewhere on sys.path (Hugging
    Face's, which transformers imports) wins over, when the checkout's root is on sys.path.
    Installed, the folder is graph_harness/<name>/, beside the module; in a checkout, <name>/
    beside graph_harness/ (docs/architecture.md, "The top-level folders").
    """
    for folder in (_os.path.join(_here, name), _os.path.join(_os.path.dirname(_here), name)):
        if _os.path.isdir(folder):
            spec.submodule_search_locations = [folder]
            return [folder]
    raise ImportError(f"graph_harness.{name}: its folder is in neither {_here} nor beside it")
