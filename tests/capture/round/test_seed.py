"""The seed, side by side: the seed's figures kept in one module, ours computed from a
run's exports and replay document, each checked against a count made another way."""

import json

import pytest
import torch

from graph_harness.capture import capture_and_count, count_round
from graph_harness.capture.replay.document import ReplayResult
from graph_harness.capture.round import seed
from graph_harness.capture.round.exactness import KINDS as EXACT_KINDS
from graph_harness.capture.round.exactness import exactness
from graph_harness.capture.round.params import VARIANTS, RoundParams
from graph_harness.capture.round.side_by_side import NOT_MEASURED, side_by_side
from graph_harness.kernels import pack_scores_ids_shipped
from graph_harness.reports.report import seed_section
from tests.capture.export.valid_documents import replay_doc

P = RoundParams(stages=2, rows=2, k=32, world=2, rank=1, shard=64)


@pytest.fixture(scope="module")
def cpu_exports():
    return {v: count_round(P, v, "cpu").export for v in VARIANTS}


def by_figure(rows):
    return {r.figure: r for r in rows}


def test_the_seeds_own_figures_agree_with_each_other():
    # 96 nodes removed is both changes; the price per node times 96 is the saving.
    assert seed.REMOVED_BY_BOTH == seed.REMOVED_BY_DIRECT_COMPACTION + seed.REMOVED_BY_FUSED_PACK
    for us, ms in zip(seed.US_PER_REMOVED_NODE, seed.SAVED_MS_PER_ROUND):
        assert round(us * seed.REMOVED_BY_BOTH / 1000, 3) == ms


def test_our_figures_on_the_cpu_are_the_runs_own(cpu_exports):
    rows = by_figure(side_by_side(cpu_exports))
    # Another route to the shipped pack's dispatches: one call of it alone, counted.
    indices = torch.randint(-1, P.shard, (P.rows, P.k))
    scores, out = torch.randn(P.rows, P.k), torch.empty(P.rows, P.k, 2)
    rank = torch.tensor(P.rank, dtype=torch.int32)
    alone = capture_and_count(
        lambda: pack_scores_ids_shipped(indices, scores, rank, P.shard, out), device="cpu"
    ).total
    assert alone > seed.SHIPPED_PACK_KERNELS_PER_CALL  # the fills
    shipped = rows["shipped pack, kernels per call"]
    assert (
        shipped.seed == "8"
        and shipped.ours == f"{alone} CPU dispatches (not graph nodes), 2 of them fills"
    )
    assert "`torch.where` against a Python scalar" in shipped.why
    # The direct-write compaction removes the copy step: counted by step, not by totals.
    copies = int(cpu_exports["shipped"].counts("step")["copy"])
    direct = rows["direct-write compaction, nodes removed per round"]
    assert direct.ours == f"{copies} CPU dispatches (not graph nodes)" and copies == 2 * P.stages
    assert direct.why == f"at {P.stages} stages, not 24"
    assert rows["stages per round"].ours == str(P.stages)
    # What the CPU cannot measure says so.
    for figure in (
        "Inductor-fused shipped pack, graph nodes per call",
        "fused pack against the Inductor-fused pack, nodes removed per round",
        "both changes, time saved per round (ms)",
        "price per removed node (us)",
        "bit-exactness against the shipped round",  # side_by_side given no cells
    ):
        assert rows[figure].ours.startswith(NOT_MEASURED), rows[figure]


def test_times_come_from_the_replay_document(cpu_exports):
    doc = replay_doc()
    doc["savings"][0]["a"] = "shipped-compiled"
    replay = ReplayResult.from_dict(json.loads(json.dumps(doc)))
    s = doc["savings"][0]
    rows = by_figure(side_by_side(cpu_exports, replay))
    ms = rows["both changes, time saved per round (ms)"]
    want = s["measured_us"] / 1000
    assert ms.ours.startswith(f"{want:.3f} ({s['measured_lo'] / 1000:.3f}-")
    assert not seed.SAVED_MS_PER_ROUND[0] <= want <= seed.SAVED_MS_PER_ROUND[1]
    assert ms.why.startswith("outside the seed's range"), ms.why
    per = rows["price per removed node (us)"]
    n = s["removed_nodes"]
    assert per.ours == (
        f"{s['measured_us'] / n:.3f} ({s['measured_lo'] / n:.3f}-{s['measured_hi'] / n:.3f}) "
        f"over {n} nodes"
    )


