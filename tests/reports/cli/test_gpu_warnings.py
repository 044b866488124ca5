"""What a CPU run already shows a GPU cannot capture: count, sweep and report say it in
one line each (issue 44, 10), as count says a step that replays will refuse; check says it
itself, as a finding."""

import pytest

from tests.command_line import run

HOST_READ = (
    "import torch\n"
    "def make(batch: int = 1):\n"
    "    x = torch.ones(batch, 4)\n"
    "    def step():\n"
    "        return x * x.sum().item()\n"
    "    return step\n"
)


@pytest.mark.parametrize(
    "command",
    [["count"], ["sweep", "--sizes", "1", "2"], ["report", "--out", "rep"]],
    ids=["count", "sweep", "report"],
)
def test_a_host_read_is_said_once(tmp_path, command):
    (tmp_path / "reads.py").write_text(HOST_READ)
    r = run(*command, "--target", "reads.py:make", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    lines = [x for x in r.stderr.splitlines() if "reads a value back to the host" in x]
    assert len(lines) == 1, r.stderr
    # the index is the CPU's dispatch, not a graph node
    assert "aten._local_scalar_dense" in lines[0] and "CPU dispatch 1" in lines[0], lines
    assert "a GPU cannot capture" in lines[0], lines
