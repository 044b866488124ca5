"""One meaning of a scope label generalised and one natural order (capture/attribution/
labels.py), checked where the three former copies disagreed: `blocks/3/attn` became
`blocks/*/attn` in the advisor's groups and stayed `blocks/3/attn` in the budgets'
suggestions and the profile's groups; `stage10/pack` sorted before `stage2/pack` in the
scope tree and after it in the budgets' list of scopes.
"""

import pytest
import torch

from graph_harness.capture import capture_and_count, scope
from graph_harness.capture.advise import advise
from graph_harness.capture.attribution.labels import generalize, natural
from graph_harness.capture.attribution.rollup import scope_tree, tree_order
from graph_harness.capture.budget.limits import BudgetError, check_budget
from graph_harness.capture.profile.node_stats import group_of


@pytest.mark.parametrize(
    "label, general",
    [
        ("layers.3.attention", "layers.*.attention"),  # a ModuleList index
        ("model.layers.10.self_attn", "model.layers.*.self_attn"),
        ("stage3/pack", "stage*/pack"),  # the round's stage
        ("3", "*"),
        ("h.0", "h.*"),
        # where the copies disagreed: numbered parts between slashes, a stage not first
        ("blocks/3/attn", "blocks/*/attn"),
        ("model.stage2/pack", "model.stage*/pack"),
        ("layers.3/q", "layers.*/q"),
        # not numbered parts: left as they are
        ("block3", "block3"),
        ("layers.3a", "layers.3a"),
        ("stage3", "stage3"),  # a stage is `stageN/step`; alone it is a name like any
        ("unscoped", "unscoped"),
    ],
)
def test_generalize(label, general):
    assert generalize(label) == general
    assert generalize(general) == general  # idempotent: a pattern is its own pattern


def test_natural_order_numbers_by_value_parents_first():
    labels = ["stage10/pack", "stage2/pack", "layers.10", "layers.2.mlp", "layers", "layers.2"]
    labels += ["layers.2.attention", "norm", "w10", "w2"]
    assert sorted(labels, key=natural) == [
        "layers",
        "layers.2",
        "layers.2.attention",
        "layers.2.mlp",
        "layers.10",
        "norm",
        "stage2/pack",
        "stage10/pack",
        "w2",
        "w10",
    ]
    assert sorted(labels, key=tree_order) == sorted(labels, key=natural)


def _blocks_step(names):
    """Two elementwise ops (a chain: one could become one kernel) in each scope named."""
    x = torch.ones(8)

    def step():
        for name in names:
            with scope(name):
                x.add_(1.0)
                x.mul_(0.5)

    return step


BLOCKS = ["blocks/3/attn", "blocks/4/attn"]


def test_advisor_groups_slashed_blocks_as_one():
    export = capture_and_count(_blocks_step(BLOCKS), device="cpu", warmup=1)
    (group,) = [g for g in advise(export).groups if g.scope == "blocks/*/attn"]
    assert group.occurrences == 2 and set(group.scopes) == set(BLOCKS)


def test_budget_suggests_the_generalised_block():
    export = capture_and_count(_blocks_step(BLOCKS), device="cpu", warmup=1)
    with pytest.raises(BudgetError, match=r'did you mean "blocks/\*/attn"'):
        check_budget(export, per_scope={"attn": 1})


def test_profile_groups_slashed_blocks_as_one():
    node = {"stage": None, "step": "blocks/3/attn", "scope": "blocks/3/attn"}
    assert group_of(node) == "blocks/*/attn"
    assert group_of({**node, "stage": 3, "step": "pack", "scope": "stage3/pack"}) == "pack"


def test_scope_tree_puts_stage_2_before_stage_10():
    names = [f"stage{s}/pack" for s in (10, 2, 1)]
    export = capture_and_count(_blocks_step(names), device="cpu", warmup=1)
    tree = scope_tree(export.frame())
    assert list(tree.scope) == ["(all)", "stage1/pack", "stage2/pack", "stage10/pack"]