def test_the_report_section_has_every_row(cpu_exports):
    md = "\n".join(seed_section(cpu_exports, None))
    assert md.startswith("## The seed, side by side")
    for r in side_by_side(cpu_exports):
        assert f"| {r.figure} | {r.seed} | {r.ours} |" in md


@pytest.mark.gpu
def test_our_figures_on_the_gpu_are_the_graphs_own():
    from graph_harness.capture.round.decode import compiled_shipped_pack

    exports = {v: count_round(P, v, "cuda").export for v in VARIANTS}
    rows = by_figure(side_by_side(exports))
    # Another route: one call of each pack alone, captured into its own graph and counted.
    indices = torch.randint(-1, P.shard, (P.rows, P.k), device="cuda")
    scores = torch.randn(P.rows, P.k, device="cuda")
    out = torch.empty(P.rows, P.k, 2, device="cuda")
    rank = torch.tensor(P.rank, dtype=torch.int32, device="cuda")
    args = (indices, scores, rank, P.shard, out)
    alone = capture_and_count(lambda: pack_scores_ids_shipped(*args), device="cuda").total
    shipped = rows["shipped pack, kernels per call"]
    assert shipped.ours.startswith(f"{alone} kernel nodes, "), shipped
    assert (shipped.why == "") == (alone == seed.SHIPPED_PACK_KERNELS_PER_CALL)
    compiled = compiled_shipped_pack()
    fused_alone = capture_and_count(lambda: compiled(*args), device="cuda").total
    inductor = rows["Inductor-fused shipped pack, graph nodes per call"]
    assert inductor.ours == str(fused_alone), inductor
    removed = rows["fused pack against the Inductor-fused pack, nodes removed per round"]
    assert removed.ours == f"{(fused_alone - 1) * P.stages} kernel nodes", removed


# --- the bit-exactness matrix, measured --------------------------------------------------


def _counted(device):
    return {v: count_round(P, v, device) for v in VARIANTS}


def _buffer_words(rnd, kind: str) -> int:
    """Another route to the words compared: the round's buffers, sized from their bytes."""
    sizes = [t.numel() * t.element_size() for k, t in rnd.outputs().items() if k.endswith(kind)]
    return sum(sizes) // 4


def test_every_variant_is_measured_equal_to_shipped_on_the_cpu():
    counted = _counted("cpu")
    cells = exactness(counted)
    assert {(c.variant, c.kind) for c in cells} == {
        (v, k) for v in VARIANTS if v != "shipped" for k in EXACT_KINDS
    }
    for c in cells:
        assert c.exact, c
        assert c.words == _buffer_words(counted["shipped"].round, c.kind) > 0
    row = by_figure(side_by_side({v: x.export for v, x in counted.items()}, None, cells))
    assert "equal to shipped, bit for bit" in row["bit-exactness against the shipped round"].ours
    md = "\n".join(seed_section({v: x.export for v, x in counted.items()}, None, cells))
    assert "| fused | equal | equal | equal |" in md


def test_a_variant_that_computes_otherwise_is_found():
    counted = _counted("cpu")
    fused = counted["fused"].round
    pack = fused._pack

    def off_by_one_bit(*args):  # the pack, then one bit of one score flipped
        pack(*args)
        out = args[-1]
        out.view(torch.int32).view(-1)[5] ^= 1

    fused._pack = off_by_one_bit
    counted["fused-pack"].round.run = lambda: None  # writes nothing: its random fill stays
    cells = {(c.variant, c.kind): c for c in exactness(counted)}
    # one word per stage's call (what the round selects from it may change downstream)
    assert cells["fused", "slot"].differing == P.stages
    for kind in EXACT_KINDS:  # random bits agree with the shipped outputs nowhere, nearly
        c = cells["fused-pack", kind]
        assert c.differing >= 0.9 * c.words, c
    exports = {v: x.export for v, x in counted.items()}
    row = by_figure(side_by_side(exports, None, list(cells.values())))
    got = row["bit-exactness against the shipped round"]
    assert f"fused slot: {P.stages} of " in got.ours and got.why


@pytest.mark.gpu
def test_every_variant_is_measured_equal_to_shipped_on_the_gpu():
    counted = _counted("cuda")
    assert all(c.captured is not None for c in counted.values())  # the graphs replayed
    cells = exactness(counted)
    assert len(cells) == (len(VARIANTS) - 1) * len(EXACT_KINDS)
    for c in cells:
        assert c.exact, c
        assert c.words == _buffer_words(counted["shipped"].round, c.kind) > 0
