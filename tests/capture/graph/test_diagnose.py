"""Naming a failed capture (capture/diagnose*.py): the op, its module, the class of failure.

On the CPU the decisions are tested without a capture: a dispatch mode (or a function
mode) below the diagnosis's own refuses chosen calls the way a capturing stream does,
and `attempt` runs the step under it. The real failures are the gpu tests at the end."""

import warnings

import pytest
import torch
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from graph_harness.capture import CaptureError, capture_and_count, module_scopes, scope
from graph_harness.capture.graph.diagnose.classes import (
    COLLECTIVE,
    CPU_TENSOR,
    DATA_DEPENDENT,
    FORBIDDEN,
    FROZEN_POOL,
    LIST_INDEX,
    PAGEABLE,
    READBACK,
    SIDE_STREAM,
    STEP_CODE,
    SYNC,
    CallSeen,
    OpSeen,
    TensorSeen,
    classify_call,
    classify_error,
    classify_op,
    is_invalidated,
)
from graph_harness.capture.graph.diagnose.failure import diagnose, failure_line, model_of
from graph_harness.capture.graph.diagnose.watch import Watch
from graph_harness.pools import GraphBufferPool

REFUSED = "CUDA error: operation not permitted when stream is capturing"
BROKEN = "CUDA error: operation failed due to a previous error during capture"
PAGEABLE_WORDS = (
    "Cannot copy between CPU and CUDA tensors during CUDA graph capture unless the CPU "
    "tensor is pinned. Please use tensor.pin_memory()"
)


def cuda(dim=1, dtype="torch.float32"):
    return TensorSeen("cuda", dtype, dim)


def cpu(dim=1, pinned=False, dtype="torch.float32"):
    return TensorSeen("cpu", dtype, dim, pinned)


# --- the classes, decided from the op and its arguments ---------------------------


@pytest.mark.parametrize(
    "op,expected",
    [
        (OpSeen("aten._local_scalar_dense", {"self": cuda(0)}, True), READBACK),
        (OpSeen("aten.equal", {"self": cuda(), "other": cuda()}, True), READBACK),
        (OpSeen("aten.nonzero", {"self": cuda()}), DATA_DEPENDENT),
        (OpSeen("aten.repeat_interleave", {"repeats": cuda()}), DATA_DEPENDENT),
        # the same op, given the size: nothing to read back
        (OpSeen("aten.repeat_interleave", {"repeats": cuda(), "output_size": 8}), None),
        # indexing: a boolean mask is a nonzero inside; a CPU index list is copied over
        (
            OpSeen("aten.index", {"self": cuda(), "indices": (cuda(1, "torch.bool"),)}),
            DATA_DEPENDENT,
        ),
        (OpSeen("aten.index", {"self": cuda(), "indices": (None, cuda(1, "torch.int64"))}), None),
        (
            OpSeen("aten.index", {"self": cuda(), "indices": (cpu(1, dtype="torch.int64"),)}),
            CPU_TENSOR,
        ),
        # copies: the source's device and pinnedness, non_blocking, decide
        (OpSeen("aten.copy_", {"self": cuda(), "src": cpu()}), PAGEABLE),
        (OpSeen("aten.copy_", {"self": cuda(), "src": cpu(pinned=True)}), SYNC),
        (
            OpSeen("aten.copy_", {"self": cuda(), "src": cpu(pinned=True), "non_blocking": True}),
            None,
        ),
        (OpSeen("aten.copy_", {"self": cpu(), "src": cuda()}), READBACK),
        (OpSeen("aten._to_copy", {"self": cuda(), "device": "cpu"}), READBACK),
        (OpSeen("aten._to_copy", {"self": cpu(), "device": "cuda"}), PAGEABLE),
        (OpSeen("aten._to_copy", {"self": cuda(), "dtype": "torch.float16"}), None),
        # a 0-dim CPU tensor travels as a kernel argument: legal; a CPU vector is not
        (OpSeen("aten.mul", {"self": cuda(), "other": cpu(0)}), None),
        (OpSeen("aten.mul", {"self": cuda(), "other": cpu(1)}), CPU_TENSOR),
        (OpSeen("c10d.allreduce_", {"tensors": (cuda(),)}), COLLECTIVE),
        (OpSeen("aten.mm", {"self": cuda(2), "mat2": cuda(2)}), None),
    ],
)
def test_op_classes_come_from_the_op_and_its_arguments(op, expected):
    assert classify_op(op) is expected


