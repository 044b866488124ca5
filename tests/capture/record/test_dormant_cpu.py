"""The read watch asleep past the quiet point (capture/record/dormant.py), on the CPU: it
stays on the stack while operators skip it, and nothing the program does notices (a mode
it pushes, a FakeTensorMode, a compile, a guard, a tensor subclass, a profiler, threads)."""

from __future__ import annotations

import sys
import threading
import warnings

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from graph_harness.capture.record import dormant, reads_mode
from graph_harness.capture.record.reads_mode import RegionWatch
from tests.capture.record.watch_steps import chain, clean, step_by_step, watched

N = 2 * reads_mode.QUIET  # operators past which a step of one input has been looked at
PYTHON = torch._C.DispatchKey.Python


def _keys_on() -> bool:
    return torch._C._dispatch_tls_is_dispatch_key_included(PYTHON)


class Counting(TorchDispatchMode):
    """A mode of the program's own: counts the operators it sees."""

    def __init__(self):
        super().__init__()
        self.seen = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.seen += 1
        return func(*args, **(kwargs or {}))


def _asleep_then(fn, monkeypatch=None, calls=None):
    """`fn(watch)` run once the watch has looked at a step and gone to sleep; its result,
    and the hooks the mode set (counted in `calls` through `dormant.sleep_soon`, which the
    handler calls for every operator it sees awake)."""
    calls = [] if calls is None else calls
    if monkeypatch is not None:
        real = dormant.sleep_soon
        monkeypatch.setattr(dormant, "sleep_soon", lambda m: (calls.append(1), real(m)))
    watch = RegionWatch()
    watch.start()
    try:
        step_by_step(torch.arange(4.0), N)
        assert watch._mode.dormancy.slept and not _keys_on(), "asleep on the stack"
        assert torch._C._len_torch_dispatch_stack() == 1
        out = fn(watch)
    finally:
        note = watch.stop()
    assert note is None
    clean()
    return out, calls


def test_operators_past_the_quiet_point_skip_it(monkeypatch):
    x = torch.arange(4.0)
    calls = []

    def more(watch):
        before = len(calls)
        got = step_by_step(x, 100)
        return got, before

    (got, before), _ = _asleep_then(more, monkeypatch, calls)
    assert len(calls) == before, "no operator reached the handler once asleep"
    assert torch.equal(got, chain(x, 100))


def test_a_mode_the_program_pushes_while_it_sleeps_sees_every_operator():
    def push(watch):
        mine = Counting()
        with mine:
            # past the quiet point inside its handler, the stack shows the watch alone
            y = step_by_step(torch.ones(3), N)
            assert _keys_on()
        step_by_step(y, 8)
        return mine.seen, _keys_on()

    (seen, on), _ = _asleep_then(push)
    assert seen == N + 1  # the ones, then the chain
    assert on, "a thread that pushed a mode in the region keeps the watch awake"


def test_a_mode_pushed_through_torchs_own_c_function_while_it_sleeps_is_seen():
    def push(watch):
        mine = Counting()
        torch._C._push_on_torch_dispatch_stack(mine)
        try:
            torch.ones(3) + 1
        finally:
            torch._C._pop_torch_dispatch_stack(None)
        return mine.seen

    seen, _ = _asleep_then(push)
    assert seen == 2


def test_a_second_watch_started_while_the_first_sleeps_sees_its_whole_step():
    def inner(watch):
        _, reads, note = watched(lambda: chain(torch.arange(3.0), 10))
        return reads.ops, note

    (ops, note), _ = _asleep_then(inner)
    assert (ops, note) == (11, None), "the arange and the chain's ten"


def test_fake_tensor_mode_and_a_compile_while_it_sleeps_work_as_without_it():
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

    compiles = []

    def backend(gm, example_inputs):  # Dynamo traced with fake tensors to get here
        compiles.append(example_inputs)
        return gm.forward

    def use(watch):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with FakeTensorMode():
                made = torch.empty(3)  # a factory: no tensor argument to find the mode by
        f = torch.compile(lambda t: torch.cos(t) + t.sum(), backend=backend, dynamic=False)
        x = torch.arange(5.0)
        return made, f(x), torch.cos(x) + x.sum()

    (made, got, want), _ = _asleep_then(use)
    assert isinstance(made, FakeTensor)
    assert len(compiles) == 1 and torch.equal(got, want)


