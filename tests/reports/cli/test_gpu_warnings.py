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


HOST_VALUE = (
    "import torch\n"
    "def make(batch: int = 1):\n"
    "    table = torch.arange(64.0 * 4).view(64, 4)\n"
    "    out = torch.empty(batch, 4)\n"
    "    state = {'t': 0}\n"
    "    def step():  # a Python int picks the row: a graph keeps the row its capture saw\n"
    "        out.copy_(table[state['t']].expand(batch, 4))\n"
    "        state['t'] += 1\n"
    "        return out\n"
    "    step.reset = lambda: state.update(t=0)\n"
    "    return step\n"
)


@pytest.mark.parametrize(
    "command",
    [["count"], ["sweep", "--sizes", "1", "2"], ["report", "--out", "rep"]],
    ids=["count", "sweep", "report"],
)
def test_a_host_value_a_call_moves_is_said_once(tmp_path, command):
    # a step with a reset: count did not watch it before, and said nothing
    (tmp_path / "moves.py").write_text(HOST_VALUE)
    r = run(*command, "--target", "moves.py:make", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    lines = [x for x in r.stderr.splitlines() if "a call changes host values" in x]
    sizes = 2 if command[0] == "sweep" else 1  # the sweep says it of each size's step
    assert len(lines) <= sizes and lines, r.stderr
    assert "closure state.t: 0 then 1" in lines[0] and "graph-harness check" in lines[0]


def test_with_check_the_host_value_is_the_checks_finding_not_a_note(tmp_path):
    (tmp_path / "moves.py").write_text(HOST_VALUE)
    r = run("count", "--target", "moves.py:make", "--check", cwd=tmp_path)
    assert r.returncode == 1, r.stderr  # on the CPU: the moving value tried ahead, and failed
    assert "a call changes host values" not in r.stderr
    assert "closure state.t" in r.stderr  # the check's own finding
