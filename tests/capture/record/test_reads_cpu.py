"""What a captured region read and did not write (capture/record/reads.py), and the
dispatch mode that sees it (reads_mode.py), on the CPU: the naming from records made by
hand, then the mode over real operators on CPU tensors (what it sees is host metadata,
the same on either device), with torch.compile under it."""

from __future__ import annotations

import sys

import pytest
import torch
from torch import nn

from graph_harness.capture.record import reads_mode
from graph_harness.capture.record.reads import RegionReads, Touch, shapes_key
from graph_harness.capture.record.reads_mode import RegionWatch, available
from tests.capture.record.watch_steps import chain, clean, step_by_step, watched

IDS = (-1, 100)  # (device index, storage pointer): -1 the CPU
CACHE = (-1, 200)
WEIGHT = (-1, 300)
POS = (-1, 400)


def t(storage, *shape, dtype="float32", weight=False) -> Touch:
    return Touch(storage, tuple(shape), dtype, weight)


# --- the naming, from records made by hand ------------------------------------------------


def test_inputs_are_what_was_read_and_never_written():
    r = RegionReads()
    r.view([t(WEIGHT, 64, 512, weight=True)])  # w.t(): marks the weight's storage
    r.op([t(IDS, 4, dtype="int64"), t(WEIGHT, 512, 64)], [], [t((-1, 1), 4, 64)])
    r.op([t(CACHE, 8, 64)], [], [t((-1, 2), 8, 64)])  # read first ...
    r.op([t((-1, 1), 4, 64)], [t(CACHE, 8, 64)], [t(CACHE, 8, 64)])  # ... written after
    r.op([t(POS, 4, dtype="int64"), t(IDS, 4, dtype="int64")], [], [t((-1, 3), 4)])
    # the KV cache is state (written, if after its read); the weight is no input (marked
    # by the view, read here as a plain tensor); what an op allocated is the region's own
    assert r.inputs() == ["[4] int64"], "ids and positions alike: one shape"
    assert r.ops == 4


def test_first_read_first_and_views_of_one_buffer_by_the_shape_read():
    r = RegionReads()
    r.op([t(IDS, 8, dtype="int64")], [], [t((-1, 1), 8)])
    r.op([t(POS, 8, 1, dtype="int64"), t(IDS, 4, dtype="int64")], [], [t((-1, 2), 8)])
    assert r.inputs() == ["[8] int64", "[8, 1] int64", "[4] int64"]


def test_an_output_on_an_arguments_storage_is_an_alias_not_a_write():
    r = RegionReads()
    # `_unsafe_view`-like: no alias in its schema, its output on its input's storage
    r.op([t(IDS, 8, dtype="int64")], [], [t(IDS, 2, 4, dtype="int64")])
    assert r.inputs() == ["[8] int64"]
    # an in-place write on it afterwards makes it state: no longer an input
    r.op([], [t(IDS, 8, dtype="int64")], [t(IDS, 8, dtype="int64")])
    assert r.inputs() == []


def test_the_key_names_three_shapes_and_counts_the_rest():
    assert shapes_key([]) is None
    assert shapes_key(["[8] int64"]) == "reads [8] int64"
    five = ["[8] int64", "[8, 1] int64", "[4] int64", "[2] float32", "[] int64"]
    assert shapes_key(five[:3]) == "reads [8] int64, [8, 1] int64, [4] int64"
    assert shapes_key(five) == "reads [8] int64, [8, 1] int64, [4] int64 (+2)"


# --- the mode, over real operators ----------------------------------------------------------