def test_a_guard_that_wakes_it_is_passed_through_then_slept_past():
    from torch._higher_order_ops.out_dtype import out_dtype

    a = torch.randint(-8, 8, (4, 4), dtype=torch.int8)
    x = torch.arange(4.0)
    watch = RegionWatch()
    watch.start()
    try:
        with torch.inference_mode():  # saves the dispatch state: the watch awake
            inside = step_by_step(x, N)
            assert watch._mode.dormancy.slept and not _keys_on()
        assert _keys_on(), "the guard put back the state it found"
        after = step_by_step(x, 8)
        assert not _keys_on() and watch._mode.dormancy.tries == 2
        got = out_dtype(torch.ops.aten.mm.default, torch.int32, a, a)  # Python-dispatched
    finally:
        note = watch.stop()
    assert note is None
    assert torch.equal(inside, chain(x, N)) and torch.equal(after, chain(x, 8))
    assert torch.equal(got, a.int() @ a.int())
    clean()


def test_a_tensor_subclass_while_it_sleeps_goes_through_its_own_dispatch():
    from torch.testing._internal.two_tensor import TwoTensor

    a, b = torch.arange(4.0), torch.arange(4.0) + 10

    def use(watch):
        return TwoTensor(a, b) * 2

    z, _ = _asleep_then(use)
    assert type(z) is TwoTensor
    assert torch.equal(z.a, a * 2) and torch.equal(z.b, b * 2)


def test_a_programs_profiler_keeps_it_awake_and_untouched():
    def own(frame, event, arg):
        pass

    x = torch.arange(4.0)
    watch = RegionWatch()
    sys.setprofile(own)
    try:
        watch.start()
        try:
            got = step_by_step(x, N)
            assert _keys_on() and watch._mode.dormancy.tries == 0, "never set a hook of its own"
            assert sys.getprofile() is own
        finally:
            note = watch.stop()
    finally:
        sys.setprofile(None)
    assert note is None and torch.equal(got, chain(x, N))
    clean()


def test_a_failing_hook_leaves_it_awake_and_the_program_untouched(monkeypatch):
    def broken(mode):
        raise RuntimeError("hook failed")

    monkeypatch.setattr(dormant, "_only_and_awake", broken)
    x = torch.arange(4.0)
    watch = RegionWatch()
    watch.start()
    try:
        got = step_by_step(x, N)
        assert _keys_on() and sys.getprofile() is None
    finally:
        note = watch.stop()
    assert note == "stayed awake past the looking: RuntimeError: hook failed"
    assert watch.reads.inputs() == ["[4] float32"], "the reads are whole"
    assert watch._mode is None and torch.equal(got, chain(x, N))
    clean()


