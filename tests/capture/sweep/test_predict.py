"""A ladder's shared pool predicted from a few captured sizes (capture/sweep/predict.py):
the fit of each request's size across batches, the traces refused with their reason, and
the whole chain against a synthetic step whose truth is the pool model run on its true
traces at every size. CPU only: plain arithmetic."""

from dataclasses import astuple

import pytest

from graph_harness.capture.sweep.alloc_trace import Alloc, Free, Trace
from graph_harness.capture.sweep.allocator_model import shared_pool_reserved
from graph_harness.capture.sweep.predict import (
    NotPredictable,
    fit_sizes,
    partners,
    paths,
    piecewise_traces,
    predict_shared_pool,
    trace_at,
)
from tests.capture.sweep.made_traces import decode_trace as _step
from tests.capture.sweep.made_traces import moe_like as _moe_like

KIB = 1 << 10
MIB = 1 << 20
LADDER = [1, 2, 4, 8, 16, 24, 32, 48, 64]


def _truth(ladder, step=_step) -> list[int]:
    return shared_pool_reserved([step(b) for b in sorted(ladder, reverse=True)])


def test_affine_sizes_are_recovered_exactly():
    fits = fit_sizes({1: _step(1), 64: _step(64)})
    for b in LADDER:
        assert trace_at(_step(1), fits, b) == Trace(events=_step(b).events, live=_step(b).live)
    assert not any(f.flagged for f in fits)


def test_a_fractional_line_rounds_up_to_a_byte():
    def t(size):
        return Trace(events=(Alloc(size),), live=frozenset({0}))

    (fit,) = fit_sizes({1: t(1000), 3: t(1001)})  # slope 1/2
    assert fit.at(2) == 1001  # 1000.5, rounded up


@pytest.mark.parametrize("captured", [(1, 64), (1, 16, 64), (4, 8, 32)])
def test_the_prediction_from_a_few_sizes_equals_the_truth(captured):
    # Two or three sizes, the ladder's ends or not: the traces are affine, so every
    # predicted trace is the true one and the pool model gives the same bytes.
    pred = predict_shared_pool({b: _step(b) for b in captured}, LADDER)
    assert pred.ladder == tuple(sorted(LADDER, reverse=True))
    assert list(pred.reserved_after) == _truth(LADDER)
    assert pred.flagged == ()


def test_the_truth_is_not_the_sum_of_the_sizes_alone():
    # Not vacuous: the shared pool is far below the sizes' own pools summed.
    alone = sum(shared_pool_reserved([_step(b)])[0] for b in LADDER)
    assert _truth(LADDER)[-1] < alone


def _jumping(b):
    return MIB if b < 8 else 4 * MIB  # a workspace whose algorithm changes at batch 8


def test_a_workspace_that_jumps_is_flagged_and_predicted_at_its_largest():
    pred = predict_shared_pool({b: _step(b, _jumping) for b in (1, 4, 16)}, LADDER)
    assert pred.flagged == (0,)
    # predicted at 4 MiB at every size: the truth where the batch is 8 or more, and
    # never below it
    assert pred.reserved >= _truth(LADDER, lambda b: _step(b, _jumping))[-1]


def test_a_jump_between_two_sizes_is_not_seen():
    # With two sizes any pair lies on a line: the third size is what flags it.
    fits = fit_sizes({1: _step(1, _jumping), 16: _step(16, _jumping)})
    assert not fits[0].flagged


def test_traces_of_different_lengths_are_refused_with_the_reason():
    longer = Trace(events=(*_step(4).events, Alloc(512)), live=_step(4).live)
    with pytest.raises(NotPredictable, match=r"batch 1 makes 18 allocator events, batch 4 19"):
        fit_sizes({1: _step(1), 4: longer})


def test_an_event_of_another_kind_is_refused_with_its_place():
    ev = list(_step(4).events)
    ev[2], ev[3] = ev[3], ev[2]  # a free before the alloc it followed
    with pytest.raises(NotPredictable, match=r"event 2: batch 1 has alloc of 262144 B"):
        fit_sizes({1: _step(1), 4: Trace(events=tuple(ev), live=_step(4).live)})


def test_another_live_set_is_refused():
    other = Trace(events=_step(4).events, live=frozenset({0}))
    with pytest.raises(NotPredictable, match=r"keeps allocations \[0, 9\] live"):
        fit_sizes({1: _step(1), 4: other})


