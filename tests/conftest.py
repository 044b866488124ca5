import os
import random
import zlib
from collections import Counter

import pytest
import torch

# pytester runs the node_budget plugin's tests; the plugin itself is registered here as
# well as by the entry point, for a source tree whose installed metadata predates it.
pytest_plugins = ["pytester", "graph_harness.pytest_plugin"]

HAS_CUDA = torch.cuda.is_available()


def pytest_collection_finish(session):
    """A run that selected no gpu test (`-m "not gpu"`, any file or -k of CPU tests) on a
    GPU machine is a CPU run, as on CI's CPU machines: no test, no fixture and no command a
    test starts sees the CUDA device. Decided once the selection is final, before any
    fixture runs."""
    global HAS_CUDA
    if HAS_CUDA and not any("gpu" in item.keywords for item in session.items):
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
        torch.cuda.is_available = lambda: False
        torch.cuda.device_count = lambda: 0
        HAS_CUDA = False


def pytest_collection_modifyitems(config, items):
    if HAS_CUDA:
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (gpu marker); none here")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """Skips in one line, counted by reason (without CUDA, a quarter of the suite skips);
    `-rs` (or `-ra`) lists each instead."""
    skipped = terminalreporter.stats.get("skipped", [])
    if not skipped or set(config.getoption("reportchars") or "") & {"s", "a", "A"}:
        return

    def reason(report) -> str:
        text = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        return text.removeprefix("Skipped: ")

    counts = Counter(reason(r) for r in skipped)
    each = "; ".join(f"{n} {why}" for why, n in counts.most_common())
    terminalreporter.write_line(f"skipped: {each} (-rs lists each)")


@pytest.fixture(autouse=True)
def _cpu_unless_gpu(request, monkeypatch):
    """A test without the gpu marker is a CPU test wherever it runs: in a run of gpu and
    CPU tests together on a GPU machine it sees no CUDA device, in process
    (torch.cuda.is_available) and in the commands it starts (CUDA_VISIBLE_DEVICES), as on
    the CPU machines CI runs it on. (Module-scoped fixtures run outside it: such a run
    is `-m gpu`, then `-m "not gpu"`, as benchmarks/h200_check.sh does.)"""
    if HAS_CUDA and "gpu" not in request.node.keywords:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
        monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    yield


@pytest.fixture(autouse=True)
def _seed_and_clean(request):
    # Seed from the test id: reproducible per test and across processes (Python's own
    # hash() of a str changes with every process), different across tests.
    seed = zlib.crc32(request.node.nodeid.encode())
    random.seed(seed)
    torch.manual_seed(seed)
    yield
    if HAS_CUDA and torch.cuda.is_initialized():
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


# Every kernel test runs on both: the CPU one under Triton's interpreter, the CUDA one
# compiled. The gpu marker skips the second cleanly without CUDA.
DEVICES = [pytest.param("cpu", id="cpu-interpreter"), pytest.param("cuda", marks=pytest.mark.gpu)]


@pytest.fixture
def figures(monkeypatch):
    """Each plot's figure (reports/plots.py), kept open instead of written; closed after."""
    from graph_harness.reports import plots

    made = []

    def keep(fig, path):
        made.append(fig)
        return path

    monkeypatch.setattr(plots, "_save", keep)
    yield made
    for fig in made:
        plots._plt().close(fig)