def test_the_routes_stay_wrapped_until_the_last_watch_stops():
    import torch.utils._python_dispatch as pd

    def wrapped() -> bool:
        return hasattr(pd._push_on_torch_dispatch_stack, "__wrapped__")

    asleep = [threading.Event(), threading.Event()]
    stop = [threading.Event(), threading.Event()]
    notes = [None, None]

    def region(i):
        if i == 1:
            asleep[0].wait(10)  # the first begins first, so the second may stop first
        watch = RegionWatch()
        watch.start()
        step_by_step(torch.arange(4.0), N)
        if watch._mode.dormancy.slept:
            asleep[i].set()
        stop[i].wait(10)
        notes[i] = watch.stop() or "stopped"

    threads = [threading.Thread(target=region, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    assert all(e.wait(10) for e in asleep), "each thread's watch slept"
    assert wrapped()
    # the second stops first: torch's mode flags are process-wide, put back as each mode
    # found them, so only a last-in-first-out order leaves them as they were
    stop[1].set()
    threads[1].join()
    assert wrapped(), "the other still sleeps"
    stop[0].set()
    threads[0].join()
    assert notes == ["stopped", "stopped"] and not wrapped()
    clean()


def test_a_watch_told_not_to_sleep_passes_through_awake():
    x = torch.arange(4.0)
    (_, on), reads, note = watched(lambda: (step_by_step(x, N), _keys_on()), sleeps=False)
    assert on, "never slept"
    assert note is None and reads.inputs() == ["[4] float32"]
    clean()


def test_a_higher_order_operator_while_it_sleeps_runs_as_without_it():
    # cond's dense kernel asserts no mode is on the stack: reached with the keys off, it
    # would find the sleeping watch (the attack pass's finding); woken, it comes through
    # the mode, which takes itself off as it passes it on
    from torch._higher_order_ops.cond import cond_op

    x = torch.arange(4.0)

    def use(watch):
        return cond_op(torch.tensor(True), torch.sin, torch.cos, (x,))

    got, _ = _asleep_then(use)
    assert torch.equal(got, torch.sin(x))


def test_a_region_ended_on_another_thread_leaves_the_first_threads_modes_seen():
    # the mode cannot be popped from another thread's stack: it stays on the first, as it
    # did awake, but it never sleeps again there and the routes stay wrapped for good
    import torch.utils._python_dispatch as pd

    started, ended, seen = threading.Event(), threading.Event(), {}
    holder = {}

    def first():
        watch = RegionWatch()
        watch.start()
        step_by_step(torch.arange(4.0), N)
        holder["watch"] = watch
        started.set()
        ended.wait(10)
        mine = Counting()
        with mine:
            torch.ones(3) + 1
        seen["ops"] = mine.seen
        left = pd._get_current_dispatch_mode()
        left.__exit__(None, None, None)  # what the capture's end could not pop
        seen["keys"] = _keys_on()

    t = threading.Thread(target=first)
    t.start()
    try:
        assert started.wait(10)
        note = holder["watch"].stop()
        ended.set()
        t.join()
        assert note == "another dispatch mode was left active inside the capture"
        assert seen == {"ops": 2, "keys": False}, "its mode saw the factory and the add"
        assert hasattr(pd._push_on_torch_dispatch_stack, "__wrapped__"), "wrapped for good"
    finally:
        ended.set()
        t.join()
        _unwrap_for_the_next_test()
    clean()


def _unwrap_for_the_next_test():
    """What the watch ended on another thread left for good, undone for the tests after."""
    with dormant._lock:
        dormant._watches -= 1
        if dormant._watches == 0 and dormant._wrapped:
            dormant._unwrap_routes()
            dormant._wrapped = False


def _odd_thread(out):
    """A thread with no watch that leaves torch in a state of its own: a mode entered
    inside inference_mode stays on the stack with the keys put back off."""
    m, n = Counting(), Counting()
    with torch.inference_mode():
        m.__enter__()
    with n:
        torch.ones(2) + 1
    try:
        torch.cond(torch.tensor(True), lambda a: a + 1, lambda a: a - 1, (torch.ones(2),))
        out.append("cond ran")
    except AssertionError as e:
        out.append(f"cond raised: {e}")
    m.__exit__(None, None, None)
    out.append((m.seen, n.seen))


def test_another_threads_state_is_never_touched_while_it_sleeps():
    def run():
        out = []
        t = threading.Thread(target=_odd_thread, args=(out,))
        t.start()
        t.join()
        return out

    alone = run()
    under, _ = _asleep_then(lambda watch: run())
    assert under == alone


def test_its_hook_put_back_by_the_program_after_the_end_leaves_at_once(monkeypatch):
    monkeypatch.setattr(dormant, "_only_and_awake", lambda mode: False)  # never a place
    x = torch.arange(4.0)
    watch = RegionWatch()
    watch.start()
    try:
        step_by_step(x, reads_mode.QUIET + 2)  # the looking over, a hook just set
        pending = sys.getprofile()
        assert pending is not None and pending is watch._mode.dormancy.hook
    finally:
        note = watch.stop()
    assert sys.getprofile() is None, "the capture's end removed it"
    sys.setprofile(pending)  # a program that saved and restores the profile function
    abs(1)  # one event: its first
    assert sys.getprofile() is None
    assert note is None
    clean()


class _Deep(torch.autograd.Function):
    """A backward that runs backwards within itself, 70 deep: past the engine's depth
    limit the innermost runs on a pool thread, under the dispatch state the engine copied
    from this one (the watch on the stack, asleep: the keys off)."""

    @staticmethod
    def forward(ctx, x, depth, innermost):
        ctx.depth, ctx.innermost = depth, innermost
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        if ctx.depth < 70:
            with torch.enable_grad():
                x = torch.ones(2, requires_grad=True)
                torch.autograd.grad(_Deep.apply(x, ctx.depth + 1, ctx.innermost).sum(), x)
        else:
            ctx.innermost()
        return g, None, None


def _deep(innermost) -> None:
    x = torch.ones(2, requires_grad=True)
    _Deep.apply(x, 0, innermost).sum().backward()


def test_a_thread_torch_hands_the_sleeping_state_to_sees_its_modes_as_without_it():
    from torch._higher_order_ops.cond import cond_op

    def innermost_of(out):
        def innermost():
            out["elsewhere"] = threading.get_ident() != main
            mine = Counting()
            with mine:
                torch.ones(2) + 1
            out["seen"] = mine.seen
            out["cond"] = cond_op(torch.tensor(True), torch.sin, torch.cos, (torch.ones(2),))

        return innermost

    main = threading.get_ident()
    alone = {}
    _deep(innermost_of(alone))
    under, _ = _asleep_then(lambda watch: _deep(innermost_of(out := {})) or out)
    assert alone["elsewhere"] and under["elsewhere"], "the innermost ran on a pool thread"
    assert under["seen"] == alone["seen"] == 2
    assert torch.equal(under["cond"], alone["cond"])


def test_its_own_push_on_another_thread_never_lets_it_sleep_under_a_program_mode():
    from torch.utils._python_dispatch import _disable_current_modes

    def repush_there():
        with _disable_current_modes():  # pops and pushes back the watch, on a pool thread
            pass

    def use(watch):
        _deep(repush_there)
        mine = Counting()
        with mine:
            step_by_step(torch.ones(2), 10)
        return mine.seen

    seen, _ = _asleep_then(use)
    assert seen == 11, "the ones and the ten, as without the watch"


def test_a_route_the_program_replaced_meanwhile_is_left_as_the_program_left_it():
    import torch.utils._python_dispatch as pd

    torchs = pd._push_on_torch_dispatch_stack

    def programs(mode):
        return torchs(mode)

    pd._push_on_torch_dispatch_stack = programs  # a patch of the program's, before
    try:

        def unpatch(watch):
            pd._push_on_torch_dispatch_stack = torchs  # ... undone inside the region

        watch = RegionWatch()
        watch.start()
        try:
            step_by_step(torch.arange(4.0), N)
            unpatch(watch)
        finally:
            watch.stop()
        assert pd._push_on_torch_dispatch_stack is torchs, "not the program's old patch"
    finally:
        pd._push_on_torch_dispatch_stack = torchs
    clean()


def test_no_hook_is_set_once_the_thread_pushed_a_mode_of_its_own():
    def push(watch):
        with Counting():
            step_by_step(torch.ones(2), 4)  # past its push: a hook could never fire
            return sys.getprofile(), watch._mode.dormancy.tries

    (profile, tries), _ = _asleep_then(push)
    assert profile is None and tries == 1, "only the first sleep's hook"


def test_a_region_that_wakes_it_more_than_tries_times_stays_awake():
    x = torch.arange(4.0)
    watch = RegionWatch()
    watch.start()
    try:
        for i in range(dormant.TRIES + 2):
            with torch.inference_mode():  # entered awake, it puts the keys back on
                step_by_step(x, N if i == 0 else 4)  # asleep again in it, while it may
        assert watch._mode.dormancy.tries == dormant.TRIES and _keys_on()
    finally:
        note = watch.stop()
    assert note is None
    clean()


def test_an_infra_mode_set_through_torchs_c_function_while_it_sleeps_is_seen():
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

    def use(watch):
        fake = FakeTensorMode()
        torch._C._set_dispatch_mode(fake)  # as torch sets a fake mode back on its exit
        try:
            return torch.empty(3)
        finally:
            torch._C._unset_dispatch_mode(torch._C._TorchDispatchModeKey.FAKE)

    made, _ = _asleep_then(use)
    assert isinstance(made, FakeTensor)


def test_a_program_mode_with_attributes_like_a_watchs_is_its_own():
    class Mine(Counting):
        def __init__(self):
            super().__init__()
            self.thread, self.slept, self.dormancy = threading.get_ident(), True, None

    def push(watch):
        mine = Mine()
        with mine:
            torch.ones(2) + 1
        return mine.seen

    seen, _ = _asleep_then(push)
    assert seen == 2


def test_a_torch_without_one_of_the_routes_gets_a_watch_that_stays_awake(monkeypatch):
    monkeypatch.setattr(dormant, "_ROUTES", (*dormant._ROUTES, ("torch._ops", "_gone")))
    x = torch.arange(4.0)
    (_, on), reads, note = watched(lambda: (step_by_step(x, N), _keys_on()))
    assert on and note is None and reads.inputs() == ["[4] float32"]
    clean()