def test_one_size_is_refused():
    with pytest.raises(NotPredictable, match="a line needs two"):
        predict_shared_pool({8: _step(8)}, LADDER)


def _specialised(batch: int) -> Trace:
    """A compiled step as Inductor makes it: batch 1 specialised, a kernel fewer and one
    request less (no scratch), every other batch the same path (a scratch of its own)."""
    t = _step(batch)
    if batch == 1:
        return t
    events = (*t.events, Alloc(32 * KIB * batch), Free(len(t.allocs)))
    return Trace(events=events, live=t.live)


def test_a_sample_on_a_path_of_its_own_is_used_at_its_size_and_the_line_elsewhere():
    # The truth: batch 1's own trace at 1, the other path at every other size.
    pred = predict_shared_pool({b: _specialised(b) for b in (1, 16, 64)}, LADDER)
    assert pred.own_path == (1,)
    assert list(pred.reserved_after) == _truth(LADDER, _specialised)
    # not vacuous: the line through 16 and 64 at batch 1 would have another trace there
    assert len(_specialised(1).events) != len(_specialised(2).events)


def test_two_samples_on_two_paths_are_predicted_piecewise_near_the_truth():
    # No line on one path: each size between 1 and 64 on 64's path, the scratch 1 has no
    # partner for held at 64's size; the low end on 1's path, without it. The pool is a
    # staircase, not monotone in a request's size: near the truth, not above it.
    traces = {b: _specialised(b) for b in (1, 64)}
    point = predict_shared_pool(traces, LADDER)
    low = predict_shared_pool(traces, LADDER, low=True)
    truth = _truth(LADDER, _specialised)
    assert [c[:3] for c in map(astuple, point.path_changes)] == [(1, 64, 1)]
    for fit in (point, low):
        assert all(abs(p / t - 1) < 0.05 for p, t in zip(fit.reserved_after, truth, strict=True))
    assert point.reserved_after != tuple(truth)  # not vacuous: between them it is a guess


def test_three_paths_of_one_sample_each_differing_too_much_are_refused():
    traces = {b: _specialised(b) for b in (1, 64)}  # a third path: another live set at 2
    traces[2] = Trace(events=_specialised(2).events, live=frozenset({0}))
    with pytest.raises(NotPredictable, match="batch 1 makes 18 allocator events") as e:
        predict_shared_pool(traces, LADDER)
    assert "the samples take 3 paths (batch 1; batch 2; batch 64)" in str(e.value)
    assert "between batch 1 and 2 a kept request (an output) has no partner" in str(e.value)


def test_samples_on_three_paths_a_few_requests_apart_are_bracketed():
    traces = {b: _moe_like(b) for b in (1, 16, 64)}
    assert len({len(t.events) for t in traces.values()}) == 3  # three paths
    point = predict_shared_pool(traces, LADDER)
    low = predict_shared_pool(traces, LADDER, low=True)
    truth = _truth(LADDER, _moe_like)
    assert [(c.lo, c.hi, c.held) for c in point.path_changes] == [(1, 16, 1), (16, 64, 1)]
    assert all(
        lo <= t <= p
        for lo, t, p in zip(low.reserved_after, truth, point.reserved_after, strict=True)
    )
    assert abs(point.reserved / truth[-1] - 1) < 0.05


def _grows_from_32(batch: int) -> Trace:
    """A path that changes inside the ladder: from batch 32 an extra buffer kept live."""
    t = _step(batch)
    if batch < 32:
        return t
    return Trace(events=(*t.events, Alloc(MIB * batch)), live=t.live | {len(t.allocs)})


def _odd_at_16(batch: int) -> Trace:
    return _grows_from_32(64) if batch == 16 else _step(batch)


@pytest.mark.parametrize("step", [_grows_from_32, _odd_at_16])
def test_a_sample_off_the_others_path_other_than_the_smallest_is_refused(step):
    # the largest alone on its path (the line through 1 and 16 would miss 32 and 48 by a
    # quarter), or one in the middle: no prediction
    traces = {b: step(b) for b in (1, 16, 64)}
    with pytest.raises(NotPredictable, match="allocator events") as e:
        predict_shared_pool(traces, LADDER)
    on = "batch 1, 16; batch 64" if step is _grows_from_32 else "batch 1, 64; batch 16"
    assert f"the samples take 2 paths ({on})" in str(e.value)