@pytest.mark.parametrize(
    "call,expected",
    [
        (CallSeen("Tensor.__getitem__", ("cuda",), python_data=True), LIST_INDEX),
        (CallSeen("Tensor.__getitem__", ("cuda",), python_data=False), None),
        (CallSeen("torch.tensor", ("cuda",), python_data=True), LIST_INDEX),
        (CallSeen("Tensor.tolist", ("cuda",)), READBACK),
        (CallSeen("Tensor.__bool__", ("cuda",)), READBACK),
        (CallSeen("Tensor.tolist", ("cpu",)), None),
    ],
)
def test_call_classes(call, expected):
    assert classify_call(call) is expected


def _raise_from(filename: str, func: str, message: str):
    """A function whose frames look as if they were in `filename` (torch's own files)."""
    ns: dict = {}
    code = f"def {func}():\n    raise RuntimeError({message!r})\n"
    exec(compile(code, filename, "exec"), ns)
    return ns[func]


def test_error_classes_from_the_exception():
    from graph_harness.pools.pool import PoolFrozen

    assert classify_error(PoolFrozen("cannot carve 'x'")) is FROZEN_POOL
    assert classify_error(RuntimeError(PAGEABLE_WORDS)) is PAGEABLE
    unjoined = (
        "CUDA error: capture sequence contains a fork that was not joined to the primary stream"
    )
    assert classify_error(RuntimeError(unjoined)) is SIDE_STREAM
    assert classify_error(RuntimeError(REFUSED)) is None  # says no more than "forbidden"
    assert is_invalidated(RuntimeError(BROKEN)) and not is_invalidated(RuntimeError(REFUSED))
    sync = _raise_from("/x/site-packages/torch/cuda/__init__.py", "synchronize", REFUSED)
    try:
        sync()
    except RuntimeError as e:
        assert classify_error(e) is SYNC
    wrapped = ValueError("the step's own wrapper")
    wrapped.__cause__ = PoolFrozen("x")
    assert classify_error(wrapped) is FROZEN_POOL  # found through the chain


# --- a capture stood in for on the CPU --------------------------------------------


class Refuse(TorchDispatchMode):
    """Refuses the named ops as a capturing stream does: at once, or (`silently`) by
    breaking the capture so that the next op (or, `at_end`, the capture's end) fails."""

    def __init__(self, names, silently=False, at_end=False):
        super().__init__()
        self.names, self.silently, self.at_end, self.broken = set(names), silently, at_end, False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if self.broken and not self.at_end:
            raise RuntimeError(BROKEN)
        if f"{func.namespace}.{func._opname}" in self.names:
            if not self.silently:
                raise RuntimeError(REFUSED)
            self.broken = True
        return func(*args, **(kwargs or {}))