class Step(nn.Module):
    """A decode step in miniature: embed the ids, add into a static cache in place (state),
    attend over the cache, project: weights are Parameters, the cache a buffer."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(32, 16)
        self.proj = nn.Linear(16, 16)
        self.norm = nn.RMSNorm(16)
        self.register_buffer("cache", torch.zeros(8, 16))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        b = ids.shape[0]
        x = self.embed(ids)
        self.cache[:b].add_(x)
        return self.proj(self.norm(x + self.cache[:b]))


def test_the_mode_names_a_step_by_the_slice_of_ids_it_read():
    assert available() is None, "this torch's Dynamo honours ignore_compile_internals"
    step = Step()
    ids = torch.arange(8)  # the engine's static input buffer [max]
    with torch.no_grad():
        for b in (8, 4, 1):  # several sizes in one loop, as an engine captures them
            want = step(ids[:b])
            step.cache.zero_()
            got, reads, note = watched(lambda b=b: step(ids[:b]))
            step.cache.zero_()
            assert note is None
            assert torch.equal(got, want), "the step computes what it computes unwatched"
            # the slice as read, not the buffer it is carved from; no weight, no cache
            assert reads.inputs() == [f"[{b}] int64"], (b, reads.inputs())


def test_the_mode_is_popped_and_never_seen_again():
    depth = torch._C._len_torch_dispatch_stack()
    _, reads, _ = watched(lambda: torch.ones(3) + 1)
    assert torch._C._len_torch_dispatch_stack() == depth
    before = reads.ops
    torch.ones(3) + 1
    assert reads.ops == before > 0


def test_the_programs_error_goes_on_unchanged_and_the_op_runs_once():
    calls = []
    lib = torch.library.Library("gh_reads_test", "FRAGMENT")
    lib.define("count(Tensor x) -> Tensor")

    def count(x):
        calls.append(1)
        raise ValueError("the program's own error")

    lib.impl("count", count, "CPU")
    watch = RegionWatch()
    watch.start()
    try:
        torch.ops.gh_reads_test.count(torch.ones(2))
    except ValueError as e:
        err = e
    finally:
        note = watch.stop()
    assert str(err) == "the program's own error" and calls == [1]
    assert note is None


def test_a_failure_of_the_looking_never_reaches_the_program(monkeypatch):
    def broken(*a, **k):
        raise RuntimeError("looking failed")

    monkeypatch.setattr(reads_mode, "tell", broken)
    x = torch.arange(4.0)
    got, reads, note = watched(lambda: (x * 2).sum())
    assert got.item() == 12.0
    assert note == "stopped looking: RuntimeError: looking failed" and reads.ops == 0


def test_a_mode_left_above_it_is_not_popped_in_its_place():
    from torch.utils._python_dispatch import TorchDispatchMode

    class Other(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    watch = RegionWatch()
    watch.start()
    other = Other()
    other.__enter__()  # the region's own mode, left open at the capture's end
    try:
        assert watch.stop() == "another dispatch mode was left active inside the capture"
        ops = watch.reads.ops
        torch.ones(2) + 1
        assert watch.reads.ops == ops, "switched off: it tells nothing more"
    finally:
        other.__exit__(None, None, None)
    # what is left of it is a no-op at the top of the stack: taken off for the next test
    from torch.utils._python_dispatch import _get_current_dispatch_mode

    left = _get_current_dispatch_mode()
    assert type(left).__name__ == "ReadsMode"
    left.__exit__(None, None, None)


def test_torch_compile_compiles_under_it_as_without_it():
    """Dynamo skips frames under a dispatch mode that does not ignore compile internals:
    the compiled step would run eagerly inside the program's capture. Under this one it
    compiles (a first call inside it) and reuses its compile (a call compiled outside)."""
    compiles = []

    def backend(gm, example_inputs):
        compiles.append(gm)
        return gm.forward

    def f(x):
        return torch.sin(x) * 2 + 1

    inside = torch.compile(f, backend=backend, dynamic=False)
    x = torch.arange(4.0)
    got, reads, _ = watched(lambda: inside(x))
    assert len(compiles) == 1, "compiled inside the watch, not skipped"
    assert torch.equal(got, f(x))
    assert reads.inputs() == ["[4] float32"], "the compiled code's aten calls are seen"

    def g(x):  # another code object: a compile of its own
        return torch.cos(x) - 1

    outside = torch.compile(g, backend=backend, dynamic=False)
    outside(x)
    assert len(compiles) == 2
    watched(lambda: outside(x))
    assert len(compiles) == 2, "no recompile under the watch"


# --- looking until the inputs are read; on the stack to the capture's end ------------------


def test_it_stops_looking_once_quiet_and_stays_to_the_end():
    depth = torch._C._len_torch_dispatch_stack()
    ids, late = torch.arange(8), torch.ones(3, 5)
    seen = {}

    def step():
        y = chain(ids.float(), reads_mode.QUIET - 2)
        y = y.sum() + late.sum()  # a second input read before the quiet stretch ends
        chain(y, 3 * reads_mode.QUIET)
        seen["depth"] = torch._C._len_torch_dispatch_stack()
        return y

    _, reads, note = watched(step)
    assert note is None
    assert reads.inputs() == ["[8] int64", "[3, 5] float32"]
    assert reads.ops == reads.last_input + reads_mode.QUIET, "not one operator more looked at"
    assert seen["depth"] == depth + 1, "on the stack to the capture's end"
    clean()


def test_a_programs_own_profiler_is_left_as_it_is():
    calls = []

    def own(frame, event, arg):
        calls.append(event)

    ids = torch.arange(4)
    sys.setprofile(own)
    try:
        _, reads, note = watched(lambda: step_by_step(ids.float(), 2 * reads_mode.QUIET))
        assert sys.getprofile() is own
    finally:
        sys.setprofile(None)
    assert note is None and calls, "its profiler saw the region"
    assert reads.inputs() == ["[4] int64"]
    clean()


def test_a_region_still_finding_inputs_at_the_limit_says_so():
    xs = [torch.full((i + 1,), float(i)) for i in range(reads_mode.MAX_OPS + 8)]
    _, reads, note = watched(lambda: [x + 1 for x in xs])
    assert reads.ops == reads_mode.MAX_OPS
    assert note == f"looked at the first {reads_mode.MAX_OPS} operators only, still finding inputs"
    assert len(reads.inputs()) == reads_mode.MAX_OPS


def _pass(self, func, types, args=(), kwargs=None):
    return func(*args, **(kwargs or {}))


def _other(named: bool):
    """A mode of the program's own; its handler `__torch_dispatch__` by name, or a
    function of another name set on the class (as the watch's own is)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Other(TorchDispatchMode):
        supports_higher_order_operators = True

        if named:

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                return func(*args, **(kwargs or {}))

    if not named:
        Other.__torch_dispatch__ = _pass
    return Other()


@pytest.mark.parametrize("named", [True, False], ids=["named", "unnamed"])
def test_modes_the_program_moves_past_the_quiet_point_are_never_disturbed(named):
    # printing a tensor pops every mode for a while (`_disable_current_modes`); a
    # higher-order operator's dispatch pops the program's mode in Python
    from torch._higher_order_ops.out_dtype import out_dtype

    a = torch.randint(-8, 8, (4, 4), dtype=torch.int8)
    watch = RegionWatch()
    watch.start()
    try:
        with _other(named):
            y = step_by_step(torch.arange(4.0), 2 * reads_mode.QUIET)
            text = repr(y)
            got = out_dtype(torch.ops.aten.mm.default, torch.int32, a, a)
            assert torch._C._len_torch_dispatch_stack() == 2, "the watch still under it"
    finally:
        note = watch.stop()
    assert note is None and text.startswith("tensor(")
    assert torch.equal(got, a.int() @ a.int())
    clean()


def test_an_infra_mode_entered_in_the_region_leaves_the_stack_as_it_was():
    import warnings

    from torch._subclasses.fake_tensor import FakeTensorMode

    watch = RegionWatch()
    watch.start()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with FakeTensorMode():
                y = step_by_step(torch.ones(4), 2 * reads_mode.QUIET)
                assert type(y).__name__ == "FakeTensor"
    finally:
        note = watch.stop()
    assert note is None
    clean()


def _eager(gm, example_inputs):
    return gm.forward


@pytest.mark.parametrize("guard", ["inference_mode", "compiled", "backward", "thread"])
def test_guards_that_put_back_the_dispatch_state_they_found_break_nothing(guard):
    # each saves the thread's dispatch state (the watch on, looking) and puts it back
    # after the quiet point: a watch gone from the stack by then would leave the Python
    # key on with no mode to take it (every factory operator fails) or come back
    x = torch.arange(4.0)
    n = 2 * reads_mode.QUIET
    watch = RegionWatch()
    watch.start()
    try:
        if guard == "inference_mode":
            with torch.inference_mode():
                got = step_by_step(x, n)
            want = chain(x, n)
        elif guard == "compiled":
            got = torch.compile(lambda t: chain(t, n), backend=_eager)(x)
            want = chain(x, n)
        elif guard == "backward":  # the engine's ThreadLocalStateGuard, a Python hook late
            w = x.clone().requires_grad_()
            y = w
            for i in range(n):
                y = y * 1.0001
                if i == 2:
                    y.register_hook(lambda g: g)
            y.sum().backward()
            got, want = w.grad, torch.full((4,), 1.0001**n)
        else:  # the autograd device thread runs under the capturing thread's modes
            import threading

            def run(mode, out):
                torch._C._push_on_torch_dispatch_stack(mode)
                try:
                    out.append(step_by_step(x, n))
                finally:
                    torch._C._pop_torch_dispatch_stack(None)

            out = []
            t = threading.Thread(target=run, args=(watch._mode, out))
            t.start()
            t.join()
            got, want = out[0], chain(x, n)
        assert torch.zeros(2).sum().item() == 0.0, "a factory operator still runs"
        assert torch._C._len_torch_dispatch_stack() == 1
    finally:
        note = watch.stop()
    assert note is None
    assert torch.allclose(got, want)
    clean()
