"""The round's measured savings beside the advisor's predictions, and its own chains for
pricing (a whole step's call priced at the chain that replays it): `register()` adds them
to the advisor (capture/advise/hooks.py calls it on first use). Plain data at import
(the CLI's parser imports the round's parameters): the chain kinds are registered when
first asked for. What each adds: docs/builtin-round.md, "Its savings beside the
advisor's predictions"."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from graph_harness.capture.advise.hooks import StepChain, measured_savings, own_chains
from graph_harness.capture.advise.measured import Comparison
from graph_harness.capture.replay.kinds import TYPE_CHAIN
from graph_harness.capture.round.params import VARIANTS, steps_changed

if TYPE_CHECKING:
    from graph_harness.capture.advise.costs import Costs, MeasuredSaving
    from graph_harness.capture.advise.groups import Group
    from graph_harness.capture.export.nodes import NodeExport


def _step_chain(variant: str, step: str) -> str | None:
    from graph_harness.capture.round.chains import step_chain

    return step_chain(variant, step)


def round_chains(export: NodeExport) -> StepChain | None:
    """Which chain replays each step's call of this export, when it is the round's graph at
    the chains' shape; None for any other export."""
    from graph_harness.capture.round.chains import chains_replay_its_calls

    if not chains_replay_its_calls(export):
        return None
    return lambda step: _step_chain(export.variant, step)


def round_savings(
    export: NodeExport, groups: list[Group], costs: Costs
) -> tuple[list[Comparison], list[str]]:
    """Each measured variant pair A -> B of the costs, A being this export's variant,
    against the groups in the steps B changes. Notes say why there are none, when the
    costs hold pairs of this variant that cannot be compared."""
    pairs = [s for s in costs.savings if s.a == export.variant]
    if not export.is_round or export.variant not in VARIANTS or not pairs:
        return [], []
    if export.source != "cuda-graph":
        return [], [
            "no measured savings beside the predictions: the costs' rounds were timed as "
            "CUDA graphs, and this export counts CPU dispatches"
        ]
    if export.params != costs.params:
        diff = {
            k: (costs.params or {}).get(k)
            for k in export.params or {}
            if (costs.params or {}).get(k) != export.params.get(k)
        }
        return [], [
            f"no measured savings beside the predictions: the costs' rounds have {diff}, "
            "this export's differ; count the round with those parameters to compare"
        ]
    out = []
    for s in pairs:
        if s.b not in VARIANTS:
            continue
        steps = steps_changed(s.a, s.b)
        members = [g for g in groups if g.steps and set(g.steps) <= steps]
        if members:
            out.append(_compare(export, s, members, costs))
    return out, []


def register() -> None:
    """Register the round's own chains and measured savings with the advisor
    (capture/advise/hooks.py, which calls this on first use); a second call changes
    nothing."""
    own_chains(round_chains)
    measured_savings(round_savings)


def _nonzero(d: dict[str, int]) -> dict[str, int]:
    return {k: v for k, v in d.items() if v}


def _compare(
    export: NodeExport, s: MeasuredSaving, members: list[Group], costs: Costs
) -> Comparison:
    removed: dict[str, int] = defaultdict(int)
    for g in members:
        for t, n in g.removed_by_type.items():
            removed[t] += n
    n = sum(removed.values())
    predicted = sum(g.saving_us for g in members)
    by_type = sum(g.saving_by_type_us for g in members)
    with_b = predicted + _kept_change(export, s, members, costs)
    ranks = tuple(g.rank for g in members)
    if _nonzero(removed) != _nonzero(s.removed_by_type):
        within, note = (
            None,
            (
                f"not the same change: {s.a} -> {s.b} removes {_nonzero(s.removed_by_type)}, "
                f"these candidates {_nonzero(removed)}"
            ),
        )
    elif s.lo <= predicted <= s.hi:
        within, note = True, f"within the measured interval [{s.lo:.1f}, {s.hi:.1f}]"
    else:
        within, note = False, _why_not(predicted, by_type, with_b, n, s, members, costs)
    return Comparison(
        s.a,
        s.b,
        ranks,
        n,
        s.removed_nodes,
        predicted,
        by_type,
        with_b,
        s.measured_us,
        s.lo,
        s.hi,
        within,
        note,
    )


def _kept_change(
    export: NodeExport, s: MeasuredSaving, members: list[Group], costs: Costs
) -> float:
    """What the node that stays saves when B makes it: for groups priced by their own
    chain, the kept node at A's chain less the one node B makes there at B's chain (the
    shipped pack's node at pack-shipped against the fused pack at pack-fused); 0 where
    either chain is missing (the node that stays is then priced unchanged)."""
    total = 0.0
    for g in members:
        if g.own_chain is None:
            continue
        for k in g.kept:
            step = export.nodes[k]["step"]
            ka, kb = _step_chain(s.a, step), _step_chain(s.b, step)
            if ka and kb and costs.slope(ka) is not None and costs.slope(kb) is not None:
                total += costs.slope(ka) - costs.slope(kb)
    return total


def _why_not(
    predicted: float,
    by_type: float,
    with_b: float,
    n: int,
    s: MeasuredSaving,
    members: list[Group],
    costs: Costs,
) -> str:
    """Why a prediction misses its measured interval, in the figures that make it up."""
    lo, hi, m = s.lo / n, s.hi / n, s.measured_us / n
    side = "below" if predicted < s.lo else "above"
    text = (
        f"{side} the measured [{s.lo:.1f}, {s.hi:.1f}]. Per removed node the round saved "
        f"{m:.3f} us [{lo:.3f}, {hi:.3f}]; priced here at {predicted / n:.3f}"
    )
    chains = sorted({g.own_chain for g in members if g.own_chain})
    if chains:
        text += (
            f" ({', '.join(chains)}: the candidate's own nodes replayed in a chain, the "
            f"work each carries included; by node type alone {by_type / n:.3f})"
        )
    else:
        kernel = costs.slope(TYPE_CHAIN["kernel"])
        text += f" (by node type: a one-element kernel node costs {kernel:.3f})"
    best = predicted
    if with_b != predicted:
        best = with_b
        inside = s.lo <= with_b <= s.hi
        text += (
            f". With the node that stays priced at {s.b}'s own chain as well, "
            f"{with_b:.1f}: {'within the interval' if inside else 'still ' + side}"
        )
        if inside:
            return text
    if side == "below":
        text += (
            f". The rest, {s.lo - best:.1f} to {s.hi - best:.1f} us ({(s.lo - best) / n:.3f} "
            f"to {(s.hi - best) / n:.3f} per node), is what the nodes cost in the round "
            "beyond a chain replayed back to back, which chains cannot see"
        )
    else:
        text += (
            f". The round saves {best - s.hi:.1f} to {best - s.lo:.1f} us less than "
            "priced: the node that stays takes on work the prediction counts as gone "
            "with the removed nodes"
        )
    return text