def _chain(*sizes: int, keep: int = 0) -> Trace:
    """Requests made and freed in turn, the first `keep` kept."""
    ev: list = []
    for n, size in enumerate(sizes):
        ev.append(Alloc(size))
        if n >= keep:
            ev.append(Free(n))
    return Trace(events=tuple(ev), live=frozenset(range(keep)))


def test_each_size_is_written_on_its_neighbours_traces_exactly():
    # 1 and 16 on two paths (a scratch from 2 on): at 8 the larger one's requests, each
    # on the line through its partner at 1, the scratch at 16's size; the low end the
    # smaller one's; at 64, above them, 16's on the same lines.
    k = MIB
    t = {1: _chain(100 * k, 1000 * k, keep=1), 16: _chain(1600 * k, KIB, 16000 * k, keep=1)}
    groups = paths(t)
    order = (64, 16, 8, 1)
    (at64, at16, at8, at1), (change,) = piecewise_traces(t, order, groups)
    assert (at16, at1) == (t[16], t[1])
    assert at8 == _chain(800 * k, KIB, 8000 * k, keep=1)
    assert at64 == _chain(6400 * k, KIB, 64000 * k, keep=1)
    (_, _, low8, _), _ = piecewise_traces(t, order, groups, low=True)
    assert low8 == _chain(800 * k, 8000 * k, keep=1)
    assert (change.lo, change.hi, change.held) == (1, 16, 1)
    # below the samples: the nearest one's (2), on the line through 2 and 16
    t2 = {2: _chain(200 * k, KIB, 2000 * k, keep=1), 16: _chain(1600 * k, 16000 * k, keep=1)}
    (at1,), _ = piecewise_traces(t2, (1,), paths(t2))
    assert at1 == _chain(100 * k, KIB, 1000 * k, keep=1)


def test_requests_are_matched_only_where_their_sizes_can_be_one_request():
    # From 2 on a 1 KiB scratch before a 33 MiB activation: matching by order alone would
    # pair the scratch with the activation at 1 (review, session 29)
    def step(b):
        return _chain(64 * KIB * b, *([KIB] if b >= 2 else []), 32 * MIB + MIB * b, KIB, keep=1)

    t = {1: step(1), 16: step(16)}
    assert partners(t[16], 16, t[1], 1) == {0: 0, 2: 1, 3: 2}
    ladder = [1, 2, 4, 8, 16]
    point = predict_shared_pool(t, ladder)
    truth = shared_pool_reserved([step(b) for b in sorted(ladder, reverse=True)])
    assert all(abs(p / r - 1) < 0.05 for p, r in zip(point.reserved_after, truth, strict=True))


def test_a_kept_request_without_a_partner_is_refused():
    # an output kept from 256 on, under 5% of the bytes: kept once per size above the
    # change, so where the path changes moves the pool by up to a third (review)
    def step(b):
        return _chain(MIB * b, *([24 * MIB] if b >= 256 else []), 600 * MIB, keep=1 + (b >= 256))

    with pytest.raises(NotPredictable, match="a kept request .* has no partner"):
        predict_shared_pool({1: step(1), 512: step(512)}, [1, 8, 64, 256, 512])


def test_paths_that_differ_only_in_when_they_free_are_said_with_both_orders():
    def step(b):
        a, m = 64 * KIB * b, MIB * b
        early = [Alloc(a), Alloc(m), Free(1), Alloc(m), Free(2)]  # batch 1's order
        ev = early if b == 1 else [Alloc(a), Alloc(m), Alloc(m), Free(1), Free(2)]
        return Trace(events=tuple(ev), live=frozenset({0}))

    t = {1: step(1), 64: step(64)}
    point = predict_shared_pool(t, LADDER)
    assert [(c.lo, c.hi, c.held) for c in point.path_changes] == [(1, 64, 0)]
    (at8,), _ = piecewise_traces(t, (8,), paths(t))
    (low8,), _ = piecewise_traces(t, (8,), paths(t), low=True)
    assert at8 == step(8)  # the larger one's order, each size on its line
    late = (Alloc(64 * KIB * 8), Alloc(8 * MIB), Free(1), Alloc(8 * MIB), Free(2))
    assert low8.events == late  # the smaller one's order at 8's sizes
