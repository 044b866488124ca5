"""On the CPU counter a view is an op whose outputs alias its inputs, decided as it runs
(capture/graph/dispatch.py): `aten._unsafe_view` (no alias annotation in its schema) and an op
known to be a view by aliasing alone are not counted; ops that write still are."""

import torch

from graph_harness.capture import capture_and_count
from graph_harness.capture.graph.dispatch import DispatchCounter

# An op whose schema says nothing of aliasing, so only what it returns can tell: one
# implementation returns a view of its input, the other a new tensor.
_LIB = torch.library.Library("gh_views_test", "DEF")
_LIB.define("reshaped(Tensor x) -> Tensor")
_LIB.define("copied(Tensor x) -> Tensor")
_LIB.define("doubled_(Tensor x) -> Tensor")  # in place by its name, its schema silent
_LIB.impl("reshaped", lambda x: x.view(-1), "CPU")
_LIB.impl("copied", lambda x: x.clone().view(-1), "CPU")
_LIB.impl("doubled_", lambda x: x.mul_(2), "CPU")


def types_of(fn) -> list[tuple[str, str]]:
    with DispatchCounter() as c:
        fn()
    return [(r.type, r.name) for r in c.records]


def test_views_are_found_by_aliasing_not_by_name():
    x = torch.randn(4, 6)
    out = torch.empty(4, 6)
    got = types_of(
        lambda: (
            torch.ops.aten._unsafe_view(x, [24]),  # no annotation: aliasing says view
            torch.ops.gh_views_test.reshaped(x),  # a name no list could hold
            torch.ops.gh_views_test.copied(x),  # the same schema, a new tensor: work
            torch.ops.gh_views_test.doubled_(out),  # returns its argument, written in place
            x.t(),  # the schema says view
            torch.add(x, 1, out=out),  # returns its argument, but writes it
            out.add_(1),  # in place: writes
            x.clone(),
        )
    )
    assert got == [
        ("view", "aten._unsafe_view.default"),
        ("view", "gh_views_test.reshaped.default"),
        ("aten", "gh_views_test.copied.default"),
        ("aten", "gh_views_test.doubled_.default"),
        ("view", "aten.t.default"),
        ("aten", "aten.add.out"),
        ("aten", "aten.add_.Tensor"),
        ("aten", "aten.clone.default"),
    ]


def test_an_unsafe_view_in_a_step_is_not_counted():
    # a batched matmul of a 3-d input by a matrix: ATen reshapes it to 2-d, multiplies,
    # and returns the result through _unsafe_view (a view of the product, launching
    # nothing): the count is the matmul and the add, nothing else
    x, w = torch.randn(2, 3, 8), torch.randn(8, 5)

    def step():
        return torch.matmul(x, w) + 1

    e = capture_and_count(step, device="cpu", warmup=0)
    kinds = [(n["type"], n["kernel"]) for n in e.nodes]
    assert ("view", "aten._unsafe_view.default") in kinds
    assert [k for t, k in kinds if t == "aten"] == ["aten.mm.default", "aten.add.Tensor"]
    assert e.total == 2 and len(e.frame()) == 2
