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

import os as _os  # already imported by the interpreter: nothing is looked up on sys.path


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