class RefuseListIndex(TorchFunctionMode):
    """Refuses indexing with a Python list as torch does under capture: its copy to the
    device happens in the bindings, below every dispatch mode."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", "") == "__getitem__" and any(
            isinstance(i, list) for i in (args[1] if isinstance(args[1], tuple) else (args[1],))
        ):
            raise RuntimeError(PAGEABLE_WORDS)
        return func(*args, **(kwargs or {}))


def fake_attempt(log: list, *modes):
    """`attempt` for diagnose(): run the call under the refusing modes, like a capture."""

    def attempt(call):
        log.append(call)
        made = [m() for m in modes]
        try:
            for m in made:
                m.__enter__()
            try:
                call()
            finally:
                for m in reversed(made):
                    m.__exit__(None, None, None)
            if any(getattr(m, "broken", False) for m in made):
                raise RuntimeError(BROKEN)  # the capture's end
        except Exception as e:
            return e
        return None

    return attempt


class Gate(nn.Module):
    def forward(self, x):
        return x + torch.nonzero(x > 0).sum()


class Block(nn.Module):
    def __init__(self, gated: bool) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.gate = Gate() if gated else nn.Identity()

    def forward(self, x, *, scale):  # keyword-only: a solo call needs the recorded kwargs
        return self.gate(self.lin(x)) * scale


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([Block(False), Block(True), Block(False)])
        self.norm = nn.LayerNorm(8)

    def forward(self, x):
        for b in self.blocks:
            x = b(x, scale=0.5)
        return self.norm(x)


def counted_step(net):
    x = torch.randn(4, 8)
    calls = []

    @torch.no_grad()
    def step():
        calls.append(1)
        return net(x)

    step.module = net
    return step, calls


def first_failure(attempt, step):
    exc = attempt(step)
    assert exc is not None, "the stand-in capture must refuse the step"
    return exc


def test_an_eager_failure_is_read_off_its_op_in_one_more_run():
    net = Net()
    step, calls = counted_step(net)
    log = []
    attempt = fake_attempt(log, lambda: Refuse({"aten.nonzero"}))
    exc = first_failure(attempt, step)
    log.clear(), calls.clear()
    d = diagnose(step, exc, attempt=attempt, model=net, compiled=lambda o: False, scope=None)
    assert (d.op, d.where, d.cls, d.how) == (
        "aten.nonzero",
        "in module blocks.1.gate",
        DATA_DEPENDENT,
        "",
    )
    assert len(log) == 1 and len(calls) == 1, "the step's Python ran once more, no more"
    line = d.line(exc)
    assert "\n" not in line
    assert line.startswith("aten.nonzero in module blocks.1.gate: a data-dependent shape")
    assert line.endswith(f"[RuntimeError: {REFUSED}]")


@pytest.mark.parametrize(
    "at_end,captured",
    [
        # surfacing at the next op, in the culprit's module: the open module goes first
        (False, 1),
        # surfacing at the capture's end, outside every module: depth 3 first, latest
        # called first: blocks.2.gate, blocks.2.lin, then blocks.1.gate
        (True, 3),
    ],
)
def test_where_the_op_cannot_be_read_off_the_smallest_failing_module_is_found(at_end, captured):
    # The culprit breaks the capture without raising; a later call fails: bisection
    # captures each submodule alone, deepest first, and names the smallest that fails.
    net = Net()
    step, calls = counted_step(net)
    log = []
    attempt = fake_attempt(log, lambda: Refuse({"aten.nonzero"}, silently=True, at_end=at_end))
    exc = first_failure(attempt, step)
    assert is_invalidated(exc)
    log.clear(), calls.clear()
    tried = []
    real = attempt

    def tracking(call):
        tried.append(call)
        return real(call)

    d = diagnose(step, exc, attempt=tracking, model=net, compiled=lambda o: False, scope=None)
    assert d.where == "in module blocks.1.gate" and d.op is None and d.cls is FORBIDDEN
    assert d.how == f"found by capturing each submodule alone, deepest first: {captured} captured"
    assert len(calls) == 1 and len(tried) == 1 + captured


def test_a_compiled_step_is_read_off_its_eager_code():
    # A whole-model compile calls no submodule from Python: the step is captured again
    # with its compiled regions forced eager, watched; the op is read off that code.
    net = Net()
    step, calls = counted_step(net)
    log = []
    attempt = fake_attempt(log, lambda: Refuse({"aten.nonzero"}))
    exc = first_failure(attempt, step)
    log.clear(), calls.clear()
    d = diagnose(step, exc, attempt=attempt, model=net, compiled=lambda o: o is step, scope=None)
    assert (d.op, d.where, d.cls) == ("aten.nonzero", "in module blocks.1.gate", DATA_DEPENDENT)
    assert d.how == "read off its eager code, the compiled region forced eager"
    assert len(calls) == 1 and len(log) == 1


def test_a_compiled_submodule_is_captured_alone_as_compiled():
    # A submodule compiled on its own is bisected as it runs: compiled (no modes, which
    # would make Dynamo compile again), so the module is named, not the op.
    net = Net()
    gate = net.blocks[1].gate
    step, calls = counted_step(net)
    log = []
    attempt = fake_attempt(log, lambda: Refuse({"aten.nonzero"}))
    exc = first_failure(attempt, step)
    log.clear(), calls.clear()
    compiled = lambda o: o is step or o is gate
    d = diagnose(step, exc, attempt=attempt, model=net, compiled=compiled, scope=None)
    assert (d.op, d.where, d.cls) == (None, "in module blocks.1.gate", FORBIDDEN)
    assert d.how == "found by capturing each submodule alone, deepest first: 1 captured"
    assert len(calls) == 1 and len(log) == 2


_CAPTURING = [False]


@torch._dynamo.disable
def _host_read(x):
    """Stands in for a call a capture refuses, inside compiled code (a graph break)."""
    if _CAPTURING[0]:
        raise RuntimeError(REFUSED)
    return x


class _Tab(nn.Module):
    def forward(self, x):
        return _host_read(x * 2.0) + 1.0


class _TabNet(nn.Module):
    def __init__(self, compile_tab: bool) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 8)
        self.tab = torch.compile(_Tab(), backend="eager") if compile_tab else _Tab()

    def forward(self, x):
        return self.tab(self.proj(x))


@pytest.mark.parametrize("whole", [False, True], ids=["compiled-submodule", "compiled-model"])
def test_real_compiled_code_is_bisected_without_compiling_again(whole):
    # torch.compile for real (the eager backend, on the CPU): the watched attempt forces
    # it eager, the solo capture of a compiled submodule runs its compiled code; neither
    # compiles anything new (a compile inside a capture would be a disaster on a GPU).
    from torch._dynamo.utils import counters

    from graph_harness.capture.graph.compiled import find_compiled

    net = _TabNet(compile_tab=not whole)
    run = torch.compile(net, backend="eager") if whole else net
    x = torch.randn(2, 8)

    @torch.no_grad()
    def step():
        return run(x)

    step.module = net
    before = counters["frames"]["ok"]
    step()  # compiles
    assert counters["frames"]["ok"] > before, "the counter sees a compile"

    def attempt(call):
        _CAPTURING[0] = True
        try:
            call()
        except Exception as e:
            return e
        finally:
            _CAPTURING[0] = False

    exc = attempt(step)
    compiled_frames = counters["frames"]["ok"]
    d = diagnose(
        step, exc, attempt=attempt, model=net, compiled=lambda o: bool(find_compiled(o)), scope=None
    )
    assert counters["frames"]["ok"] == compiled_frames, "nothing was compiled anew"
    assert (d.op, d.where) == (None, "in module tab"), d
    assert d.how == "found by capturing each submodule alone, deepest first: 1 captured"


def test_a_list_index_fails_outside_every_op_and_is_named_by_its_call():
    class Last(nn.Module):
        def forward(self, x):  # x: [B, T, D]; the last position, by a list index
            return x[:, [-1], :]

    model = nn.Sequential(nn.Linear(8, 8), Last())
    x = torch.randn(2, 3, 8)
    step = lambda: model(x)
    log = []
    attempt = fake_attempt(log, RefuseListIndex)
    exc = first_failure(attempt, step)
    d = diagnose(step, exc, attempt=attempt, model=model, compiled=lambda o: False, scope=None)
    assert (d.op, d.where, d.cls) == ("Tensor.__getitem__", "in module 1", LIST_INDEX)
    assert "x[:, i:i+1]" in d.line(exc) and len(log) == 2


def test_a_frozen_pool_is_named_with_its_scope():
    pool = GraphBufferPool("cpu")
    pool.carve("x", (4,), torch.float32)
    pool.freeze()

    def step():
        with scope("alloc", stage=1):
            pool.carve("late", (4,), torch.float32)

    log = []
    attempt = fake_attempt(log)
    exc = first_failure(attempt, step)
    d = diagnose(
        step, exc, attempt=attempt, model=None, compiled=lambda o: False, scope="stage1/alloc"
    )
    assert (d.op, d.where, d.cls) == ("GraphBufferPool.carve", "in scope stage1/alloc", FROZEN_POOL)
    assert "PoolFrozen" in d.line(exc)


def test_the_steps_own_error_and_a_failure_that_does_not_recur():
    def step():
        raise ValueError("my own check")

    log = []
    attempt = fake_attempt(log)
    exc = first_failure(attempt, step)
    d = diagnose(step, exc, attempt=attempt, model=None, compiled=lambda o: False, scope="decode")
    assert (d.op, d.where, d.cls) == (None, "in scope decode", STEP_CODE)
    quiet = diagnose(
        lambda: None,
        RuntimeError(REFUSED),
        attempt=fake_attempt([]),
        model=None,
        compiled=lambda o: False,
        scope=None,
    )
    assert quiet.how == "it captured when tried again" and quiet.cls is FORBIDDEN


def test_a_synchronizing_call_is_named_from_its_frames():
    sync = _raise_from("/x/site-packages/torch/cuda/__init__.py", "synchronize", REFUSED)
    log = []
    attempt = fake_attempt(log)
    exc = first_failure(attempt, sync)
    d = diagnose(sync, exc, attempt=attempt, model=None, compiled=lambda o: False, scope=None)
    assert (d.op, d.cls) == ("torch.cuda.synchronize", SYNC)


def test_no_step_runs_again_under_a_process_group():
    log = []
    d = diagnose(
        lambda: None,
        RuntimeError(REFUSED),
        attempt=fake_attempt(log),
        model=None,
        compiled=lambda o: False,
        scope="stage0/gather",
        distributed=True,
    )
    assert log == [] and d.where == "in scope stage0/gather" and "not captured again" in d.how


def test_a_broken_diagnosis_falls_back_to_the_error():
    def attempt(call):
        raise RuntimeError("the stream is still capturing after a capture attempt")

    line = failure_line(lambda: None, RuntimeError(REFUSED), scope="sync", attempt=attempt)
    assert line.startswith("capture failed in scope sync: ") and "no diagnosis" in line
    assert "\n" not in line


def test_the_watch_records_inputs_with_their_keywords_and_the_model_comes_from_scopes():
    net = Net()
    step, _ = counted_step(net)
    with Watch(net, ops=True) as w:
        step()
    assert w.inputs["blocks.1"].kwargs == {"scale": 0.5}
    assert w.inputs["blocks.1.lin"].kwargs == {} and w.inputs["norm"].depth == 1
    assert not w.inputs["blocks.1"].grad, "recorded under the step's no_grad"
    assert w.open_modules == ()
    other = nn.Linear(2, 2)
    step.module = other
    assert model_of(step) is other
    with module_scopes(net, depth=1):
        assert model_of(step) is net  # an open module_scopes names the model


# --- on the GPU: the real failures --------------------------------------------------


def _capture_error(step, **kw) -> str:
    with pytest.raises(CaptureError) as info:
        capture_and_count(step, warmup=1, **kw)
    line = str(info.value)
    assert "\n" not in line
    # and the process can capture again
    y = torch.zeros(4, device="cuda")
    assert capture_and_count(lambda: y.add_(1.0), warmup=0).total == 1
    assert not torch.cuda.is_current_stream_capturing()
    return line


@pytest.mark.gpu
def test_item_inside_the_step_is_named():
    x = torch.randn(8, device="cuda")

    def step():
        with scope("sample"):
            return x * x.sum().item()

    line = _capture_error(step)
    assert line.startswith("aten._local_scalar_dense in scope sample: a value read back"), line


class _Router(nn.Module):
    def forward(self, x):
        return torch.nonzero(x > 0)


class _Routed(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(16, 16)
        self.router = _Router()

    def forward(self, x):
        return self.router(self.proj(x))


@pytest.mark.gpu
def test_nonzero_in_a_submodule_is_named_by_module():
    model = _Routed().cuda()
    x = torch.randn(4, 16, device="cuda")

    @torch.no_grad()
    def step():
        return model(x)

    step.module = model
    line = _capture_error(step)
    assert line.startswith("aten.nonzero in module router: a data-dependent shape"), line


@pytest.mark.gpu
def test_a_copy_from_pageable_memory_is_named():
    dst = torch.empty(64, device="cuda")
    src = torch.randn(64)  # pageable: never pinned

    def step():
        dst.copy_(src)

    line = _capture_error(step)
    assert line.startswith("aten.copy_ outside any module or scope: a copy from pageable"), line


@pytest.mark.gpu
def test_a_list_index_is_named_as_a_cpu_tensor():
    x = torch.randn(2, 5, 8, device="cuda")

    def step():
        return x[:, [-1], :] * 2.0

    line = _capture_error(step)
    assert line.startswith("Tensor.__getitem__ outside any module or scope: a CPU tensor"), line


class _Table(nn.Module):
    """Adds a table given on the CPU: its code copies it to the GPU at every call (a
    graph input of the compiled code, so Inductor's code makes the copy)."""

    def forward(self, x, table):
        return x + table.to(x.device)


class _WithCompiled(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(16, 16)
        self.table = torch.compile(_Table())  # a submodule compiled on its own
        self.cpu_table = torch.randn(16)  # pageable, a plain attribute

    def forward(self, x):
        return self.table(self.proj(x), self.cpu_table)


@pytest.mark.gpu
def test_a_failure_inside_a_compiled_submodule_is_found_by_bisection():
    model = _WithCompiled()
    model.proj.cuda()
    x = torch.randn(4, 16, device="cuda")

    @torch.no_grad()
    def step():
        return model(x)

    step.module = model
    step()  # compiles, outside any capture
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        line = _capture_error(step)
    assert line.startswith("capture failed in module table (found by capturing each"), line
    assert "submodule alone, deepest first" in line
    # bisection captures modules that launch nothing: torch's warning stays ours
    assert not [w for w in seen if "CUDA Graph is empty" in str(w.message)], seen


class _WithTable(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(16, 16)
        self.table = _Table()
        self.cpu_table = torch.randn(16)

    def forward(self, x):
        return self.table(self.proj(x), self.cpu_table)


@pytest.mark.gpu
def test_a_failure_inside_a_whole_compiled_model_is_read_off_its_eager_code():
    # No submodule is called from Python inside the compiled model: the diagnosis runs
    # the compiled region's eager code once (force_eager) and reads the op off that.
    model = _WithTable()
    model.proj.cuda()
    run = torch.compile(model)
    x = torch.randn(4, 16, device="cuda")

    @torch.no_grad()
    def step():
        return run(x)

    step.module = model
    step()  # compiles, outside any capture
    line = _capture_error(step)
    assert line.startswith(
        "aten._to_copy in module table (read off its eager code, the compiled region forced "
        "eager): a copy from pageable host memory"
    ), line


@pytest.mark.gpu
def test_the_cli_prints_the_named_failure_in_one_line_with_the_users_line():
    from tests.command_line import run

    r = run("count", "--target", "tests.targets:item_in_step", cpu=False)
    assert r.returncode == 1, r.stderr
    (line,) = [x for x in r.stderr.splitlines() if "error:" in x]
    assert "CaptureError: aten._local_scalar_dense in scope sample: a value read back" in line
    assert "targets.py:" in line and "(in step)" in line, line
